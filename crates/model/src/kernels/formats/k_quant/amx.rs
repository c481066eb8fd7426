//! The K-quant tile kernel on AMX-INT8, over panels expanded for it ([`expand`]). Per
//! super-block and sub-block, a tile of the rows' activation bytes (signed, read in place
//! from the Q8_K rows) times a tile of the sub-block's levels (unsigned, 16 outputs' quads)
//! gives the exact sums `Σ level·q` in one `tdpbsud`; each is scaled by its integer sub-block
//! scale and added in i32 (`A`), the offsets' sums `B` come from the activations' group sums
//! (`vpdpwssd` over pairs of sub-blocks), and the f32 update is `portable.rs`'s: the same
//! integers and the same f32 operations, so the same bits as every other K-quant kernel.
//!
//! Expanded super-block (16 outputs): 64 quad rows of 64 bytes (quad `t` — weights `4t..4t+4`
//! — of output `j` at bytes `4j..4j + 4`), the sub-block scales as 16 i32 each, the offsets'
//! factors (minimums, or the scales for centred types) as i16 pairs of sub-blocks `(2p,
//! 2p+1)` for each output, then `d` and `dmin` as 16 f32 each.

use std::arch::x86_64::*;

use super::super::super::amx::{
    tile_dot_signed_unsigned, tile_load, tile_store, tile_zero, TileConfig,
};
use super::super::act_q8k::{BlockQ8K, QK_K};
use super::super::{Tile, PANEL, TILE_ROWS};
use super::avx2::unpack_group;
use super::layout::{Offset, Scheme, CELL_OUTPUTS};
use super::KQuant;

/// Bytes of a super-block's levels: 64 quads of 16 outputs' 4 levels.
const LEVEL_BYTES: usize = QK_K / 4 * 64;

/// Where the parts of an expanded super-block start.
const fn scales_at() -> usize {
    LEVEL_BYTES
}
const fn factors_at(scheme: &Scheme) -> usize {
    scales_at() + scheme.subs() * 64
}
const fn d_at(scheme: &Scheme) -> usize {
    factors_at(scheme) + scheme.subs() / 2 * 64
}

/// Bytes of one expanded super-block of `scheme`.
pub(super) const fn expanded_block_bytes(scheme: &Scheme) -> usize {
    d_at(scheme) + 2 * 64
}

/// Writes the `blocks` super-blocks of a packed panel into `out` expanded. Safety: needs
/// avx2+fma+avx512f+avx512vl; `panel` holds `blocks` packed super-blocks of `Q`, `out` as many
/// expanded ones.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) unsafe fn expand<Q: KQuant>(panel: &[u8], blocks: usize, out: &mut [u8]) {
    let scheme = &const { Q::SCHEME };
    let (cell_bytes, block_bytes) = (scheme.cell_bytes(), expanded_block_bytes(scheme));
    assert!(panel.len() >= 2 * blocks * cell_bytes);
    assert!(out.len() >= blocks * block_bytes);
    let factors = match scheme.has_min() {
        true => scheme.mins_offset(),
        false => scheme.scales_offset(),
    };
    for b in 0..blocks {
        let dst = out.as_mut_ptr().add(b * block_bytes);
        for half in 0..2 {
            let cell = panel.as_ptr().add((2 * b + half) * cell_bytes);
            let lanes = 32 * half;
            for unit in 0..QK_K / 32 {
                let unit_ptr = cell.add(scheme.units_offset() + unit * scheme.unit_bytes());
                for half_unit in 0..2 {
                    let group = 2 * unit + half_unit;
                    for (i, quad) in unpack_group::<Q>(unit_ptr, half_unit).iter().enumerate() {
                        let row = dst.add(64 * (4 * group + i) + lanes);
                        _mm256_storeu_si256(row.cast(), *quad);
                    }
                }
            }
            for s in 0..scheme.subs() {
                let scales = _mm_loadl_epi64(cell.add(scheme.scales_offset() + 8 * s).cast());
                let at = dst.add(scales_at() + 64 * s + lanes);
                _mm256_storeu_si256(at.cast(), _mm256_cvtepi8_epi32(scales));
            }
            for p in 0..scheme.subs() / 2 {
                let f = cell.add(factors + 16 * p);
                let (a, c) = (_mm_loadl_epi64(f.cast()), _mm_loadl_epi64(f.add(8).cast()));
                // Minimums are at most 63 and scales signed: both widen as signed bytes.
                let pairs = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, c));
                _mm256_storeu_si256(dst.add(factors_at(scheme) + 64 * p + lanes).cast(), pairs);
            }
            let d = dst.add(d_at(scheme) + lanes);
            _mm256_storeu_si256(d.cast(), _mm256_loadu_si256(cell.cast()));
            let dmin = _mm256_loadu_si256(cell.add(scheme.dmin_offset()).cast());
            match scheme.has_min() {
                true => _mm256_storeu_si256(d.add(64).cast(), dmin),
                false => _mm256_storeu_si256(d.add(64).cast(), _mm256_setzero_si256()),
            }
        }
    }
    const { assert!(CELL_OUTPUTS * 2 == PANEL) };
}

