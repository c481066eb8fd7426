//! Tests of the paged attention kernel.

use super::*;
use crate::kernels::Isa;

/// One KV head, one position per row: `head_dim` elements a row, `block_size` rows a block.
fn paged<'a>(
    keys: &'a [f32],
    values: &'a [f32],
    block_size: usize,
    head_dim: usize,
) -> PagedKv<'a, f32> {
    PagedKv {
        keys,
        values,
        block_stride: block_size * head_dim,
        head_stride: block_size * head_dim,
        row_stride: head_dim,
    }
}

fn shape(head_dim: usize, block_size: usize, logit_softcap: Option<f32>) -> AttentionShape {
    AttentionShape {
        num_heads: 1,
        num_kv_heads: 1,
        head_dim,
        block_size,
        scale: 1.0,
        logit_softcap,
    }
}

/// Two sequences with interleaved blocks; a token's output uses only its own table's blocks.
#[test]
fn attention_reads_only_the_sequence_own_blocks() {
    let (head_dim, block_size) = (2, 2);
    // 4 blocks * 2 slots; seq A owns blocks [0, 2], seq B owns [1, 3].
    let keys = vec![0.0; 8 * head_dim];
    let mut values = vec![0.0; 8 * head_dim];
    for slot in 0..8 {
        let owner_b = (slot / block_size) % 2 == 1;
        values[slot * head_dim] = if owner_b { 100.0 } else { 1.0 };
    }
    let queries = [
        QueryView {
            block_table: &[0, 2],
            position: 2,
            first: 0,
            last: 2,
        },
        QueryView {
            block_table: &[1, 3],
            position: 3,
            first: 0,
            last: 3,
        },
    ];
    let q = vec![0.0; 2 * head_dim];
    let mut out = vec![0.0; 2 * head_dim];
    let kv = paged(&keys, &values, block_size, head_dim);
    paged_attention(
        shape(head_dim, block_size, None),
        kv,
        &queries,
        &q,
        &mut out,
    );
    // Zero queries give uniform weights: the mean of the visible values.
    assert_eq!(out[0], 1.0);
    assert_eq!(out[2], 100.0);
}

#[test]
fn positions_before_the_first_visible_one_are_hidden() {
    let values = [10.0, 20.0, 30.0, 40.0];
    let kv = paged(&[0.0; 4], &values, 4, 1);
    let query = QueryView {
        block_table: &[0],
        position: 3,
        first: 2,
        last: 3,
    };
    let mut out = vec![0.0; 1];
    paged_attention(shape(1, 4, None), kv, &[query], &[0.0], &mut out);
    assert_eq!(out[0], 35.0);
}

#[test]
fn softcap_bounds_scores_before_the_softmax() {
    // Keys 0 and 10 against query 1: uncapped, position 1 takes almost all the weight;
    // capped at 1, the scores are tanh(0) and tanh(10) ≈ 1, so the weights are e⁰ : e¹.
    let (keys, values) = ([0.0, 10.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]);
    let kv = paged(&keys, &values, 4, 1);
    let query = [QueryView {
        block_table: &[0],
        position: 1,
        first: 0,
        last: 1,
    }];
    let mut out = vec![0.0; 1];
    paged_attention(shape(1, 4, Some(1.0)), kv, &query, &[1.0], &mut out);
    let e = std::f32::consts::E;
    assert!((out[0] - e / (1.0 + e)).abs() < 1e-5, "{}", out[0]);
    paged_attention(shape(1, 4, None), kv, &query, &[1.0], &mut out);
    assert!(out[0] > 0.999, "{}", out[0]);
}

/// A cache of `positions` random keys and values for `kv_heads` heads in `block_size`-position
/// blocks, stored in a shuffled block order; and the block table that finds them.
struct RandomCache<E> {
    keys: Vec<E>,
    values: Vec<E>,
    table: Vec<u32>,
    kv_heads: usize,
    head_dim: usize,
    block_size: usize,
}

