//! Q8_0: 8.5 bits a weight. A 32-weight block (34 bytes) holds an f16 scale `d` and 32 signed
//! levels; weight = `d·level`.

use sluice_gguf::GgmlType;

use super::{f16_at, put_f16, LBlock, LegacyFormat, LegacyQuant, Offset, Scheme};

/// The Q8_0 format.
pub(crate) static Q8_0: LegacyFormat<Q80> = LegacyFormat::NEW;

/// Q8_0's block layout.
pub(crate) struct Q80;

impl LegacyQuant for Q80 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const SCHEME: Scheme = Scheme {
        bits: 8,
        offset: Offset::Signed,
    };

    fn parse(bytes: &[u8]) -> LBlock {
        let mut block = LBlock::ZERO;
        block.d = f16_at(bytes, 0);
        block.levels.copy_from_slice(&bytes[2..34]);
        block
    }

    fn store(block: &LBlock, bytes: &mut [u8]) {
        put_f16(bytes, 0, block.d);
        bytes[2..34].copy_from_slice(&block.levels);
    }

    fn quantize(x: &[f32]) -> LBlock {
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        let mut block = LBlock::ZERO;
        block.d = amax / 127.0;
        let inverse = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        for (l, v) in block.levels.iter_mut().zip(x) {
            *l = (v * inverse).round().clamp(-127.0, 127.0) as i8 as u8;
        }
        block
    }
}