/// One tile of `xs.len()` (1 to 16) rows against an expanded panel of `blocks` super-blocks.
/// Safety: needs avx2+fma+avx512f+avx512vnni+avx512vl and AMX permission (`Isa::Amx`); the
/// rows are equally spaced in memory (rows of one `Q8KRows`), each `blocks` long.
#[target_feature(enable = "avx2,fma,avx512f,avx512vnni,avx512vl")]
pub(super) unsafe fn tile<Q: KQuant>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    tile: &mut Tile,
) {
    macro_rules! per_rows {
        ($($r:literal)*) => {
            match xs.len() {
                $($r => rows::<Q, $r>(panel, blocks, xs, tile),)*
                m => unreachable!("{m} rows in an AMX tile"),
            }
        };
    }
    per_rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

/// Multiplies one sub-block into the sums tile `c` (zeroed first), with `a` and `w` the tiles
/// its activations and levels go through.
macro_rules! sub_product {
    ($c:literal, $a:literal, $w:literal, $qs:expr, $stride:expr, $levels:expr) => {
        tile_zero!($c);
        tile_load!($a, $qs, $stride);
        tile_load!($w, $levels, 64usize);
        tile_dot_signed_unsigned!($c, $a, $w);
    };
}

/// The sub-blocks run as a pipeline over two sets of tiles: sub-block `s + 1` multiplies while
/// sub-block `s`'s sums are stored and scaled into the rows' integer sums, which stay in
/// registers (one kernel per row count `R`).
#[inline(always)]
unsafe fn rows<Q: KQuant, const R: usize>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    tile: &mut Tile,
) {
    let scheme = &const { Q::SCHEME };
    let (sub, subs) = (scheme.sub, scheme.subs());
    assert!(R == xs.len() && R <= TILE_ROWS);
    let block_bytes = expanded_block_bytes(scheme);
    assert!(panel.len() >= blocks * block_bytes);
    let stride = match R {
        1 => 0,
        _ => (xs[1].as_ptr() as usize).wrapping_sub(xs[0].as_ptr() as usize),
    };
    for (r, row) in xs.iter().enumerate() {
        assert!(row.len() >= blocks);
        assert_eq!(row.as_ptr() as usize, xs[0].as_ptr() as usize + r * stride);
    }
    // Tiles 0 and 3: two sub-blocks' sums (R × 16 i32); 1 and 4: their activations (R × sub
    // bytes); 2 and 5: their levels (sub / 4 quads × 64 bytes).
    let mut config = TileConfig::new();
    for (sums, acts, levels) in [(0, 1, 2), (3, 4, 5)] {
        config = config
            .with(sums, R, 64)
            .with(acts, R, sub)
            .with(levels, sub / 4, 64);
    }
    let qs_offset = std::mem::offset_of!(BlockQ8K, qs);
    let mut acc = [_mm512_setzero_ps(); R];
    let mut sums = Sums([[[0i32; PANEL]; TILE_ROWS]; 2]);
    let sums_at = [0, 1].map(|i| sums.0[i].as_mut_ptr().cast::<u8>());
    // Sub-block `i` of the whole row (`i / subs` its super-block).
    let qs_at = |i: usize| {
        let x = xs[0].as_ptr().add(i / subs).cast::<u8>();
        x.add(qs_offset + (i % subs) * sub)
    };
    let levels_at = |i: usize| {
        panel
            .as_ptr()
            .add((i / subs) * block_bytes + (i % subs) * sub * 16)
    };
    // Sub-block `i`'s integer scales (not a closure: see `scaled`).
    let scales_of = |i: usize| {
        panel
            .as_ptr()
            .add((i / subs) * block_bytes + scales_at() + 64 * (i % subs))
    };
    let total = blocks * subs;
    config.run(|| {
        let mut a = [_mm512_setzero_si512(); R];
        sub_product!("0", "1", "2", qs_at(0), stride, levels_at(0));
        // `subs` is even, so sub-block pairs never straddle a super-block.
        for i in (0..total).step_by(2) {
            sub_product!("3", "4", "5", qs_at(i + 1), stride, levels_at(i + 1));
            tile_store!("0", sums_at[0], 64usize);
            scaled(scales_of(i), sums_at[0], &mut a);
            if i + 2 < total {
                sub_product!("0", "1", "2", qs_at(i + 2), stride, levels_at(i + 2));
            }
            tile_store!("3", sums_at[1], 64usize);
            scaled(scales_of(i + 1), sums_at[1], &mut a);
            if (i + 2) % subs == 0 {
                let b = i / subs;
                update::<Q, R>(panel.as_ptr().add(b * block_bytes), b, xs, &a, &mut acc);
                a = [_mm512_setzero_si512(); R];
            }
        }
    });
    for (row, acc) in tile.iter_mut().zip(acc) {
        _mm512_storeu_ps(row.as_mut_ptr(), acc);
    }
}

