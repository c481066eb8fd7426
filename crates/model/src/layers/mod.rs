//! Building blocks shared by every architecture. Each struct mirrors a module of the Hugging
//! Face checkpoint, so tensor names follow from the prefix it is loaded with.

pub mod attention;
pub mod decoder_layer;
pub mod feed_forward;
pub mod linear;
pub mod mlp;
pub mod moe;
pub mod norm;
pub mod rope;
pub mod step;
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
    gather_rows_into(data, width, rows, &mut out);
    out
}

/// [`gather_rows`] into `out` (replacing what it held; its capacity is kept).
pub(crate) fn gather_rows_into(data: &[f32], width: usize, rows: &[usize], out: &mut Vec<f32>) {
    out.clear();
    for &r in rows {
        out.extend_from_slice(&data[r * width..][..width]);
    }
}

/// `buffer` made `len` long, for a caller that overwrites every element: what it holds is
/// left from earlier use (zeros where it grew).
pub(crate) fn resized(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buffer.resize(len, 0.0);
    buffer
}

/// `buffer` made `len` long and zeroed, for a caller that accumulates into it.
pub(crate) fn zeroed(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buffer.clear();
    buffer.resize(len, 0.0);
    buffer
}
