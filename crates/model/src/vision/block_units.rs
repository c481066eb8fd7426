//! The two row-wise halves of a pre-norm encoder block (SigLIP's layers, Qwen2.5-VL's blocks),
//! in units of `pause.unit_rows()` rows with a pause point after each (`pause.rs`):
//!
//! ```text
//! qkv = qkv_proj(norm1(h))                          normed_qkv
//! h += out_proj(attention(qkv)); h += mlp(norm2(h))   residual_tail
//! ```
//!
//! Each row is computed as one unit of all rows would compute it.

use super::par_rows;
use super::pause::{in_units, Pause};
use crate::layers::linear::Linear;

/// A norm over rows `width` wide: `(x, out)`.
pub(crate) type RowNorm<'a> = &'a (dyn Fn(&[f32], &mut [f32]) + Sync);

/// An MLP over `rows` rows of `x` that adds its output to `y`: `(x, rows, y)`.
pub(crate) type RowMlp<'a> = &'a (dyn Fn(&[f32], usize, &mut [f32]) + Sync);

/// `qkv_proj(norm(states))` for `states: [rows, width]`: `[rows, qkv_proj.out_dim()]`.
pub(crate) fn normed_qkv(
    states: &[f32],
    width: usize,
    norm: RowNorm,
    qkv_proj: &Linear,
    pause: &dyn Pause,
) -> Vec<f32> {
    let (rows, out_width) = (states.len() / width, qkv_proj.out_dim());
    let mut qkv = vec![0f32; rows * out_width];
    in_units(rows, pause, |unit| {
        let mut normed = vec![0f32; unit.len() * width];
        let x = &states[unit.start * width..unit.end * width];
        par_rows(x, &mut normed, width, norm);
        let out = &mut qkv[unit.start * out_width..unit.end * out_width];
        qkv_proj.forward_into(&normed, unit.len(), out);
    });
    qkv
}

/// `states += out_proj(attended)`, then `states += mlp(norm(states))`, for `states` and
/// `attended` `[rows, width]`; `mlp(x, rows, states)` adds its output to `states`.
pub(crate) fn residual_tail(
    states: &mut [f32],
    attended: &[f32],
    width: usize,
    out_proj: &Linear,
    norm: RowNorm,
    mlp: RowMlp,
    pause: &dyn Pause,
) {
    in_units(states.len() / width, pause, |unit| {
        let n = unit.len();
        let x = &mut states[unit.start * width..unit.end * width];
        out_proj.forward_add(&attended[unit.start * width..unit.end * width], n, x);
        let mut normed = vec![0f32; n * width];
        par_rows(x, &mut normed, width, norm);
        mlp(&normed, n, x);
    });
}
