//! Q5_K: 5.5 bits a weight. A 256-weight super-block (176 bytes) is Q4_K's (f16 `d`/`dmin`,
//! eight 6-bit scales and mins for sub-blocks of 32, 4-bit low levels) plus one high bit per
//! weight in 32 bytes; weight = `d·scale·level − dmin·min` with levels `0..32`.

use sluice_gguf::GgmlType;

use super::super::act_q8k::QK_K;
use super::q4_k::{
    nibble_position, pack_scales, quantize_32s, read_d_dmin, unpack_scales, write_d_dmin,
};
use super::{KBlock, KFormat, KQuant, Offset, Scheme};

/// The Q5_K format.
pub(crate) static Q5_K: KFormat<Q5K> = KFormat::NEW;

/// Q5_K's block layout.
pub(crate) struct Q5K;

impl KQuant for Q5K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    const SCHEME: Scheme = Scheme {
        sub: 32,
        nibble: true,
        pair: false,
        single: true,
        offset: Offset::Min,
    };

    fn parse(bytes: &[u8]) -> KBlock {
        let mut block = KBlock::ZERO;
        read_d_dmin(bytes, &mut block);
        unpack_scales(&bytes[4..16], &mut block);
        let (qh, qs) = (&bytes[16..48], &bytes[48..176]);
        for (e, level) in block.levels.iter_mut().enumerate() {
            let (byte, shift) = nibble_position(e);
            let high = (qh[e % 32] >> (e / 32)) & 1;
            *level = ((qs[byte] >> shift) & 0xF) | (high << 4);
        }
        block
    }

    fn store(block: &KBlock, bytes: &mut [u8]) {
        bytes[..176].fill(0);
        write_d_dmin(block, bytes);
        pack_scales(block, &mut bytes[4..16]);
        for (e, &level) in block.levels.iter().enumerate() {
            let (byte, shift) = nibble_position(e);
            bytes[48 + byte] |= (level & 0xF) << shift;
            bytes[16 + e % 32] |= ((level >> 4) & 1) << (e / 32);
        }
    }

    fn quantize(x: &[f32]) -> KBlock {
        debug_assert_eq!(x.len(), QK_K);
        quantize_32s(x, 31, (-0.5, 0.1, 15))
    }
}