impl<E: KvElement> RandomCache<E> {
    fn new(positions: usize, kv_heads: usize, head_dim: usize, block_size: usize) -> Self {
        let blocks = positions.div_ceil(block_size);
        let len = blocks * kv_heads * block_size * head_dim;
        let store = |seed: u32| {
            let values: Vec<f32> = crate::kernels::test_values(len, seed)
                .into_iter()
                .map(|v| v * 6.0)
                .collect();
            let mut out = vec![E::default(); len];
            E::store(&values, &mut out);
            out
        };
        // Blocks in reverse order, so logical and physical positions differ.
        let table = (0..blocks as u32).rev().collect();
        Self {
            keys: store(31),
            values: store(32),
            table,
            kv_heads,
            head_dim,
            block_size,
        }
    }

    fn paged(&self) -> PagedKv<'_, E> {
        PagedKv {
            keys: &self.keys,
            values: &self.values,
            block_stride: self.kv_heads * self.block_size * self.head_dim,
            head_stride: self.block_size * self.head_dim,
            row_stride: self.head_dim,
        }
    }

    /// Every query head's attention (`q: [heads, head_dim]`) over `first..=last`, in f64.
    fn reference(&self, shape: AttentionShape, q: &[f32], first: usize, last: usize) -> Vec<f64> {
        let kv = self.paged();
        let row = |data: &[E], p: usize, g: usize| -> Vec<f64> {
            let at = self.table[p / self.block_size] as usize * kv.block_stride
                + g * kv.head_stride
                + (p % self.block_size) * kv.row_stride;
            data[at..][..self.head_dim]
                .iter()
                .map(|v| f64::from(v.to_f32()))
                .collect()
        };
        let group = shape.num_heads / shape.num_kv_heads;
        let mut out = Vec::new();
        for (h, q) in q.chunks_exact(shape.head_dim).enumerate() {
            let g = h / group;
            let scores: Vec<f64> = (first..=last)
                .map(|p| {
                    let k = row(&self.keys, p, g);
                    let s: f64 = q.iter().zip(&k).map(|(a, b)| f64::from(*a) * b).sum();
                    let s = s * f64::from(shape.scale);
                    match shape.logit_softcap {
                        Some(cap) => f64::from(cap) * (s / f64::from(cap)).tanh(),
                        None => s,
                    }
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let mut o = vec![0f64; shape.head_dim];
            for (w, p) in weights.iter().zip(first..=last) {
                for (o, v) in o.iter_mut().zip(row(&self.values, p, g)) {
                    *o += w / total * v;
                }
            }
            out.extend(o);
        }
        out
    }
}

fn gqa_shape(block_size: usize, logit_softcap: Option<f32>) -> AttentionShape {
    AttentionShape {
        num_heads: 6,
        num_kv_heads: 2,
        head_dim: 16,
        block_size,
        scale: 0.25,
        logit_softcap,
    }
}

/// A prompt of `n` tokens as queries, visible from `first(p)`.
fn prompt<'a>(
    table: &'a [u32],
    range: std::ops::Range<usize>,
    window: Option<usize>,
) -> Vec<QueryView<'a>> {
    range
        .map(|p| QueryView {
            block_table: table,
            position: p,
            first: window.map_or(0, |w| (p + 1).saturating_sub(w)),
            last: p,
        })
        .collect()
}

