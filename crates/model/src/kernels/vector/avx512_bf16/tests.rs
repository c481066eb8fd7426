//! The bf16 kernels against a scalar reference of the order in the module docs, which follows
//! Intel's definition of `vcvtneps2bf16` and `vdpbf16ps` (so a CPU that does otherwise fails
//! here rather than giving other bits than another host of the same instruction set).

use super::*;
use crate::kernels::test_values;

/// The reference: bf16 rounding and the pair multiply-add, one value at a time.
mod reference {
    /// `x` rounded to bf16: to nearest even, a denormal to a zero of its sign, NaN quieted.
    pub fn round(x: f32) -> u16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return ((bits >> 16) as u16) | 0x40;
        }
        if x.is_subnormal() || x == 0.0 {
            return ((bits >> 16) as u16) & 0x8000;
        }
        if x.is_infinite() {
            return (bits >> 16) as u16;
        }
        let bias = 0x7fff + ((bits >> 16) & 1);
        (bits.wrapping_add(bias) >> 16) as u16
    }

    /// A bf16 value as f32, a denormal read as zero.
    pub fn widen(b: u16) -> f32 {
        daz(f32::from_bits(u32::from(b) << 16))
    }

    fn daz(x: f32) -> f32 {
        if x.is_subnormal() {
            f32::from_bits(x.to_bits() & 0x8000_0000)
        } else {
            x
        }
    }

    /// One lane of `vdpbf16ps`: `acc + a_odd·b_odd`, then `+ a_even·b_even`, each fused,
    /// denormals read as zero and flushed to zero.
    pub fn pair(acc: f32, a: [u16; 2], b: [u16; 2]) -> f32 {
        let acc = daz(widen(a[1]).mul_add(widen(b[1]), daz(acc)));
        daz(widen(a[0]).mul_add(widen(b[0]), acc))
    }

    /// Score of `q` (f32, rounded here) against key `k` (bf16), times `scale`.
    pub fn score(q: &[f32], k: &[u16], scale: f32) -> f32 {
        let q: Vec<u16> = q.iter().map(|&x| round(x)).collect();
        let mut s = 0f32;
        for c in 0..q.len() / 2 {
            s = pair(s, [q[2 * c], q[2 * c + 1]], [k[2 * c], k[2 * c + 1]]);
        }
        s * scale
    }
}

/// Random bf16 values of a few magnitudes.
fn bf16_values(n: usize, seed: u32) -> Vec<u16> {
    test_values(n, seed)
        .into_iter()
        .map(|v| half::bf16::from_f32(v * 8.0).to_bits())
        .collect()
}

fn kernels() -> Option<Avx512Bf16> {
    let kernels = Avx512Bf16::for_isa(Isa::Avx512Vnni);
    if kernels.is_none() {
        eprintln!("skipping the AVX-512 BF16 attention kernels: host lacks avx512f/vnni/bf16");
    }
    kernels
}

