//! Bidirectional softmax attention of the vision encoders: every row attends to every row of its
//! span (its image for SigLIP and Qwen2.5-VL's full-attention blocks, its window for Qwen2.5-VL's
//! window blocks), no mask inside a span.
//!
//! A span of at least [`MATMUL_MIN_ROWS`] rows (an image's thousands of patches) runs as two
//! matrix products per head on the f32 tile kernels: the scores of a block of query rows against
//! every key (`Q·Kᵀ`, the keys packed as a weight matrix), `exp(score - max)` per row, then `P·V`
//! (the values packed transposed) divided by each row's sum of weights, in f32 or, where the
//! encoder runs in bf16, in bf16 (queries, keys, weights and values rounded to bf16, sums in f32:
//! [`attention_dtype`]). A smaller
//! span (a window of a few dozen rows) runs per query row with the vector kernels. Either way each row's output comes from fixed reduction orders over
//! its own span's rows, so it never depends on the other images of the batch.

use std::ops::Range;

use rayon::prelude::*;

use super::pause::{in_units, Pause};
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::kernels::vector::{best_ops, elementwise_ops, VectorOps};

/// Spans at least this long run as matrix products (below it, packing the keys and values
/// costs more than it saves).
const MATMUL_MIN_ROWS: usize = 128;

/// Query rows whose scores are held at once (`QUERY_BLOCK × span` floats).
const QUERY_BLOCK: usize = 512;

/// The dtype an encoder whose matrices are kept as `dtype` multiplies its long spans'
/// attention in: bf16 when it was asked to run in bf16, else f32.
pub(crate) fn attention_dtype(dtype: Option<WeightDtype>) -> WeightDtype {
    match dtype {
        Some(WeightDtype::BF16) => WeightDtype::BF16,
        _ => WeightDtype::F32,
    }
}

/// `qkv: [rows, 3 · hidden]` (q, k, v side by side, each `[heads, head_dim]`) → `[rows, hidden]`,
/// scores scaled by `head_dim^-½`; `span(row)` is the range of rows that `row` attends to (the
/// rows of a span attend to the span itself). Spans that run as matrix products multiply in
/// `products` (f32 or bf16). A pause point follows each head of a span run as products and
/// each unit of rows run one at a time.
pub(crate) fn span_attention(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    products: WeightDtype,
    span: impl Fn(usize) -> Range<usize> + Sync,
    pause: &dyn Pause,
) -> Vec<f32> {
    let rows = qkv.len() / (3 * hidden);
    let mut out = vec![0f32; rows * hidden];
    let mut row = 0;
    while row < rows {
        let keys = span(row);
        let own = keys.start == row && keys.end > row && keys.end <= rows;
        if own && keys.len() >= MATMUL_MIN_ROWS {
            matmul_span(qkv, hidden, heads, products, keys.clone(), &mut out, pause);
            row = keys.end;
            continue;
        }
        // Rows up to the next span that runs as products, one query row at a time.
        let mut end = row + 1;
        while end < rows {
            let next = span(end);
            if next.start == end && next.len() >= MATMUL_MIN_ROWS {
                break;
            }
            end += 1;
        }
        in_units(end - row, pause, |unit| {
            let rows = row + unit.start..row + unit.end;
            per_row(qkv, hidden, heads, rows, &span, &mut out);
        });
        row = end;
    }
    out
}

/// The rows `rows` of the output, each query row attending to its span with the vector kernels.
fn per_row(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    rows: Range<usize>,
    span: &(impl Fn(usize) -> Range<usize> + Sync),
    out: &mut [f32],
) {
    let d = hidden / heads;
    let scale = (d as f32).powf(-0.5);
    let ops = best_ops(d);
    let first = rows.start;
    out[rows.start * hidden..rows.end * hidden]
        .par_chunks_mut(hidden)
        .enumerate()
        .for_each(|(i, out_row)| {
            let row = first + i;
            let keys = span(row);
            let mut scores = vec![0f32; keys.len()];
            let mut offsets = vec![0usize; keys.len()];
            for head in 0..heads {
                let q = &qkv[row * 3 * hidden + head * d..][..d];
                for (offset, key) in offsets.iter_mut().zip(keys.clone()) {
                    *offset = key * 3 * hidden + hidden + head * d;
                }
                ops.group_scores(q, d, qkv, &offsets, scale, &mut scores);
                softmax(&mut scores);
                offsets.iter_mut().for_each(|o| *o += hidden);
                ops.group_weighted_sum(&scores, qkv, &offsets, d, &mut out_row[head * d..][..d]);
            }
        });
}

