//! Q4_1: 5 bits a weight. A 32-weight block (20 bytes) holds f16 `d` and `m` and 32 4-bit levels
//! (as Q4_0 packs them); weight = `d·level + m`.

use sluice_gguf::GgmlType;

use super::q4_0::{read_nibbles, write_nibbles};
use super::{f16_at, min_max, put_f16, LBlock, LegacyFormat, LegacyQuant, Offset, Scheme};

/// The Q4_1 format.
pub(crate) static Q4_1: LegacyFormat<Q41> = LegacyFormat::NEW;

/// Q4_1's block layout.
pub(crate) struct Q41;

/// Levels `0..=nmax` from the minimum to the maximum (ggml's reference for Q4_1/Q5_1).
pub(super) fn quantize_with_min(x: &[f32], nmax: i32) -> LBlock {
    let (min, max) = min_max(x);
    let mut block = LBlock::ZERO;
    block.d = (max - min) / nmax as f32;
    block.m = min;
    let inverse = if block.d != 0.0 { 1.0 / block.d } else { 0.0 };
    for (l, v) in block.levels.iter_mut().zip(x) {
        *l = (((v - min) * inverse + 0.5) as i32).clamp(0, nmax) as u8;
    }
    block
}

impl LegacyQuant for Q41 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const SCHEME: Scheme = Scheme {
        bits: 4,
        offset: Offset::Min,
    };

    fn parse(bytes: &[u8]) -> LBlock {
        let mut block = LBlock::ZERO;
        block.d = f16_at(bytes, 0);
        block.m = f16_at(bytes, 2);
        read_nibbles(&bytes[4..20], &mut block.levels);
        block
    }

    fn store(block: &LBlock, bytes: &mut [u8]) {
        put_f16(bytes, 0, block.d);
        put_f16(bytes, 2, block.m);
        write_nibbles(&block.levels, &mut bytes[4..20]);
    }

    fn quantize(x: &[f32]) -> LBlock {
        quantize_with_min(x, 15)
    }
}
