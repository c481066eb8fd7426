//! The K-quant panel layout (see `mod.rs` for the weights' form) and the shared form of one
//! super-block read from or written into it. Every K-quant kernel reads this; it reads none of
//! them.
//!
//! Panel layout: for each super-block `b` of the row length, two *cells* (outputs 0..8 and
//! 8..16 of the panel). A cell holds, for its 8 outputs `j`:
//! - `d[j]` as f32 (and `dmin[j]` for types with minimums);
//! - `scale[s][j]` as i8 for every sub-block `s` (and `min[s][j]` as u8);
//! - the levels of 8 *units* of 32 weights. A unit is 8 *quads* of 4 consecutive weights;
//!   quad `t` of a unit is, for the kernel, one 32-byte vector `[j][4]` of levels. The levels
//!   are stored as bit planes: a nibble plane (4 × 32 bytes: byte `i` of block `p` holds quad
//!   `2p` in its low and quad `2p + 1` in its high nibble), a 2-bit plane (2 × 32 bytes: bits
//!   `2s..2s+2` of byte `i` of block `p` are quad `4p + s`) and a 1-bit plane (32 bytes: bit `t`
//!   of byte `i` is quad `t`). A type uses the planes its level width needs (4 = nibble,
//!   6 = nibble + 2-bit, 5 = nibble + 1-bit, 3 = 2-bit + 1-bit, 2 = 2-bit); a level is
//!   `nibble | 2-bit << 4 | 1-bit << (4 or 6 or 2)` in that order.

use super::super::act_q8k::QK_K;
use super::super::PANEL;

/// Outputs per cell (half a panel).
pub(crate) const CELL_OUTPUTS: usize = PANEL / 2;
/// Weights per unit.
const UNIT: usize = 32;

/// What a K-quant type subtracts from `scale · level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offset {
    /// `dmin · min` with an unsigned min per sub-block (Q2_K, Q4_K, Q5_K).
    Min,
    /// `scale · 2^shift`: levels are centred on `2^shift` (Q3_K: 4, Q6_K: 32).
    Centre(u32),
}

/// The shape of a K-quant type's weights.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scheme {
    /// Weights per sub-block (one scale each): 16 or 32.
    pub sub: usize,
    /// Whether levels keep 4 bits in the nibble plane,
    pub nibble: bool,
    /// 2 bits in the 2-bit plane,
    pub pair: bool,
    /// and 1 bit in the 1-bit plane.
    pub single: bool,
    /// What is subtracted from `scale · level`.
    pub offset: Offset,
}

impl Scheme {
    /// Sub-blocks per super-block.
    pub const fn subs(&self) -> usize {
        QK_K / self.sub
    }

    pub const fn has_min(&self) -> bool {
        matches!(self.offset, Offset::Min)
    }

    /// Bits of a level below the 2-bit plane's, and below the 1-bit plane's.
    pub const fn pair_shift(&self) -> u32 {
        if self.nibble {
            4
        } else {
            0
        }
    }

    pub const fn single_shift(&self) -> u32 {
        self.pair_shift() + if self.pair { 2 } else { 0 }
    }

    /// The largest level.
    pub const fn level_max(&self) -> i32 {
        (1 << (4 * self.nibble as u32 + 2 * self.pair as u32 + self.single as u32)) - 1
    }

    /// How many quads' `maddubs` pair sums (each at most `2 · level_max · 127`) can be added
    /// in 16 bits without overflow before they are widened: up to the 4 quads of a group of 16.
    pub const fn chain(&self) -> usize {
        let fits = (i16::MAX as i32 / (2 * 127 * self.level_max())) as usize;
        if fits < 4 {
            fits
        } else {
            4
        }
    }

    pub const fn unit_bytes(&self) -> usize {
        128 * self.nibble as usize + 64 * self.pair as usize + 32 * self.single as usize
    }

    pub const fn dmin_offset(&self) -> usize {
        4 * CELL_OUTPUTS
    }

    pub const fn scales_offset(&self) -> usize {
        4 * CELL_OUTPUTS * (1 + self.has_min() as usize)
    }

    pub const fn mins_offset(&self) -> usize {
        self.scales_offset() + CELL_OUTPUTS * self.subs()
    }

    pub const fn units_offset(&self) -> usize {
        self.mins_offset() + CELL_OUTPUTS * self.subs() * self.has_min() as usize
    }

    pub const fn cell_bytes(&self) -> usize {
        self.units_offset() + QK_K / UNIT * self.unit_bytes()
    }
}

/// One super-block of one row in the shared form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KBlock {
    pub d: f32,
    /// Zero for centred types.
    pub dmin: f32,
    /// `scales[s]` for the first `subs()` sub-blocks.
    pub scales: [i8; 16],
    /// `mins[s]` (types with minimums).
    pub mins: [u8; 16],
    /// Unsigned levels.
    pub levels: [u8; QK_K],
}

