//! The 32-weight block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) as one family: a block is 32 levels
//! with an f16 scale `d` and, for the `_1` types, an f16 minimum `m`; weight = `d·(level − c)`
//! (a centre `c`: 8 or 16, 0 for Q8_0's signed levels) or `d·level + m`. Each type's file
//! (`q4_0.rs` … `q8_0.rs`) says how its blocks are stored ([`LegacyQuant`]); this file packs and dequantizes them and picks
//! the tile kernel for the ISA: `portable.rs` (the bit-exact reference), `avx2.rs`, `avx512.rs`
//! (VNNI), all reading the cells `layout.rs` defines. On AMX hosts these types run the VNNI
//! kernel (`Isa::vector`): a 32-weight block gives a tile product only 32 bytes of depth, and
//! the per-block f32 epilogue then dominates; an AMX kernel measured 0.8-0.95x of the VNNI one
//! on a Sapphire Rapids Xeon (BENCHMARKS.md) and was not kept.
//!
//! Panel layout: for every block of 32 weights, two cells (outputs 0-7, then 8-15). A cell holds
//! the levels of its 8 outputs interleaved in groups of 4 (byte `4·i + t` of group `g` is level
//! `4g + t` of output `i`), so one 32-byte vector times one broadcast group of 4 activation bytes
//! gives all 8 outputs' partial sums; 4-bit levels stay packed two groups to a byte (`g` in the
//! low nibble, `g + 4` in the high), and 5-bit levels are their low nibbles packed so followed
//! by a plane of fifth bits (bit `g` of byte `4·i + t`). Then 8 f32 scales, and 8 f32 minimums
//! for the `_1` types. Panels so hold 5 (Q4_0), 6 (Q5_0), 6 (Q4_1), 7 (Q5_1) and 9 (Q8_0) bits a
//! weight against 4.5, 5.5, 5, 6 and 8.5 stored.

use std::marker::PhantomData;

use sluice_gguf::GgmlType;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod layout;
mod portable;
mod q4_0;
mod q4_1;
mod q5_0;
mod q5_1;
mod q8_0;
#[cfg(test)]
mod tests;

use super::act_q8_0::{BlockQ8, Q8Rows, QK};
use super::{
    ActivationKind, Activations, Isa, PanelForm, PanelView, Prefetch, RowSpan, Tile, TilePlace,
    WeightFormat, PANEL, TILE_ROWS,
};
use layout::{read_cell, write_cell};
use layout::{LBlock, Offset, Scheme, CELL_OUTPUTS};
pub(super) use q4_0::Q4_0;
pub(super) use q4_1::Q4_1;
pub(super) use q5_0::Q5_0;
pub(super) use q5_1::Q5_1;
pub(super) use q8_0::Q8_0;

/// One 32-weight block type: its tag, scheme, stored layout and quantizer.
pub(super) trait LegacyQuant: 'static {
    /// The ggml type.
    const TYPE: GgmlType;
    /// Level width and offset.
    const SCHEME: Scheme;
    /// Reads one stored block.
    fn parse(bytes: &[u8]) -> LBlock;
    /// Writes one stored block.
    fn store(block: &LBlock, bytes: &mut [u8]);
    /// Quantizes 32 weights.
    fn quantize(x: &[f32]) -> LBlock;
}

/// The weight format of a [`LegacyQuant`] type.
pub(super) struct LegacyFormat<Q>(PhantomData<fn() -> Q>);

impl<Q> LegacyFormat<Q> {
    pub const NEW: Self = LegacyFormat(PhantomData);
}

impl<Q: LegacyQuant> std::fmt::Debug for LegacyFormat<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LegacyFormat({})", Q::TYPE)
    }
}

fn block_bytes<Q: LegacyQuant>() -> usize {
    Q::TYPE.block().expect("a known type").1
}

impl<Q: LegacyQuant> WeightFormat for LegacyFormat<Q> {
    fn ggml_type(&self) -> GgmlType {
        Q::TYPE
    }

    fn panel_bytes(&self, k: usize) -> usize {
        2 * (k / QK) * Q::SCHEME.cell_bytes()
    }

    fn activation(&self) -> ActivationKind {
        ActivationKind::Q8_0
    }

    fn encode_row(&self, src: &[f32], dst: &mut [u8]) {
        for (x, out) in src
            .chunks_exact(QK)
            .zip(dst.chunks_exact_mut(block_bytes::<Q>()))
        {
            Q::store(&Q::quantize(x), out);
        }
    }

    fn decode_row(&self, src: &[u8], dst: &mut [f32]) {
        for (block, out) in src
            .chunks_exact(block_bytes::<Q>())
            .zip(dst.chunks_exact_mut(QK))
        {
            Q::parse(block).dequantize(&Q::SCHEME, out);
        }
    }

    fn pack_panel(&self, rows: &[&[u8]], k: usize, panel: &mut [u8]) {
        assert!(rows.len() <= PANEL, "a panel holds at most {PANEL} rows");
        let (scheme, bytes) = (Q::SCHEME, block_bytes::<Q>());
        for b in 0..k / QK {
            let blocks: Vec<LBlock> = rows
                .iter()
                .map(|row| Q::parse(&row[b * bytes..][..bytes]))
                .collect();
            for half in 0..2 {
                let at = (2 * b + half) * scheme.cell_bytes();
                let cell = &mut panel[at..][..scheme.cell_bytes()];
                let first = (half * CELL_OUTPUTS).min(blocks.len());
                let last = ((half + 1) * CELL_OUTPUTS).min(blocks.len());
                write_cell(&scheme, &blocks[first..last], cell);
            }
        }
    }