fn run<E: KvElement>(
    shape: AttentionShape,
    cache: &RandomCache<E>,
    queries: &[QueryView<'_>],
    q: &[f32],
) -> Vec<f32> {
    let mut out = vec![0f32; q.len()];
    paged_attention(shape, cache.paged(), queries, q, &mut out);
    out
}

/// Past several key tiles, with grouped heads, a softcap, a sliding window and an f16 cache,
/// the tiled online softmax stays within f32 rounding of the exact attention.
#[test]
fn long_prompts_match_the_exact_attention() {
    let positions = 3 * KV_TILE + 37;
    for (softcap, window) in [(None, None), (Some(5.0), None), (None, Some(100))] {
        let shape = gqa_shape(16, softcap);
        let cache = RandomCache::<half::f16>::new(positions, 2, 16, 16);
        let queries = prompt(&cache.table, 0..positions, window);
        let width = shape.num_heads * shape.head_dim;
        let q = crate::kernels::test_values(positions * width, 33);
        let out = run(shape, &cache, &queries, &q);
        for (i, query) in queries.iter().enumerate().step_by(7) {
            let exact = cache.reference(shape, &q[i * width..][..width], query.first, query.last);
            for (got, want) in out[i * width..][..width].iter().zip(&exact) {
                assert!(
                    (f64::from(*got) - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "position {} ({softcap:?}, {window:?}): {got} vs {want}",
                    query.position
                );
            }
        }
    }
}

/// A token gets the same bits alone (decode), in a whole prompt, in any chunk of it, and
/// beside other sequences' tokens: its operations depend only on its position and the tile grid.
/// An f32 cache and a bf16 one (which multiplies in bf16 where the CPU has AVX-512 BF16).
#[test]
fn a_token_gets_the_same_bits_however_its_prompt_is_batched() {
    same_bits_however_batched::<f32>();
    same_bits_however_batched::<half::bf16>();
}

fn same_bits_however_batched<E: KvElement>() {
    let positions = 2 * KV_TILE + 45;
    for window in [None, Some(70)] {
        let shape = gqa_shape(16, None);
        let cache = RandomCache::<E>::new(positions, 2, 16, 16);
        let width = shape.num_heads * shape.head_dim;
        let q = crate::kernels::test_values(positions * width, 34);
        let all = prompt(&cache.table, 0..positions, window);
        let whole = run(shape, &cache, &all, &q);
        // Alone, one token at a time.
        for (i, query) in all.iter().enumerate().step_by(5) {
            let alone = run(shape, &cache, &[*query], &q[i * width..][..width]);
            assert_eq!(
                alone,
                whole[i * width..][..width],
                "position {i}, {window:?}"
            );
        }
        // In chunks cut across tile boundaries, each after another sequence's tokens (the same
        // cache's blocks, in another order) in the same call.
        let other_table: Vec<u32> = cache.table.iter().rev().copied().collect();
        for cut in [1, 13, 64, 65, 100] {
            let mut start = 0;
            while start < positions {
                let end = (start + cut).min(positions);
                let mut batch = prompt(&other_table, 20..30, None);
                let lead = batch.len();
                batch.extend(prompt(&cache.table, start..end, window));
                let mut qb = crate::kernels::test_values(lead * width, 35);
                qb.extend_from_slice(&q[start * width..end * width]);
                let out = run(shape, &cache, &batch, &qb);
                assert_eq!(
                    out[lead * width..],
                    whole[start * width..end * width],
                    "chunk {start}..{end} (cut {cut}, {window:?})"
                );
                start = end;
            }
        }
    }
}

/// Tokens of a run that attend bidirectionally (an image's, crossing a key tile and a block)
/// see up to the run's last position, from their window's first; the causal tokens around them
/// keep the bits they have without such neighbours.
#[test]
fn a_bidirectional_run_sees_its_later_tokens_and_leaves_causal_ones_alone() {
    let positions = KV_TILE + 40;
    let span = KV_TILE - 10..KV_TILE + 20;
    for window in [None, Some(24)] {
        let shape = gqa_shape(16, None);
        let cache = RandomCache::<f32>::new(positions, 2, 16, 16);
        let width = shape.num_heads * shape.head_dim;
        let q = crate::kernels::test_values(positions * width, 36);
        let causal = prompt(&cache.table, 0..positions, window);
        let mut mixed = causal.clone();
        for query in &mut mixed[span.clone()] {
            query.last = span.end - 1;
        }
        let (before, after) = (
            run(shape, &cache, &causal, &q),
            run(shape, &cache, &mixed, &q),
        );
        for (i, query) in mixed.iter().enumerate() {
            let rows = i * width..(i + 1) * width;
            if !span.contains(&i) {
                assert_eq!(
                    after[rows.clone()],
                    before[rows],
                    "position {i}, {window:?}"
                );
                continue;
            }
            assert_eq!(query.first, window.map_or(0, |w| (i + 1).saturating_sub(w)));
            let exact = cache.reference(shape, &q[rows.clone()], query.first, span.end - 1);
            for (got, want) in after[rows].iter().zip(&exact) {
                assert!(
                    (f64::from(*got) - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "position {i} ({window:?}): {got} vs {want}"
                );
            }
        }
    }
}

/// A run of prompt tokens that stages its key/value tiles in f32 (AVX-512 hosts) gives every
/// token the bits of the row kernels, for f32, f16 and bf16 caches (the last as on a CPU without
/// AVX-512 BF16), grouped heads of several widths, a softcap,
/// a sliding window and a bidirectional span.
#[test]
fn staged_tiles_give_the_bits_of_the_row_kernels() {
    fn check<E: KvElement>(tiles: TileKernels, head_dim: usize, heads: usize) {
        let kv_heads = 2;
        let positions = 3 * KV_TILE + 29;
        for (softcap, window) in [(None, None), (Some(5.0), None), (None, Some(90))] {
            let shape = AttentionShape {
                num_heads: heads * kv_heads,
                num_kv_heads: kv_heads,
                head_dim,
                block_size: 16,
                scale: 1.0 / (head_dim as f32).sqrt(),
                logit_softcap: softcap,
            };
            let cache = RandomCache::<E>::new(positions, kv_heads, head_dim, 16);
            let mut queries = prompt(&cache.table, 0..positions, window);
            for query in &mut queries[KV_TILE + 3..KV_TILE + 40] {
                query.last = KV_TILE + 39;
            }
            let width = shape.num_heads * head_dim;
            let q = crate::kernels::test_values(positions * width, 37);
            let (mut rows, mut staged) = (vec![0f32; q.len()], vec![0f32; q.len()]);
            attention_with(shape, cache.paged(), &queries, &q, &mut rows, None);
            attention_with(shape, cache.paged(), &queries, &q, &mut staged, Some(tiles));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&staged),
                bits(&rows),
                "d={head_dim} heads={heads} {softcap:?} {window:?}"
            );
        }
    }
    let Some(tiles) = TileKernels::for_isa::<f32>(Isa::Avx512Vnni, 64) else {
        eprintln!("skipping staged attention tiles on avx512vnni: host lacks it");
        return;
    };
    for (head_dim, heads) in [(64, 7), (16, 3), (128, 2), (256, 4)] {
        check::<f32>(tiles, head_dim, heads);
        check::<half::f16>(tiles, head_dim, heads);
        check::<half::bf16>(tiles, head_dim, heads);
    }
}

/// A bf16 cache on a CPU with AVX-512 BF16 multiplies in bf16 (queries and softmax weights
/// rounded to bf16, sums in f32): past several tiles, with grouped heads of the widths models
/// use, a softcap and a sliding window, it stays within bf16 rounding of the exact attention
/// over the same cached values. Elsewhere the f32 kernels run and the bound holds with room.
#[test]
fn a_bf16_cache_stays_within_bf16_rounding_of_the_exact_attention() {
    if !Isa::current().has_avx512_bf16() {
        eprintln!("bf16 attention: host lacks avx512_bf16, checking the widened f32 kernels");
    }
    let positions = 3 * KV_TILE + 37;
    let mut worst = 0f64;
    for (head_dim, softcap, window) in [
        (64, None, None),
        (16, Some(5.0), None),
        (128, None, Some(100)),
        (256, None, None),
    ] {
        let shape = AttentionShape {
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            ..gqa_shape(16, softcap)
        };
        let cache = RandomCache::<half::bf16>::new(positions, 2, head_dim, 16);
        let queries = prompt(&cache.table, 0..positions, window);
        let width = shape.num_heads * head_dim;
        let q: Vec<f32> = (crate::kernels::test_values(positions * width, 38).iter())
            .map(|v| v * 4.0)
            .collect();
        let out = run(shape, &cache, &queries, &q);
        for (i, query) in queries.iter().enumerate().step_by(5) {
            let exact = cache.reference(shape, &q[i * width..][..width], query.first, query.last);
            for (got, want) in out[i * width..][..width].iter().zip(&exact) {
                let err = (f64::from(*got) - want).abs();
                worst = worst.max(err);
                // Values are within ±3; a score's relative error is about 2^-8 (the query's
                // rounding) and each weight's 2^-9, so an output moves by well under 0.05.
                assert!(
                    err < 0.05,
                    "d={head_dim} position {} ({softcap:?}, {window:?}): {got} vs {want}",
                    query.position
                );
            }
        }
    }
    eprintln!("bf16 attention: largest error against the exact attention {worst:.2e}");
}
