//! The K-quant tile kernel on AVX-512 VNNI (with AVX-512VL, on 256-bit vectors): the body
//! shared with `avx2.rs`, run with `VNNI` so each group's quads go through `vpdpbusd` into 32
//! bits and the bias sums through `vpdpwssd`, 8 rows a tile in the 32 vector registers. A
//! 512-bit form (as the 32-weight types use) measured slower here and was not kept.

use super::super::act_q8k::BlockQ8K;
use super::super::{Prefetch, Tile};
use super::avx2;
use super::KQuant;

/// Safety: needs avx2+fma+avx512vnni+avx512vl; otherwise as `avx2::tile`.
#[target_feature(enable = "avx2,fma,avx512vnni,avx512vl")]
pub(super) unsafe fn tile<Q: KQuant>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    avx2::tile_with::<Q, true>(panel, blocks, xs, prefetch, tile)
}
