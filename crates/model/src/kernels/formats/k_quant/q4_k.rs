//! Q4_K: 4.5 bits a weight. A 256-weight super-block (144 bytes) holds f16 `d` and `dmin`,
//! eight 6-bit scales and mins (packed in 12 bytes) for sub-blocks of 32, and 4-bit levels;
//! weight = `d·scale·level − dmin·min`.

use half::f16;
use sluice_gguf::GgmlType;

use super::super::act_q8k::QK_K;
use super::quantize::{finish_with_min, fit_with_min, magnitude_weights};
use super::{KBlock, KFormat, KQuant, Offset, Scheme};

/// The Q4_K format.
pub(crate) static Q4_K: KFormat<Q4K> = KFormat::NEW;

/// Q4_K's block layout.
pub(crate) struct Q4K;

/// Reads the eight 6-bit scales and mins of a Q4_K/Q5_K block's 12 packed bytes.
pub(super) fn unpack_scales(packed: &[u8], block: &mut KBlock) {
    for j in 0..8 {
        let (scale, min) = if j < 4 {
            (packed[j] & 63, packed[j + 4] & 63)
        } else {
            (
                (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4),
                (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
            )
        };
        block.scales[j] = scale as i8;
        block.mins[j] = min;
    }
}

/// Writes eight 6-bit scales and mins as Q4_K/Q5_K pack them.
pub(super) fn pack_scales(block: &KBlock, packed: &mut [u8]) {
    let (sc, m) = (&block.scales, &block.mins);
    for j in 0..4 {
        let (hi_sc, hi_m) = (sc[j + 4] as u8, m[j + 4]);
        packed[j] = (sc[j] as u8 & 63) | ((hi_sc >> 4) << 6);
        packed[j + 4] = (m[j] & 63) | ((hi_m >> 4) << 6);
        packed[j + 8] = (hi_sc & 0xF) | ((hi_m & 0xF) << 4);
    }
}

/// Reads f16 `d` and `dmin` from the first four bytes.
pub(super) fn read_d_dmin(bytes: &[u8], block: &mut KBlock) {
    block.d = f16::from_le_bytes([bytes[0], bytes[1]]).to_f32();
    block.dmin = f16::from_le_bytes([bytes[2], bytes[3]]).to_f32();
}

/// Writes f16 `d` and `dmin` into the first four bytes.
pub(super) fn write_d_dmin(block: &KBlock, bytes: &mut [u8]) {
    bytes[..2].copy_from_slice(&f16::from_f32(block.d).to_le_bytes());
    bytes[2..4].copy_from_slice(&f16::from_f32(block.dmin).to_le_bytes());
}

/// The low 4 bits of the levels, as Q4_K/Q5_K store them in 128 bytes: weight `e` is in byte
/// `32·(e/64) + e%32`, low nibble for the first 32 of each 64, high for the second.
pub(super) fn nibble_position(e: usize) -> (usize, u32) {
    (32 * (e / 64) + e % 32, 4 * ((e % 64) / 32) as u32)
}

/// Quantizes 256 weights with sub-blocks of 32 and levels `0..=nmax` (15 for Q4_K, 31 for
/// Q5_K).
pub(super) fn quantize_32s(x: &[f32], nmax: u8, search: (f32, f32, usize)) -> KBlock {
    let mut weights = [0f32; 32];
    let fits: Vec<(f32, f32)> = x
        .chunks_exact(32)
        .map(|sub| {
            magnitude_weights(sub, &mut weights);
            fit_with_min(sub, &weights, nmax, search)
        })
        .collect();
    finish_with_min(x, 32, &fits, 63, nmax)
}

impl KQuant for Q4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    const SCHEME: Scheme = Scheme {
        sub: 32,
        nibble: true,
        pair: false,
        single: false,
        offset: Offset::Min,
    };

    fn parse(bytes: &[u8]) -> KBlock {
        let mut block = KBlock::ZERO;
        read_d_dmin(bytes, &mut block);
        unpack_scales(&bytes[4..16], &mut block);
        let qs = &bytes[16..144];
        for (e, level) in block.levels.iter_mut().enumerate() {
            let (byte, shift) = nibble_position(e);
            *level = (qs[byte] >> shift) & 0xF;
        }
        block
    }

    fn store(block: &KBlock, bytes: &mut [u8]) {
        bytes[..144].fill(0);
        write_d_dmin(block, bytes);
        pack_scales(block, &mut bytes[4..16]);
        let qs = &mut bytes[16..144];
        for (e, &level) in block.levels.iter().enumerate() {
            let (byte, shift) = nibble_position(e);
            qs[byte] |= (level & 0xF) << shift;
        }
    }

    fn quantize(x: &[f32]) -> KBlock {
        debug_assert_eq!(x.len(), QK_K);
        quantize_32s(x, 15, (-1.0, 0.1, 20))
    }
}
