//! Q8_0 activations for the 32-weight block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): each row cut
//! into blocks of 32 values, each stored as 32 signed bytes with one f32 scale and the sum of
//! its bytes (which the kernels use to apply the weights' offset or minimum once per block).

use rayon::prelude::*;

use super::act_quant::{abs_max, nearest_int};
use super::Isa;

/// Values per block.
pub const QK: usize = 32;

/// One block of 32 quantized activations: `x[i] ≈ d · qs[i]`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct BlockQ8 {
    /// The scale (`max |x| / 127`).
    pub d: f32,
    /// `Σ qs`.
    pub sum: i32,
    /// The values, in `-127..=127`.
    pub qs: [i8; QK],
}

impl BlockQ8 {
    const ZERO: BlockQ8 = BlockQ8 {
        d: 0.0,
        sum: 0,
        qs: [0; QK],
    };

    /// Quantizes 32 values with the scale that maps the largest magnitude to 127.
    pub fn quantize(x: &[f32]) -> Self {
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
        block.sum = block.qs.iter().map(|&q| i32::from(q)).sum();
        block
    }
}

/// Quantizes `x` into `out`, 32 values a block, with the vector kernel where the CPU has one:
/// the same operations as [`BlockQ8::quantize`], so the same bits.
fn quantize_blocks(x: &[f32], out: &mut [BlockQ8]) {
    quantize_blocks_on(Isa::current(), x, out)
}

/// [`quantize_blocks`] with the kernel of `isa` (one this CPU runs).
fn quantize_blocks_on(isa: Isa, x: &[f32], out: &mut [BlockQ8]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: both are only detected on CPUs with avx2.
        Isa::Avx2 | Isa::Avx512Vnni | Isa::Amx => unsafe { avx2::quantize_blocks(x, out) },
        _ => {
            for (block, values) in out.iter_mut().zip(x.chunks_exact(QK)) {
                *block = BlockQ8::quantize(values);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::act_quant::avx2::{abs_max, load32, quantize32};
    use super::{BlockQ8, QK};
    use std::arch::x86_64::*;

    /// Safety: needs avx2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_blocks(x: &[f32], out: &mut [BlockQ8]) {
        for (block, values) in out.iter_mut().zip(x.chunks_exact(QK)) {
            let v = load32(values.as_ptr());
            let amax = abs_max(&v);
            if amax == 0.0 {
                *block = BlockQ8::ZERO;
                continue;
            }
            let (bytes, first, last) = quantize32(&v, 127.0 / amax);
            block.d = amax / 127.0;
            block.sum = first + last;
            _mm256_storeu_si256(block.qs.as_mut_ptr() as *mut __m256i, bytes);
        }
    }
}

/// Rows of activations `[m, k]` as blocks of 32, `k / 32` a row.
#[derive(Debug)]
pub struct Q8Rows {
    blocks: Vec<BlockQ8>,
    blocks_per_row: usize,
}

impl Q8Rows {
    /// Quantizes `x: [m, k]` row by row (`k` a multiple of 32), each block on its own.
    pub fn quantize(x: &[f32], k: usize) -> Self {
        assert!(
            k.is_multiple_of(QK),
            "Q8_0 activations need rows of whole 32-value blocks, got {k}"
        );
        let mut blocks = vec![BlockQ8::ZERO; x.len() / QK];
        blocks
            .par_chunks_mut(256)
            .zip(x.par_chunks(256 * QK))
            .for_each(|(dst, src)| quantize_blocks(src, dst));
        Self {
            blocks,
            blocks_per_row: k / QK,
        }
    }

    /// The blocks of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &[BlockQ8] {
        &self.blocks[r * self.blocks_per_row..][..self.blocks_per_row]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_values;

    #[test]
    fn a_block_is_within_half_a_step_and_sums_its_bytes() {
        let x = test_values(QK, 4);
        let block = BlockQ8::quantize(&x);
        for (v, &q) in x.iter().zip(&block.qs) {
            assert!((v - block.d * f32::from(q)).abs() <= block.d * 0.5 + 1e-7);
        }
        assert_eq!(
            block.sum,
            block.qs.iter().map(|&q| i32::from(q)).sum::<i32>()
        );
        assert_eq!(BlockQ8::quantize(&[0.0; QK]).d, 0.0);
    }

    #[test]
    fn the_vector_kernel_gives_the_scalar_bits() {
        let mut x = test_values(64 * QK, 9);
        // A zero block, a block of ties (0.5 steps), a huge and a tiny one.
        x[..QK].fill(0.0);
        for (i, v) in x[QK..2 * QK].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) * 0.5;
        }
        x[2 * QK..3 * QK].iter_mut().for_each(|v| *v *= 1e30);
        x[3 * QK..4 * QK].iter_mut().for_each(|v| *v *= 1e-30);
        let mut fast = vec![BlockQ8::ZERO; 64];
        for isa in Isa::tested("the activation quantizer") {
            quantize_blocks_on(isa, &x, &mut fast);
            for (b, (fast, values)) in fast.iter().zip(x.chunks_exact(QK)).enumerate() {
                let scalar = BlockQ8::quantize(values);
                assert_eq!(fast.d.to_bits(), scalar.d.to_bits(), "{isa:?} block {b}");
                assert_eq!(
                    (fast.sum, fast.qs),
                    (scalar.sum, scalar.qs),
                    "{isa:?} block {b}"
                );
            }
        }
    }
}