/// Adds each row's stored sums (`sums`, 64-byte rows) times the sub-block's integer scales (at
/// `scales`) into `a`. A function, not a closure: a closure does not inherit the caller's target
/// features, and these intrinsics were calls when written in one (`scripts/check-intrinsics`).
#[inline(always)]
unsafe fn scaled<const R: usize>(scales: *const u8, sums: *const u8, a: &mut [__m512i; R]) {
    let scale = _mm512_loadu_si512(scales.cast());
    for (r, a) in a.iter_mut().enumerate() {
        let dot = _mm512_loadu_si512(sums.add(64 * r).cast());
        *a = _mm512_add_epi32(*a, _mm512_mullo_epi32(dot, scale));
    }
}

/// Two sub-blocks' sums, as the tile stores write them (64-byte rows).
#[repr(C, align(64))]
struct Sums([[[i32; PANEL]; TILE_ROWS]; 2]);

/// The offsets' sums `B` of super-block `b` and the f32 update of each row, as `portable.rs`.
#[inline(always)]
unsafe fn update<Q: KQuant, const R: usize>(
    block: *const u8,
    b: usize,
    xs: &[&[BlockQ8K]],
    a: &[__m512i; R],
    acc: &mut [__m512; R],
) {
    let scheme = &const { Q::SCHEME };
    let d = _mm512_loadu_ps(block.add(d_at(scheme)).cast());
    let dmin = _mm512_loadu_ps(block.add(d_at(scheme) + 64).cast());
    for r in 0..R {
        let x = xs.get_unchecked(r).get_unchecked(b);
        let sums = match scheme.sub {
            32 => x.bsums32.as_ptr(),
            _ => x.bsums16.as_ptr(),
        };
        let mut bs = _mm512_setzero_si512();
        for p in 0..scheme.subs() / 2 {
            let f = _mm512_loadu_si512(block.add(factors_at(scheme) + 64 * p).cast());
            let s = _mm512_set1_epi32(sums.add(2 * p).cast::<i32>().read_unaligned());
            bs = _mm512_dpwssd_epi32(bs, f, s);
        }
        let dx = _mm512_set1_ps(x.d);
        let v = &mut acc[r];
        match scheme.offset {
            Offset::Min => {
                *v = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(a[r]), *v);
                *v = _mm512_fnmadd_ps(_mm512_mul_ps(dx, dmin), _mm512_cvtepi32_ps(bs), *v);
            }
            Offset::Centre(shift) => {
                let shift = _mm_cvtsi32_si128(shift as i32);
                let centred = _mm512_sub_epi32(a[r], _mm512_sll_epi32(bs, shift));
                *v = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(centred), *v);
            }
        }
    }
}
