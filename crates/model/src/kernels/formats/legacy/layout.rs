//! The panel layout of the 32-weight block types (see `mod.rs`): cells of 8 outputs' levels,
//! scales and minimums, and a block decoded from or written into one. Every kernel of the
//! family reads this; it reads none of them.

use super::super::act_q8_0::QK;

/// Outputs per cell.
pub(crate) const CELL_OUTPUTS: usize = 8;

/// How a type's levels turn into weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offset {
    /// `d·(level − c)` with unsigned levels.
    Centre(i32),
    /// `d·level + m`.
    Min,
    /// `d·level` with signed levels (Q8_0).
    Signed,
}

/// A type's level width and offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scheme {
    /// Bits a level: 4, 5 or 8.
    pub bits: u32,
    /// How levels become weights.
    pub offset: Offset,
}

/// Q8_0's signed levels are stored in cells as `level + 128` (this xor): the bytes a VNNI
/// `vpdpbusd` multiplies as unsigned, the dot corrected by `128·Σq` after.
pub(crate) const SIGNED_BIAS: u8 = 0x80;

/// Bytes of a cell's low nibbles (4- and 5-bit levels).
pub(crate) const NIBBLE_BYTES: usize = CELL_OUTPUTS * QK / 2;

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
pub(crate) struct LBlock {
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

/// Writes up to 8 outputs' blocks into one cell.
pub(crate) fn write_cell(scheme: &Scheme, blocks: &[LBlock], cell: &mut [u8]) {
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
pub(crate) fn read_cell(scheme: &Scheme, cell: &[u8], i: usize) -> LBlock {
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
