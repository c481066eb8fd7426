//! Q5_1: 6 bits a weight. A 32-weight block (24 bytes) holds f16 `d` and `m` and 32 5-bit
//! levels (as Q5_0 packs them); weight = `d·level + m`.

use sluice_gguf::GgmlType;

use super::q4_1::quantize_with_min;
use super::q5_0::{read_fives, write_fives};
use super::{f16_at, put_f16, LBlock, LegacyFormat, LegacyQuant, Offset, Scheme};

/// The Q5_1 format.
pub(crate) static Q5_1: LegacyFormat<Q51> = LegacyFormat::NEW;

/// Q5_1's block layout.
pub(crate) struct Q51;

impl LegacyQuant for Q51 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    const SCHEME: Scheme = Scheme {
        bits: 5,
        offset: Offset::Min,
    };

    fn parse(bytes: &[u8]) -> LBlock {
        let mut block = LBlock::ZERO;
        block.d = f16_at(bytes, 0);
        block.m = f16_at(bytes, 2);
        read_fives(&bytes[4..8], &bytes[8..24], &mut block.levels);
        block
    }

    fn store(block: &LBlock, bytes: &mut [u8]) {
        put_f16(bytes, 0, block.d);
        put_f16(bytes, 2, block.m);
        let (qh, qs) = bytes[4..24].split_at_mut(4);
        write_fives(&block.levels, qh, qs);
    }

    fn quantize(x: &[f32]) -> LBlock {
        quantize_with_min(x, 31)
    }
}
