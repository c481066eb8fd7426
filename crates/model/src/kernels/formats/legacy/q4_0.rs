//! Q4_0: 4.5 bits a weight. A 32-weight block (18 bytes) holds an f16 scale `d` and 32 4-bit
//! levels (weight `i` in the low nibble of byte `i`, weight `i + 16` in its high nibble);
//! weight = `d·(level − 8)`.

use sluice_gguf::GgmlType;

use super::{f16_at, put_f16, signed_absmax, LBlock, LegacyFormat, LegacyQuant, Offset, Scheme};

/// The Q4_0 format.
pub(crate) static Q4_0: LegacyFormat<Q40> = LegacyFormat::NEW;

/// Q4_0's block layout.
pub(crate) struct Q40;

/// Reads 32 levels from 16 bytes of nibbles (Q4_0/Q4_1; the low 4 bits of Q5_0/Q5_1).
pub(super) fn read_nibbles(qs: &[u8], levels: &mut [u8; 32]) {
    for (j, &byte) in qs[..16].iter().enumerate() {
        levels[j] = byte & 0xF;
        levels[j + 16] = byte >> 4;
    }
}

/// Writes the low 4 bits of 32 levels into 16 bytes.
pub(super) fn write_nibbles(levels: &[u8; 32], qs: &mut [u8]) {
    for (j, byte) in qs[..16].iter_mut().enumerate() {
        *byte = (levels[j] & 0xF) | ((levels[j + 16] & 0xF) << 4);
    }
}

/// Symmetric levels `0..=nmax` around `centre` (ggml's reference): the value of largest
/// magnitude maps to `−centre`.
pub(super) fn quantize_centred(x: &[f32], centre: f32, nmax: i32) -> LBlock {
    let max = signed_absmax(x);
    let mut block = LBlock::ZERO;
    block.d = max / -centre;
    let inverse = if block.d != 0.0 { 1.0 / block.d } else { 0.0 };
    for (l, v) in block.levels.iter_mut().zip(x) {
        *l = ((v * inverse + centre + 0.5) as i32).clamp(0, nmax) as u8;
    }
    block
}

impl LegacyQuant for Q40 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    const SCHEME: Scheme = Scheme {
        bits: 4,
        offset: Offset::Centre(8),
    };

    fn parse(bytes: &[u8]) -> LBlock {
        let mut block = LBlock::ZERO;
        block.d = f16_at(bytes, 0);
        read_nibbles(&bytes[2..18], &mut block.levels);
        block
    }

    fn store(block: &LBlock, bytes: &mut [u8]) {
        put_f16(bytes, 0, block.d);
        write_nibbles(&block.levels, &mut bytes[2..18]);
    }

    fn quantize(x: &[f32]) -> LBlock {
        quantize_centred(x, 8.0, 15)
    }
}
