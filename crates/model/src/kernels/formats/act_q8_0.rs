//! Q8_0 activations for the 32-weight block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): each row cut
//! into blocks of 32 values, each stored as 32 signed bytes with one f32 scale and the sum of
//! its bytes (which the kernels use to apply the weights' offset or minimum once per block).

use rayon::prelude::*;

use super::act_q8k::{abs_max, nearest_int};

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
            .for_each(|(dst, src)| {
                for (block, values) in dst.iter_mut().zip(src.chunks_exact(QK)) {
                    *block = BlockQ8::quantize(values);
                }
            });
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
}