    fn unpack_row(&self, panel: &[u8], k: usize, j: usize, out: &mut [f32]) {
        let scheme = Q::SCHEME;
        let (half, i) = (j / CELL_OUTPUTS, j % CELL_OUTPUTS);
        for (b, chunk) in out[..k].chunks_exact_mut(QK).enumerate() {
            let cell = &panel[(2 * b + half) * scheme.cell_bytes()..][..scheme.cell_bytes()];
            read_cell(&scheme, cell, i).dequantize(&scheme, chunk);
        }
    }

    fn tile_rows(&self, isa: Isa) -> usize {
        isa.vector().integer_tile_rows()
    }

    fn expanded_bytes(&self, isa: Isa, k: usize) -> usize {
        kernel_expanded_bytes(&Q::SCHEME, isa.vector(), k / QK)
    }

    fn expand_panel(&self, isa: Isa, panel: &[u8], k: usize, out: &mut [u8]) {
        kernel_expand(&Q::SCHEME, isa.vector(), panel, k / QK, out)
    }

    fn tile(
        &self,
        isa: Isa,
        panel: PanelView<'_>,
        x: &Activations<'_>,
        rows: RowSpan,
        place: TilePlace,
        tile: &mut Tile,
    ) {
        let Activations::Q8_0(x) = x else {
            panic!("{} multiplies Q8_0 activations", Q::TYPE);
        };
        kernel_tile(&Q::SCHEME, isa.vector(), panel, x, rows, place, tile)
    }
}

/// One tile against a legacy panel, packed or expanded, activation rows `rows` of `x`.
fn kernel_tile(
    scheme: &Scheme,
    isa: Isa,
    panel: PanelView<'_>,
    x: &Q8Rows,
    rows: RowSpan,
    place: TilePlace,
    tile: &mut Tile,
) {
    let (blocks, form, panel) = (panel.k / QK, panel.form, panel.bytes);
    let (r0, rows) = (rows.first, rows.len);
    assert!(rows <= isa.integer_tile_rows(), "{rows} rows in one tile");
    let expanded = form == PanelForm::Expanded;
    assert!(
        !expanded || isa == Isa::Avx512Vnni,
        "only VNNI panels expand"
    );
    let cell = scheme.cell_bytes();
    // A tile alone on its panel (a few rows) is bound by bandwidth that the hardware prefetcher
    // already uses: software prefetches there measured 15% slower at one row.
    let prefetch = match place {
        TilePlace::ALONE => Prefetch::Nothing,
        _ => place.prefetch(panel.len()),
    };
    let panel = match expanded {
        true => panel,
        false => &panel[..2 * blocks * cell],
    };
    const { assert!(PANEL == 2 * CELL_OUTPUTS) };
    let xs: [&[BlockQ8]; TILE_ROWS] = std::array::from_fn(|r| {
        if r < rows {
            &x.row(r0 + r)[..blocks]
        } else {
            &[]
        }
    });
    let xs = &xs[..rows];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only detected on CPUs with avx2+fma; the panel holds
        // `2 * blocks` cells and every row `blocks` blocks.
        Isa::Avx2 => unsafe { avx2::tile(scheme, panel, xs, tile) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, and `Isa::Avx512Vnni` is only detected with avx512f+vnni+vl.
        Isa::Avx512Vnni => unsafe { avx512::tile(scheme, panel, xs, expanded, prefetch, tile) },
        _ => {
            for (tile_row, xs) in tile.iter_mut().zip(xs) {
                for (half, out) in tile_row.chunks_exact_mut(CELL_OUTPUTS).enumerate() {
                    let out: &mut [f32; CELL_OUTPUTS] = out.try_into().expect("8 outputs");
                    portable::half_row(scheme, panel, half, xs, out);
                }
            }
        }
    }
}

/// Bytes a panel of `blocks` blocks takes expanded for `isa`, 0 where its kernel reads only
/// packed panels.
fn kernel_expanded_bytes(scheme: &Scheme, isa: Isa, blocks: usize) -> usize {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => blocks * avx512::expanded_block_bytes(scheme),
        _ => 0,
    }
}

/// Expands a packed panel of `blocks` blocks into `out` (`kernel_expanded_bytes` long).
fn kernel_expand(scheme: &Scheme, isa: Isa, panel: &[u8], blocks: usize, out: &mut [u8]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx512Vnni` is only detected with avx2+fma+avx512f+vnni+vl; `expand`
        // checks the lengths.
        Isa::Avx512Vnni => unsafe { avx512::expand(scheme, panel, blocks, out) },
        _ => panic!("{isa:?} kernels read packed panels"),
    }
}

/// Reads an f16 from two little-endian bytes.
pub(super) fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Writes `v` as an f16 into two bytes.
pub(super) fn put_f16(bytes: &mut [u8], at: usize, v: f32) {
    bytes[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
}

/// The value of largest magnitude, with its sign (ggml's symmetric quantizers scale by it).
pub(super) fn signed_absmax(x: &[f32]) -> f32 {
    x.iter()
        .fold(0f32, |best, &v| if v.abs() > best.abs() { v } else { best })
}

/// `(min, max)` of the values.
pub(super) fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}
