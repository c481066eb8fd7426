//! Building blocks shared by every architecture. Each struct mirrors a module of the Hugging
//! Face checkpoint, so tensor names follow from the prefix it is loaded with.

pub mod attention;
pub mod feed_forward;
pub mod linear;
pub mod mlp;
pub mod moe;
pub mod norm;
pub mod rope;
pub mod weights;

/// A `len`-long vector filled by `write` (a kernel that writes every element of uninitialised
/// memory, so the buffer is not zeroed first). Safety: `write` must initialise all `len`
/// elements.
pub(crate) unsafe fn vec_written_by(
    len: usize,
    write: impl FnOnce(&mut [std::mem::MaybeUninit<f32>]),
) -> Vec<f32> {
    let mut v = Vec::with_capacity(len);
    write(&mut v.spare_capacity_mut()[..len]);
    // SAFETY: the caller guarantees `write` initialised all `len` elements.
    unsafe { v.set_len(len) };
    v
}

/// The rows `rows` (in that order) of a row-major `[_, width]` matrix, as a new `[rows, width]`.
pub(crate) fn gather_rows(data: &[f32], width: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for &r in rows {
        out.extend_from_slice(&data[r * width..][..width]);
    }
    out
}
