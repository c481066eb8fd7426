//! Q5_0: 5.5 bits a weight. A 32-weight block (22 bytes) holds an f16 scale `d`, the fifth bits
//! of the 32 levels (a little-endian u32, bit `i` for weight `i`) and their low 4 bits (as Q4_0
//! packs them); weight = `d·(level − 16)`.

use sluice_gguf::GgmlType;

use super::q4_0::{quantize_centred, read_nibbles, write_nibbles};
use super::{f16_at, put_f16, LBlock, LegacyFormat, LegacyQuant, Offset, Scheme};

/// The Q5_0 format.
pub(crate) static Q5_0: LegacyFormat<Q50> = LegacyFormat::NEW;

/// Q5_0's block layout.
pub(crate) struct Q50;

/// Reads 32 5-bit levels from the 4 bytes of fifth bits and 16 bytes of nibbles.
pub(super) fn read_fives(qh: &[u8], qs: &[u8], levels: &mut [u8; 32]) {
    read_nibbles(qs, levels);
    let high = u32::from_le_bytes(qh[..4].try_into().expect("4 bytes"));
    for (i, l) in levels.iter_mut().enumerate() {
        *l |= (((high >> i) & 1) as u8) << 4;
    }
}

/// Writes 32 5-bit levels as fifth bits and nibbles.
pub(super) fn write_fives(levels: &[u8; 32], qh: &mut [u8], qs: &mut [u8]) {
    write_nibbles(levels, qs);
    let high = levels
        .iter()
        .enumerate()
        .fold(0u32, |h, (i, &l)| h | (u32::from((l >> 4) & 1) << i));
    qh[..4].copy_from_slice(&high.to_le_bytes());
}

impl LegacyQuant for Q50 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    const SCHEME: Scheme = Scheme {
        bits: 5,
        offset: Offset::Centre(16),
    };

    fn parse(bytes: &[u8]) -> LBlock {
        let mut block = LBlock::ZERO;
        block.d = f16_at(bytes, 0);
        read_fives(&bytes[2..6], &bytes[6..22], &mut block.levels);
        block
    }

    fn store(block: &LBlock, bytes: &mut [u8]) {
        put_f16(bytes, 0, block.d);
        let (qh, qs) = bytes[2..22].split_at_mut(4);
        write_fives(&block.levels, qh, qs);
    }

    fn quantize(x: &[f32]) -> LBlock {
        quantize_centred(x, 16.0, 31)
    }
}
