//! Bidirectional softmax attention of the vision encoders: every row attends to every row of its
//! span (its image for SigLIP and Qwen2.5-VL's full-attention blocks, its window for Qwen2.5-VL's
//! window blocks), no mask inside a span.
//!
//! Runs per query row and head, each with the kernels' fixed reduction orders (scores, softmax,
//! weighted sum), so a row's output depends only on its span's rows, never on the other images
//! of the batch.

use std::ops::Range;

use rayon::prelude::*;

use crate::kernels::vector::{best_ops, VectorOps};

/// `qkv: [rows, 3 · hidden]` (q, k, v side by side, each `[heads, head_dim]`) → `[rows, hidden]`,
/// scores scaled by `head_dim^-½`; `span(row)` is the range of rows that `row` attends to.
pub(crate) fn span_attention(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    span: impl Fn(usize) -> Range<usize> + Sync,
) -> Vec<f32> {
    let d = hidden / heads;
    let rows = qkv.len() / (3 * hidden);
    let scale = (d as f32).powf(-0.5);
    let ops = best_ops(d);
    let mut out = vec![0f32; rows * hidden];
    out.par_chunks_mut(hidden)
        .enumerate()
        .for_each(|(row, out_row)| {
            let keys = span(row);
            let mut scores = vec![0f32; keys.len()];
            let mut offsets = vec![0usize; keys.len()];
            for head in 0..heads {
                let q = &qkv[row * 3 * hidden + head * d..][..d];
                for (offset, key) in offsets.iter_mut().zip(keys.clone()) {
                    *offset = key * 3 * hidden + hidden + head * d;
                }
                ops.group_scores(q, d, qkv, &offsets, scale, &mut scores);
                let max = ops.max_finite(&scores).unwrap_or(0.0);
                let sum = ops.exp_sum(&mut scores, max);
                let inverse = 1.0 / sum;
                scores.iter_mut().for_each(|s| *s *= inverse);
                offsets.iter_mut().for_each(|o| *o += hidden);
                ops.group_weighted_sum(&scores, qkv, &offsets, d, &mut out_row[head * d..][..d]);
            }
        });
    out
}
