//! Q2_K: 2.625 bits a weight. A 256-weight super-block (84 bytes) holds sixteen bytes of 4-bit
//! scale and min for sub-blocks of 16, 2-bit levels (64 bytes) and f16 `d` and `dmin`;
//! weight = `d·scale·level − dmin·min`.

use half::f16;
use sluice_gguf::GgmlType;

use super::super::act_q8k::QK_K;
use super::q3_k::pair_position;
use super::quantize::{finish_with_min, fit_with_min, magnitude_weights};
use super::{KBlock, KFormat, KQuant, Offset, Scheme};

/// The Q2_K format.
pub(crate) static Q2_K: KFormat<Q2K> = KFormat::NEW;

/// Q2_K's block layout.
pub(crate) struct Q2K;

impl KQuant for Q2K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    const SCHEME: Scheme = Scheme {
        sub: 16,
        nibble: false,
        pair: true,
        single: false,
        offset: Offset::Min,
    };

    fn parse(bytes: &[u8]) -> KBlock {
        let (packed, qs) = (&bytes[..16], &bytes[16..80]);
        let mut block = KBlock::ZERO;
        block.d = f16::from_le_bytes([bytes[80], bytes[81]]).to_f32();
        block.dmin = f16::from_le_bytes([bytes[82], bytes[83]]).to_f32();
        for (s, &byte) in packed.iter().enumerate() {
            block.scales[s] = (byte & 0xF) as i8;
            block.mins[s] = byte >> 4;
        }
        for (e, level) in block.levels.iter_mut().enumerate() {
            let (byte, shift) = pair_position(e);
            *level = (qs[byte] >> shift) & 3;
        }
        block
    }

    fn store(block: &KBlock, bytes: &mut [u8]) {
        bytes[..84].fill(0);
        for ((byte, &scale), &min) in bytes.iter_mut().zip(&block.scales).zip(&block.mins) {
            *byte = (scale as u8 & 0xF) | (min << 4);
        }
        for (e, &level) in block.levels.iter().enumerate() {
            let (byte, shift) = pair_position(e);
            bytes[16 + byte] |= (level & 3) << shift;
        }
        bytes[80..82].copy_from_slice(&f16::from_f32(block.d).to_le_bytes());
        bytes[82..84].copy_from_slice(&f16::from_f32(block.dmin).to_le_bytes());
    }

    fn quantize(x: &[f32]) -> KBlock {
        debug_assert_eq!(x.len(), QK_K);
        let mut weights = [0f32; 16];
        let fits: Vec<(f32, f32)> = x
            .chunks_exact(16)
            .map(|sub| {
                magnitude_weights(sub, &mut weights);
                fit_with_min(sub, &weights, 3, (-0.5, 0.1, 15))
            })
            .collect();
        finish_with_min(x, 16, &fits, 15, 3)
    }
}