impl KBlock {
    pub const ZERO: KBlock = KBlock {
        d: 0.0,
        dmin: 0.0,
        scales: [0; 16],
        mins: [0; 16],
        levels: [0; QK_K],
    };

    /// The 256 weights, computed as ggml's reference dequantizers compute them (the same f32
    /// operations in the same order, so the bits match).
    pub fn dequantize(&self, scheme: &Scheme, out: &mut [f32]) {
        for (s, (chunk, levels)) in out
            .chunks_exact_mut(scheme.sub)
            .zip(self.levels.chunks_exact(scheme.sub))
            .enumerate()
        {
            let scale = self.d * f32::from(self.scales[s]);
            match scheme.offset {
                Offset::Min => {
                    let min = self.dmin * f32::from(self.mins[s]);
                    for (o, &l) in chunk.iter_mut().zip(levels) {
                        *o = scale * f32::from(l) - min;
                    }
                }
                Offset::Centre(shift) => {
                    let centre = 1i32 << shift;
                    for (o, &l) in chunk.iter_mut().zip(levels) {
                        *o = scale * (i32::from(l) - centre) as f32;
                    }
                }
            }
        }
    }
}

/// Writes the 8 rows `blocks` of one super-block into `cell`.
pub(crate) fn write_cell(scheme: &Scheme, blocks: &[KBlock], cell: &mut [u8]) {
    for (j, block) in blocks.iter().enumerate() {
        cell[4 * j..][..4].copy_from_slice(&block.d.to_le_bytes());
        if scheme.has_min() {
            cell[scheme.dmin_offset() + 4 * j..][..4].copy_from_slice(&block.dmin.to_le_bytes());
        }
        for s in 0..scheme.subs() {
            cell[scheme.scales_offset() + s * CELL_OUTPUTS + j] = block.scales[s] as u8;
            if scheme.has_min() {
                cell[scheme.mins_offset() + s * CELL_OUTPUTS + j] = block.mins[s];
            }
        }
        for (kk, &level) in block.levels.iter().enumerate() {
            let (byte, bit, _) = level_position(kk, j);
            let unit = &mut cell[scheme.units_offset() + kk / UNIT * scheme.unit_bytes()..];
            let mut plane = 0;
            if scheme.nibble {
                unit[32 * (bit / 2) + byte] |= (level & 0xF) << (4 * (bit % 2));
                plane += 128;
            }
            if scheme.pair {
                let two = (level >> scheme.pair_shift()) & 3;
                unit[plane + 32 * (bit / 4) + byte] |= two << (2 * (bit % 4));
                plane += 64;
            }
            if scheme.single {
                unit[plane + byte] |= ((level >> scheme.single_shift()) & 1) << bit;
            }
        }
    }
}

/// Where weight `kk` of output `j` lies in its unit: `(byte of a 32-byte vector, quad)`, and
/// the unit's index.
#[inline]
fn level_position(kk: usize, j: usize) -> (usize, usize, usize) {
    let within = kk % UNIT;
    (4 * j + within % 4, within / 4, kk / UNIT)
}

/// Reads row `j` (`< 8`) of one cell back into the shared form.
pub(crate) fn read_cell_row(scheme: &Scheme, cell: &[u8], j: usize) -> KBlock {
    let f32_at = |offset: usize| f32::from_le_bytes(cell[offset..][..4].try_into().unwrap());
    let mut block = KBlock::ZERO;
    block.d = f32_at(4 * j);
    if scheme.has_min() {
        block.dmin = f32_at(scheme.dmin_offset() + 4 * j);
    }
    for s in 0..scheme.subs() {
        block.scales[s] = cell[scheme.scales_offset() + s * CELL_OUTPUTS + j] as i8;
        if scheme.has_min() {
            block.mins[s] = cell[scheme.mins_offset() + s * CELL_OUTPUTS + j];
        }
    }
    for (kk, level) in block.levels.iter_mut().enumerate() {
        let (byte, bit, unit) = level_position(kk, j);
        let unit = &cell[scheme.units_offset() + unit * scheme.unit_bytes()..];
        let mut plane = 0;
        if scheme.nibble {
            *level |= (unit[32 * (bit / 2) + byte] >> (4 * (bit % 2))) & 0xF;
            plane += 128;
        }
        if scheme.pair {
            let two = (unit[plane + 32 * (bit / 4) + byte] >> (2 * (bit % 4))) & 3;
            *level |= two << scheme.pair_shift();
            plane += 64;
        }
        if scheme.single {
            *level |= ((unit[plane + byte] >> bit) & 1) << scheme.single_shift();
        }
    }
    block
}
