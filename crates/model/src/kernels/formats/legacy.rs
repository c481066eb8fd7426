//! The 32-weight block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) as one family: a block is 32 levels
//! with an f16 scale `d` and, for the `_1` types, an f16 minimum `m`; weight = `d·(level − c)`
//! (a centre `c`: 8 or 16, 0 for Q8_0's signed levels) or `d·level + m`. Each type's file says
//! how its blocks are stored ([`LegacyQuant`]); this file packs and dequantizes them, and
//! `legacy_tile.rs` multiplies them.
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

use super::act_q8_0::QK;
use super::{
    legacy_tile, ActivationKind, Activations, Isa, PanelForm, Tile, TilePlace, WeightFormat, PANEL,
};

/// Outputs per cell.
pub(super) const CELL_OUTPUTS: usize = 8;

/// How a type's levels turn into weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offset {
    /// `d·(level − c)` with unsigned levels.
    Centre(i32),
    /// `d·level + m`.
    Min,
    /// `d·level` with signed levels (Q8_0).
    Signed,
}

/// A type's level width and offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scheme {
    /// Bits a level: 4, 5 or 8.
    pub bits: u32,
    /// How levels become weights.
    pub offset: Offset,
}

/// Q8_0's signed levels are stored in cells as `level + 128` (this xor): the bytes a VNNI
/// `vpdpbusd` multiplies as unsigned, the dot corrected by `128·Σq` after.
pub(super) const SIGNED_BIAS: u8 = 0x80;

/// Bytes of a cell's low nibbles (4- and 5-bit levels).
pub(super) const NIBBLE_BYTES: usize = CELL_OUTPUTS * QK / 2;

impl Scheme {
    /// Bytes of the levels of one cell.
    pub const fn level_bytes(&self) -> usize {
        match self.bits {
            4 => NIBBLE_BYTES,
            5 => NIBBLE_BYTES + CELL_OUTPUTS * QK / 8,
            _ => CELL_OUTPUTS * QK,
        }
    }

    /// Level `e` of output `i` in a cell's levels (Q8_0's as `i8` bits). Q8_0's are kept
    /// offset by 128 in the cell (unsigned bytes, `vpdpbusd`'s unsigned operand).
    pub fn level(&self, levels: &[u8], i: usize, e: usize) -> u8 {
        let (g, t) = (e / 4, e % 4);
        if self.bits == 8 {
            return levels[32 * g + 4 * i + t] ^ SIGNED_BIAS;
        }
        let low = (levels[32 * (g % 4) + 4 * i + t] >> (4 * (g / 4))) & 0xF;
        if self.bits == 5 {
            low | (((levels[NIBBLE_BYTES + 4 * i + t] >> g) & 1) << 4)
        } else {
            low
        }
    }

    /// Sets level `e` of output `i` in a cell's levels, which start zeroed.
    fn set_level(&self, levels: &mut [u8], i: usize, e: usize, level: u8) {
        let (g, t) = (e / 4, e % 4);
        if self.bits == 8 {
            levels[32 * g + 4 * i + t] = level ^ SIGNED_BIAS;
            return;
        }
        levels[32 * (g % 4) + 4 * i + t] |= (level & 0xF) << (4 * (g / 4));
        if self.bits == 5 {
            levels[NIBBLE_BYTES + 4 * i + t] |= ((level >> 4) & 1) << g;
        }
    }

    /// Bytes of one cell: levels, scales, minimums.
    pub const fn cell_bytes(&self) -> usize {
        let floats = if matches!(self.offset, Offset::Min) {
            2
        } else {
            1
        };
        self.level_bytes() + floats * CELL_OUTPUTS * 4
    }
}

/// One block, decoded: 32 levels (Q8_0's as `i8` bits) and its scale and minimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LBlock {
    pub d: f32,
    pub m: f32,
    pub levels: [u8; QK],
}

impl LBlock {
    pub const ZERO: LBlock = LBlock {
        d: 0.0,
        m: 0.0,
        levels: [0; QK],
    };

    /// The 32 weights, computed as ggml does (a multiply, then an add for `m`).
    pub fn dequantize(&self, scheme: &Scheme, out: &mut [f32]) {
        for (o, &l) in out.iter_mut().zip(&self.levels) {
            *o = match scheme.offset {
                Offset::Centre(c) => (i32::from(l) - c) as f32 * self.d,
                Offset::Min => f32::from(l) * self.d + self.m,
                Offset::Signed => f32::from(l as i8) * self.d,
            };
        }
    }
}

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

/// Writes up to 8 outputs' blocks into one cell.
fn write_cell(scheme: &Scheme, blocks: &[LBlock], cell: &mut [u8]) {
    let (levels, floats) = cell.split_at_mut(scheme.level_bytes());
    for (i, block) in blocks.iter().enumerate() {
        for (e, &level) in block.levels.iter().enumerate() {
            scheme.set_level(levels, i, e, level);
        }
        floats[4 * i..][..4].copy_from_slice(&block.d.to_le_bytes());
        if matches!(scheme.offset, Offset::Min) {
            floats[32 + 4 * i..][..4].copy_from_slice(&block.m.to_le_bytes());
        }
    }
}

/// Output `i`'s block from a cell.
fn read_cell(scheme: &Scheme, cell: &[u8], i: usize) -> LBlock {
    let (levels, floats) = cell.split_at(scheme.level_bytes());
    let mut block = LBlock::ZERO;
    for (e, level) in block.levels.iter_mut().enumerate() {
        *level = scheme.level(levels, i, e);
    }
    let float = |at: usize| f32::from_le_bytes(floats[at..at + 4].try_into().expect("4 bytes"));
    block.d = float(4 * i);
    if matches!(scheme.offset, Offset::Min) {
        block.m = float(32 + 4 * i);
    }
    block
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
        isa.integer_tile_rows()
    }

    fn expanded_bytes(&self, isa: Isa, k: usize) -> usize {
        legacy_tile::expanded_bytes(&Q::SCHEME, isa, k / QK)
    }

    fn expand_panel(&self, isa: Isa, panel: &[u8], k: usize, out: &mut [u8]) {
        legacy_tile::expand(&Q::SCHEME, isa, panel, k / QK, out)
    }

    fn tile(
        &self,
        isa: Isa,
        panel: &[u8],
        k: usize,
        x: &Activations<'_>,
        r0: usize,
        rows: usize,
        place: TilePlace,
        form: PanelForm,
        tile: &mut Tile,
    ) {
        let Activations::Q8_0(x) = x else {
            panic!("{} multiplies Q8_0 activations", Q::TYPE);
        };
        legacy_tile::tile(
            &Q::SCHEME,
            isa,
            panel,
            k / QK,
            x,
            r0,
            rows,
            place,
            form,
            tile,
        )
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
