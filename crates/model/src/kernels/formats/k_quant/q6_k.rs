//! Q6_K: 6.5625 bits a weight. A 256-weight super-block (210 bytes) holds 6-bit levels (low
//! 4 bits in 128 bytes, high 2 bits in 64), sixteen i8 scales for sub-blocks of 16 and an f16
//! `d`; weight = `d·scale·(level − 32)`.

use half::f16;
use sluice_gguf::GgmlType;

use super::super::act_q8k::QK_K;
use super::quantize::{finish_centred, fit_symmetric};
use super::{KBlock, KFormat, KQuant, Offset, Scheme};

/// The Q6_K format.
pub(crate) static Q6_K: KFormat<Q6K> = KFormat::NEW;

/// Q6_K's block layout.
pub(crate) struct Q6K;

/// Where weight `e`'s low nibble and high 2 bits are: `(byte of ql, shift, byte of qh,
/// shift)`. Each half of 128 weights uses 64 bytes of `ql` (low nibbles for its first 64
/// weights, high nibbles for the next) and 32 of `qh` (2 bits for each quarter).
fn position(e: usize) -> (usize, u32, usize, u32) {
    let (half, w) = (e / 128, e % 128);
    (
        64 * half + w % 64,
        4 * (w / 64) as u32,
        32 * half + w % 32,
        2 * (w / 32) as u32,
    )
}

impl KQuant for Q6K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    const SCHEME: Scheme = Scheme {
        sub: 16,
        nibble: true,
        pair: true,
        single: false,
        offset: Offset::Centre(5),
    };

    fn parse(bytes: &[u8]) -> KBlock {
        let (ql, qh) = (&bytes[..128], &bytes[128..192]);
        let mut block = KBlock::ZERO;
        for (s, scale) in block.scales.iter_mut().enumerate() {
            *scale = bytes[192 + s] as i8;
        }
        block.d = f16::from_le_bytes([bytes[208], bytes[209]]).to_f32();
        for (e, level) in block.levels.iter_mut().enumerate() {
            let (lo, lo_shift, hi, hi_shift) = position(e);
            *level = ((ql[lo] >> lo_shift) & 0xF) | (((qh[hi] >> hi_shift) & 3) << 4);
        }
        block
    }

    fn store(block: &KBlock, bytes: &mut [u8]) {
        bytes[..210].fill(0);
        for (e, &level) in block.levels.iter().enumerate() {
            let (lo, lo_shift, hi, hi_shift) = position(e);
            bytes[lo] |= (level & 0xF) << lo_shift;
            bytes[128 + hi] |= ((level >> 4) & 3) << hi_shift;
        }
        for (s, &scale) in block.scales.iter().enumerate() {
            bytes[192 + s] = scale as u8;
        }
        bytes[208..210].copy_from_slice(&f16::from_f32(block.d).to_le_bytes());
    }

    fn quantize(x: &[f32]) -> KBlock {
        debug_assert_eq!(x.len(), QK_K);
        let scales: Vec<f32> = x.chunks_exact(16).map(|s| fit_symmetric(s, 32)).collect();
        finish_centred(x, 16, &scales, 128, 32)
    }
}