#[test]
fn rounding_and_pair_products_follow_the_reference() {
    let Some(_) = kernels() else { return };
    let tiny = f32::MIN_POSITIVE;
    let mut x = test_values(4096, 70);
    x.iter_mut().for_each(|v| *v *= 100.0);
    x.extend([
        0.0,
        -0.0,
        tiny,
        -tiny,
        tiny / 3.0,
        -tiny / 7.0,
        1.0 + f32::EPSILON,
        f32::from_bits(0x3f80_8000), // a tie, rounding to even (down)
        f32::from_bits(0x3f81_8000), // a tie, rounding to even (up)
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    x.resize(x.len().next_multiple_of(16), 1.5);
    let mut got = vec![0u16; x.len()];
    // SAFETY: the host has AVX-512 BF16 (`kernels()`).
    unsafe { round_into(&x, &mut got) };
    for (v, g) in x.iter().zip(&got) {
        assert_eq!(*g, reference::round(*v), "{v:e} ({:#x})", v.to_bits());
    }
    // Pairs, including denormal inputs and products and sums that cancel to denormals.
    let a: Vec<u16> = (x.iter().map(|&v| reference::round(v)))
        .chain([0x0001, 0x8040, 0x0080, 0x0080])
        .collect();
    let b: Vec<u16> = a.iter().rev().copied().collect();
    let mut packed_a: Vec<u32> = Vec::new();
    let mut packed_b: Vec<u32> = Vec::new();
    let mut accs: Vec<f32> = Vec::new();
    for i in (0..a.len() - 1).step_by(2) {
        packed_a.push(u32::from(a[i]) | u32::from(a[i + 1]) << 16);
        packed_b.push(u32::from(b[i]) | u32::from(b[i + 1]) << 16);
        accs.push([0.0, 1.0, -tiny, 3.5e-39, -2.5][i % 5]);
    }
    let n = packed_a.len() / 16 * 16;
    for i in (0..n).step_by(16) {
        let mut out = [0f32; 16];
        // SAFETY: as above; sixteen lanes are read from each slice at `i`.
        unsafe {
            let va = _mm512_loadu_si512(packed_a.as_ptr().add(i) as *const __m512i);
            let vb = _mm512_loadu_si512(packed_b.as_ptr().add(i) as *const __m512i);
            let acc = _mm512_loadu_ps(accs.as_ptr().add(i));
            let r = _mm512_dpbf16_ps(
                acc,
                std::mem::transmute::<__m512i, __m512bh>(va),
                std::mem::transmute::<__m512i, __m512bh>(vb),
            );
            _mm512_storeu_ps(out.as_mut_ptr(), r);
        }
        for (l, got) in out.iter().enumerate() {
            let j = i + l;
            let pa = [packed_a[j] as u16, (packed_a[j] >> 16) as u16];
            let pb = [packed_b[j] as u16, (packed_b[j] >> 16) as u16];
            let want = reference::pair(accs[j], pa, pb);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "lane {j}: {pa:x?}·{pb:x?} + {:e}: {got:e} vs {want:e}",
                accs[j]
            );
        }
    }
}

/// Stages a tile of `rows` (row `i` at `i * 7 % 100`) at `skip`, for tests.
fn staged(
    kernels: Avx512Bf16,
    keys: &[u16],
    values: &[u16],
    d: usize,
    rows: &[usize],
    skip: usize,
) -> (Vec<u32>, Vec<u32>) {
    const TILE: usize = 64;
    let stride = TILE + 16;
    let mut keys_p = vec![0xffff_ffffu32; d / 2 * stride];
    let mut values_p = vec![0xffff_ffffu32; TILE / 2 * d];
    kernels.stage_tile(
        keys,
        values,
        rows,
        skip,
        TILE,
        d,
        &mut keys_p,
        stride,
        &mut values_p,
    );
    (keys_p, values_p)
}

#[test]
fn staged_scores_follow_the_reference() {
    let Some(kernels) = kernels() else { return };
    let stride = 80;
    for d in [16usize, 64, 128, 256] {
        let keys = bf16_values(100 * d, 71);
        let values = bf16_values(100 * d, 72);
        for (skip, len) in [(0, 64), (3, 61), (0, 1), (17, 30), (63, 1)] {
            let rows: Vec<usize> = (0..len).map(|i| (i * 7 % 100) * d).collect();
            let (keys_p, _) = staged(kernels, &keys, &values, d, &rows, skip);
            for heads in [1usize, 3, 7, 9] {
                let q = test_values(heads * d, 73 + heads as u32);
                for (first, n) in [(skip, len), (skip + len - 1, 1), (skip, len.min(17))] {
                    let mut out = vec![f32::NAN; heads * n];
                    let mut q_p = vec![0u32; heads * d / 2];
                    kernels.round_pairs(&q, &mut q_p);
                    let scale = 0.125;
                    kernels.scores(&q_p, d, &keys_p, stride, first, n, scale, &mut out);
                    for h in 0..heads {
                        for j in 0..n {
                            let k = &keys[rows[first + j - skip]..][..d];
                            let want = reference::score(&q[h * d..][..d], k, scale);
                            assert_eq!(
                                out[h * n + j].to_bits(),
                                want.to_bits(),
                                "d={d} skip={skip} heads={heads} first={first} j={j}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn staged_weighted_sums_follow_the_reference() {
    let Some(kernels) = kernels() else { return };
    for d in [16usize, 64, 80, 256] {
        let keys = bf16_values(100 * d, 74);
        let values = bf16_values(100 * d, 75);
        for (skip, len) in [(0, 64), (3, 61), (0, 1), (17, 30), (63, 1)] {
            let rows: Vec<usize> = (0..len).map(|i| (i * 7 % 100) * d).collect();
            let (_, values_p) = staged(kernels, &keys, &values, d, &rows, skip);
            // The row at tile index `t`, zero where nothing is staged.
            let value = |t: usize, c: usize| match t.checked_sub(skip).filter(|&i| i < len) {
                Some(i) => values[rows[i] + c],
                None => 0,
            };
            for heads in [1usize, 4, 7, 13] {
                for (first, n) in [(skip, len), (skip + len - 1, 1), (skip + len / 2, len / 2)] {
                    if n == 0 {
                        continue;
                    }
                    let weights: Vec<f32> = test_values(heads * n, 76)
                        .into_iter()
                        .map(|w| w + 0.5)
                        .collect();
                    let rescale: Vec<f32> = (0..heads).map(|h| [0.0, 1.0, 0.375][h % 3]).collect();
                    let before = test_values(heads * d, 77);
                    let mut acc = before.clone();
                    let mut packed = Vec::new();
                    kernels.accumulate(
                        &weights,
                        &values_p,
                        first,
                        n,
                        d,
                        &rescale,
                        &mut acc,
                        &mut packed,
                    );
                    for h in 0..heads {
                        // Weights at their tile index, zero outside `first..first + n`.
                        let w = |t: usize| match t.checked_sub(first).filter(|&i| i < n) {
                            Some(i) => reference::round(weights[h * n + i]),
                            None => 0,
                        };
                        for c in 0..d {
                            let mut p = 0f32;
                            for m in first / 2..(first + n).div_ceil(2) {
                                let (t0, t1) = (2 * m, 2 * m + 1);
                                p = reference::pair(
                                    p,
                                    [w(t0), w(t1)],
                                    [value(t0, c), value(t1, c)],
                                );
                            }
                            let old = before[h * d + c];
                            let want = match rescale[h] {
                                0.0 => p,
                                1.0 => old + p,
                                alpha => old.mul_add(alpha, p),
                            };
                            assert_eq!(
                                acc[h * d + c].to_bits(),
                                want.to_bits(),
                                "d={d} skip={skip} heads={heads} first={first} n={n} h={h} c={c}"
                            );
                        }
                    }
                }
            }
        }
    }
}
