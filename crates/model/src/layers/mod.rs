//! Building blocks shared by every architecture. Each struct mirrors a module of the Hugging
//! Face checkpoint, so tensor names follow from the prefix it is loaded with.

pub mod attention;
pub mod linear;
pub mod mlp;
pub mod norm;
pub mod rope;

/// The rows `rows` (in that order) of a row-major `[_, width]` matrix, as a new `[rows, width]`.
pub(crate) fn gather_rows(data: &[f32], width: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for &r in rows {
        out.extend_from_slice(&data[r * width..][..width]);
    }
    out
}