/// The rows of `span`, which attend to `span` itself, as matrix products per head in `products`.
fn matmul_span(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    products: WeightDtype,
    span: Range<usize>,
    out: &mut [f32],
    pause: &dyn Pause,
) {
    let d = hidden / heads;
    let n = span.len();
    let scale = (d as f32).powf(-0.5);
    let column = |row: usize, part: usize, head: usize| {
        &qkv[row * 3 * hidden + part * hidden + head * d..][..d]
    };
    // One block's scores and outputs, reused by every block and head (each product writes
    // every value it covers).
    let mut scores_buffer = vec![0f32; QUERY_BLOCK.min(n) * n];
    let mut attended_buffer = vec![0f32; QUERY_BLOCK.min(n) * d];
    let mut sums_buffer = vec![0f32; QUERY_BLOCK.min(n)];
    // Every head's keys as the rows of a weight matrix [n, d] and values transposed, [d, n],
    // packed at once on the pool (one head's packing alone left a core idle).
    let packed: Vec<(PackedMatrix, PackedMatrix)> = (0..heads)
        .into_par_iter()
        .map(|head| {
            let mut k = Vec::with_capacity(n * d);
            let mut v_t = vec![0f32; d * n];
            for (j, row) in span.clone().enumerate() {
                k.extend_from_slice(column(row, 1, head));
                for (c, &x) in column(row, 2, head).iter().enumerate() {
                    v_t[c * n + j] = x;
                }
            }
            let keys = PackedMatrix::pack(&k, n, d, products);
            (keys, PackedMatrix::pack(&v_t, d, n, products))
        })
        .collect();
    pause.point();
    for (head, (keys, values)) in packed.iter().enumerate() {
        for block in span.clone().step_by(QUERY_BLOCK) {
            let block = block..(block + QUERY_BLOCK).min(span.end);
            let m = block.len();
            let mut q = Vec::with_capacity(m * d);
            for row in block.clone() {
                q.extend(column(row, 0, head).iter().map(|x| x * scale));
            }
            let scores = &mut scores_buffer[..m * n];
            keys.matmul(&q, m, scores);
            // The weights are left unnormalised (`exp(s - max)`, at most 1) and each output row
            // is divided by its sum after `P·V`: d values a row rather than n.
            let sums = &mut sums_buffer[..m];
            (scores.par_chunks_mut(n).zip(sums.par_iter_mut()))
                .for_each(|(row, sum)| *sum = exp_in_place(row));
            let attended = &mut attended_buffer[..m * d];
            values.matmul(scores, m, attended);
            for ((row, values), sum) in block.zip(attended.chunks(d)).zip(sums.iter()) {
                let inverse = 1.0 / sum;
                let out = &mut out[row * hidden + head * d..][..d];
                for (o, v) in out.iter_mut().zip(values) {
                    *o = v * inverse;
                }
            }
        }
        pause.point();
    }
}

/// `scores` → their softmax, in place (the element-wise kernels at any span length).
fn softmax(scores: &mut [f32]) {
    let inverse = 1.0 / exp_in_place(scores);
    scores.iter_mut().for_each(|s| *s *= inverse);
}

/// `scores` → `exp(score - max)` in place; returns their sum.
fn exp_in_place(scores: &mut [f32]) -> f32 {
    let ops = elementwise_ops();
    let max = ops.max_finite(scores).unwrap_or(0.0);
    ops.exp_sum(scores, max)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::vision::pause::tests::Units;
    use crate::vision::pause::NoPause;

    /// Deterministic values in [-2, 2).
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
            })
            .collect()
    }

    #[test]
    fn long_spans_as_products_agree_with_the_row_kernel_and_with_themselves_in_a_batch() {
        let (hidden, heads) = (48, 3);
        // Two images: 700 rows (products: one query block and a part) and 40 rows (per row).
        let (long, short) = (700, 40);
        let qkv = values((long + short) * 3 * hidden, 7);
        let spans = |r: usize| {
            if r < long {
                0..long
            } else {
                long..long + short
            }
        };
        let mut by_rows = vec![0f32; (long + short) * hidden];
        per_row(&qkv, hidden, heads, 0..long + short, &spans, &mut by_rows);
        // bf16 products round queries, keys, weights and values to 8 significant bits.
        for (products, tolerance) in [(WeightDtype::F32, 1e-5), (WeightDtype::BF16, 3e-2)] {
            let both = span_attention(&qkv, hidden, heads, products, spans, &NoPause);
            // Paused after packing, after every head and every 7 short-span rows: the same bits.
            let units = Units::of(7);
            let paused = span_attention(&qkv, hidden, heads, products, spans, &units);
            assert_eq!(paused, both);
            assert_eq!(
                units.points.load(Ordering::Relaxed),
                1 + heads + short.div_ceil(7)
            );
            let diff = (both.iter().zip(&by_rows))
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                diff < tolerance,
                "{products:?} products and rows differ by {diff}"
            );
            assert!(
                diff > 0.0 || products == WeightDtype::F32,
                "bf16 rounds nothing?"
            );
            assert_eq!(
                &both[long * hidden..],
                &by_rows[long * hidden..],
                "the short span runs per row"
            );
            // The long image alone gives the same bits as beside the other.
            let alone = span_attention(
                &qkv[..long * 3 * hidden],
                hidden,
                heads,
                products,
                |_| 0..long,
                &NoPause,
            );
            assert_eq!(&both[..long * hidden], &alone[..]);
        }
    }
}
