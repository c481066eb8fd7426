//! Q8_K activations: each row cut into super-blocks of 256 values, each stored as 256 signed
//! bytes with one f32 scale and the sums of its groups of 16 and 32 bytes. The K-quant kernels
//! multiply weight bytes with these bytes in integer arithmetic and use the group sums to
//! subtract the weights' offsets and minimums once per group instead of once per weight.

use rayon::prelude::*;

use super::act_quant::{abs_max, nearest_int};
use super::Isa;

/// Values per super-block.
pub const QK_K: usize = 256;

/// One super-block of 256 quantized activations: `x[i] ≈ d · qs[i]`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct BlockQ8K {
    /// The scale (`max |x| / 127`).
    pub d: f32,
    /// The values, in `-127..=127`.
    pub qs: [i8; QK_K],
    /// `bsums16[g] = Σ qs[16g..16g + 16]`.
    pub bsums16: [i16; QK_K / 16],
    /// `bsums32[g] = Σ qs[32g..32g + 32]`.
    pub bsums32: [i16; QK_K / 32],
}

impl BlockQ8K {
    const ZERO: BlockQ8K = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums16: [0; QK_K / 16],
        bsums32: [0; QK_K / 32],
    };

    /// Quantizes 256 values with the scale that maps the largest magnitude to 127.
    pub fn quantize(x: &[f32]) -> Self {
        let x: &[f32; QK_K] = x.try_into().expect("a Q8_K block holds 256 values");
        let amax = abs_max(x);
        let mut block = Self::ZERO;
        if amax == 0.0 {
            return block;
        }
        let inverse = 127.0 / amax;
        block.d = amax / 127.0;
        for (q, v) in block.qs.iter_mut().zip(x) {
            *q = nearest_int(v * inverse).clamp(-127, 127) as i8;
        }
        for (sum, group) in block.bsums16.iter_mut().zip(block.qs.chunks_exact(16)) {
            *sum = group.iter().map(|&q| i16::from(q)).sum();
        }
        for (g, sum) in block.bsums32.iter_mut().enumerate() {
            *sum = block.bsums16[2 * g] + block.bsums16[2 * g + 1];
        }
        block
    }

    /// The values this block stands for (`d · qs[i]`).
    #[cfg(test)]
    pub fn dequantize(&self) -> Vec<f32> {
        self.qs.iter().map(|&q| self.d * f32::from(q)).collect()
    }
}

/// Quantizes `x` into `out`, 256 values a block, with the vector kernel where the CPU has one:
/// the same operations as [`BlockQ8K::quantize`], so the same bits.
fn quantize_blocks(x: &[f32], out: &mut [BlockQ8K]) {
    quantize_blocks_on(Isa::current(), x, out)
}

/// [`quantize_blocks`] with the kernel of `isa` (one this CPU runs).
fn quantize_blocks_on(isa: Isa, x: &[f32], out: &mut [BlockQ8K]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: both are only detected on CPUs with avx2.
        Isa::Avx2 | Isa::Avx512Vnni | Isa::Amx => unsafe { quantize_blocks_avx2(x, out) },
        _ => {
            for (block, values) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
                *block = BlockQ8K::quantize(values);
            }
        }
    }
}

/// Safety: needs avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_blocks_avx2(x: &[f32], out: &mut [BlockQ8K]) {
    use super::act_quant::avx2::{abs_max, load32, quantize32};
    use std::arch::x86_64::*;
    for (block, values) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
        // A loop, not an `array::from_fn` closure: see `act_quant::avx2::load32`.
        let mut v = [[_mm256_setzero_ps(); 4]; QK_K / 32];
        for (c, v) in v.iter_mut().enumerate() {
            *v = load32(values[32 * c..].as_ptr());
        }
        let amax = abs_max(v.as_flattened());
        if amax == 0.0 {
            *block = BlockQ8K::ZERO;
            continue;
        }
        let inverse = 127.0 / amax;
        block.d = amax / 127.0;
        for (c, v) in v.iter().enumerate() {
            let (bytes, first, last) = quantize32(v, inverse);
            _mm256_storeu_si256(block.qs[32 * c..].as_mut_ptr() as *mut __m256i, bytes);
            // Each sum of 16 bytes in -127..=127 fits in i16.
            block.bsums16[2 * c] = first as i16;
            block.bsums16[2 * c + 1] = last as i16;
            block.bsums32[c] = (first + last) as i16;
        }
    }
}

/// Rows of activations `[m, k]` as Q8_K super-blocks, `k / 256` a row.
#[derive(Debug)]
pub struct Q8KRows {
    blocks: Vec<BlockQ8K>,
    blocks_per_row: usize,
}

