//! Q3_K: 3.4375 bits a weight. A 256-weight super-block (110 bytes) holds one high bit per
//! weight (32 bytes), the low 2 bits (64 bytes), sixteen 6-bit scales for sub-blocks of 16
//! (packed in 12 bytes, stored with +32) and an f16 `d`; weight = `d·scale·(level − 4)` with
//! `level = low | high << 2` (ggml writes it as `low − 4` where the high bit is clear).

use half::f16;
use sluice_gguf::GgmlType;

use super::super::act_q8k::QK_K;
use super::quantize::{finish_centred, fit_symmetric};
use super::{KBlock, KFormat, KQuant, Offset, Scheme};

/// The Q3_K format.
pub(crate) static Q3_K: KFormat<Q3K> = KFormat::NEW;

/// Q3_K's block layout.
pub(crate) struct Q3K;

/// Where weight `e`'s 2 low bits are in a Q2_K/Q3_K `qs` array: each half of 128 weights uses
/// 32 bytes, 2 bits per quarter.
pub(super) fn pair_position(e: usize) -> (usize, u32) {
    (32 * (e / 128) + e % 32, 2 * ((e % 128) / 32) as u32)
}

/// Where scale `i`'s low nibble and high 2 bits are in the 12 packed bytes.
fn scale_position(i: usize) -> (usize, u32, usize, u32) {
    (i % 8, 4 * (i / 8) as u32, 8 + i % 4, 2 * (i / 4) as u32)
}

impl KQuant for Q3K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    const SCHEME: Scheme = Scheme {
        sub: 16,
        nibble: false,
        pair: true,
        single: true,
        offset: Offset::Centre(2),
    };

    fn parse(bytes: &[u8]) -> KBlock {
        let (hmask, qs, packed) = (&bytes[..32], &bytes[32..96], &bytes[96..108]);
        let mut block = KBlock::ZERO;
        block.d = f16::from_le_bytes([bytes[108], bytes[109]]).to_f32();
        for (i, scale) in block.scales.iter_mut().enumerate() {
            let (lo, lo_shift, hi, hi_shift) = scale_position(i);
            let raw = ((packed[lo] >> lo_shift) & 0xF) | (((packed[hi] >> hi_shift) & 3) << 4);
            *scale = raw as i8 - 32;
        }
        for (e, level) in block.levels.iter_mut().enumerate() {
            let (byte, shift) = pair_position(e);
            let high = (hmask[e % 32] >> (e / 32)) & 1;
            *level = ((qs[byte] >> shift) & 3) | (high << 2);
        }
        block
    }

    fn store(block: &KBlock, bytes: &mut [u8]) {
        bytes[..110].fill(0);
        for (e, &level) in block.levels.iter().enumerate() {
            let (byte, shift) = pair_position(e);
            bytes[32 + byte] |= (level & 3) << shift;
            bytes[e % 32] |= ((level >> 2) & 1) << (e / 32);
        }
        for (i, &scale) in block.scales.iter().enumerate() {
            let raw = (scale + 32) as u8;
            let (lo, lo_shift, hi, hi_shift) = scale_position(i);
            bytes[96 + lo] |= (raw & 0xF) << lo_shift;
            bytes[96 + hi] |= ((raw >> 4) & 3) << hi_shift;
        }
        bytes[108..110].copy_from_slice(&f16::from_f32(block.d).to_le_bytes());
    }

    fn quantize(x: &[f32]) -> KBlock {
        debug_assert_eq!(x.len(), QK_K);
        let scales: Vec<f32> = x.chunks_exact(16).map(|s| fit_symmetric(s, 4)).collect();
        finish_centred(x, 16, &scales, 32, 4)
    }
}