impl Q8KRows {
    /// Quantizes `x: [m, k]` row by row (`k` a multiple of 256), each row on its own.
    pub fn quantize(x: &[f32], k: usize) -> Self {
        assert!(
            k.is_multiple_of(QK_K),
            "Q8_K activations need rows of whole 256-value super-blocks, got {k}"
        );
        let blocks_per_row = k / QK_K;
        let mut blocks = vec![BlockQ8K::ZERO; x.len() / QK_K];
        // Large batches quantize in parallel; each block depends only on its own 256 values.
        blocks
            .par_chunks_mut(64)
            .zip(x.par_chunks(64 * QK_K))
            .for_each(|(dst, src)| quantize_blocks(src, dst));
        Self {
            blocks,
            blocks_per_row,
        }
    }

    /// The super-blocks of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &[BlockQ8K] {
        &self.blocks[r * self.blocks_per_row..][..self.blocks_per_row]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_values;

    #[test]
    fn quantized_block_is_within_half_a_step_and_sums_its_groups() {
        let x = test_values(QK_K, 3);
        let block = BlockQ8K::quantize(&x);
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        assert_eq!(block.d, amax / 127.0);
        for (v, back) in x.iter().zip(block.dequantize()) {
            assert!((v - back).abs() <= block.d * 0.5 + 1e-7, "{v} vs {back}");
        }
        for g in 0..16 {
            let sum: i32 = block.qs[16 * g..][..16].iter().map(|&q| i32::from(q)).sum();
            assert_eq!(i32::from(block.bsums16[g]), sum);
        }
        for g in 0..8 {
            let sum: i32 = block.qs[32 * g..][..32].iter().map(|&q| i32::from(q)).sum();
            assert_eq!(i32::from(block.bsums32[g]), sum);
        }
    }

    #[test]
    fn the_vector_kernel_gives_the_scalar_bits() {
        let mut x = crate::kernels::test_values(16 * QK_K, 5);
        x[..QK_K].fill(0.0);
        for (i, v) in x[QK_K..2 * QK_K].iter_mut().enumerate() {
            *v = (i as f32 - 128.0) * 0.5;
        }
        x[2 * QK_K..3 * QK_K].iter_mut().for_each(|v| *v *= 1e30);
        let mut fast = vec![BlockQ8K::ZERO; 16];
        for isa in Isa::tested("the activation quantizer") {
            quantize_blocks_on(isa, &x, &mut fast);
            for (b, (fast, values)) in fast.iter().zip(x.chunks_exact(QK_K)).enumerate() {
                let scalar = BlockQ8K::quantize(values);
                assert_eq!(fast.d.to_bits(), scalar.d.to_bits(), "{isa:?} block {b}");
                assert_eq!(fast.qs, scalar.qs, "{isa:?} block {b}");
                assert_eq!(
                    (fast.bsums16, fast.bsums32),
                    (scalar.bsums16, scalar.bsums32)
                );
            }
        }
    }

    #[test]
    fn abs_max_equals_the_scalar_fold() {
        for seed in 0..20 {
            let x = crate::kernels::test_values(256, seed);
            let scalar = x.iter().fold(0f32, |a, v| a.max(v.abs()));
            assert_eq!(abs_max(&x).to_bits(), scalar.to_bits());
        }
        assert_eq!(abs_max(&[-0.0; 8]).to_bits(), 0f32.to_bits());
        assert_eq!(abs_max(&[1.0, -7.5, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0]), 7.5);
    }

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        let cases = [
            (0.4, 0),
            (0.5, 0),
            (1.5, 2),
            (-1.5, -2),
            (-0.6, -1),
            (126.7, 127),
        ];
        for (v, expected) in cases {
            assert_eq!(nearest_int(v), expected, "{v}");
        }
    }

    #[test]
    fn a_zero_block_has_zero_scale_and_values() {
        let block = BlockQ8K::quantize(&[0.0; QK_K]);
        assert_eq!(block.d, 0.0);
        assert!(block.qs.iter().all(|&q| q == 0));
    }

    #[test]
    fn each_row_is_quantized_on_its_own() {
        let x = test_values(3 * 2 * QK_K, 4);
        let rows = Q8KRows::quantize(&x, 2 * QK_K);
        let alone = Q8KRows::quantize(&x[2 * QK_K..4 * QK_K], 2 * QK_K);
        for (a, b) in rows.row(1).iter().zip(alone.row(0)) {
            assert_eq!((a.d, a.qs, a.bsums16), (b.d, b.qs, b.bsums16));
        }
    }
}
