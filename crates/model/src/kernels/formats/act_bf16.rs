//! Bf16 activations for the bf16 weight format: each row rounded to bf16 once per product and
//! stored as pairs, `(x[2i], x[2i + 1])` in one `u32` with the even element in the low half (the
//! operand `vdpbf16ps` broadcasts), a row of odd length padded with a zero.
//!
//! Rounding is to nearest even with a denormal becoming a zero of its sign and NaN quieted, as
//! `vcvtneps2bf16` does: the vector instruction where the CPU has it, [`round`] elsewhere and for
//! a row's last values, the same bits either way.

use rayon::prelude::*;

use super::Isa;

/// `x` rounded to bf16 (the bits): to nearest even, a denormal to a zero of its sign, NaN
/// quieted.
pub fn round(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x40;
    }
    if x.is_subnormal() {
        return ((bits >> 16) as u16) & 0x8000;
    }
    if x.is_infinite() {
        return (bits >> 16) as u16;
    }
    let bias = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(bias) >> 16) as u16
}

/// Rows a group interleaves: a tile of up to this many rows reads pair `c` of all its rows from
/// one 64-byte line.
pub const GROUP: usize = 16;

/// Activation rows `[m, k]` as bf16 pairs, in groups of [`GROUP`] rows interleaved pair by
/// pair: pair `c` of row `r` is at
/// `(r / GROUP) · pairs_per_row · GROUP + c · GROUP + r % GROUP`.
/// (A tile kernel then broadcasts each row's pair from a fixed offset of one moving pointer.)
#[derive(Debug)]
pub struct Bf16Rows {
    pairs: Vec<u32>,
    pairs_per_row: usize,
}

impl Bf16Rows {
    /// Rounds `x: [m, k]` row by row.
    pub fn round(x: &[f32], k: usize) -> Self {
        let pairs_per_row = k.div_ceil(2);
        let m = x.len().checked_div(k).unwrap_or(0);
        let group_len = pairs_per_row * GROUP;
        let mut pairs = vec![0u32; m.div_ceil(GROUP) * group_len];
        let isa = Isa::current();
        if pairs_per_row > 0 {
            pairs
                .par_chunks_mut(group_len)
                .zip(x.par_chunks(GROUP * k))
                .for_each(|(group, rows)| {
                    // Rounded row by row, then written pair by pair (sequential stores).
                    let mut row_pairs = vec![0u32; GROUP * pairs_per_row];
                    for (row, out) in rows.chunks(k).zip(row_pairs.chunks_mut(pairs_per_row)) {
                        round_row(isa, row, out);
                    }
                    for (c, lanes) in group.chunks_exact_mut(GROUP).enumerate() {
                        for (lane, pair) in lanes.iter_mut().enumerate() {
                            *pair = row_pairs[lane * pairs_per_row + c];
                        }
                    }
                });
        }
        Self {
            pairs,
            pairs_per_row,
        }
    }

    /// Pair `c` of row `r`: `x[r, 2c]` in the low half, `x[r, 2c + 1]` (or a padding zero).
    pub fn pair(&self, r: usize, c: usize) -> u32 {
        self.pairs[(r / GROUP) * self.pairs_per_row * GROUP + c * GROUP + r % GROUP]
    }

    /// The pairs of the group holding row `r` (`pairs_per_row · GROUP` values, pair `c` of the
    /// group's lane `l` at `c · GROUP + l`), and `r`'s lane in it.
    pub fn group_of(&self, r: usize) -> (&[u32], usize) {
        let len = self.pairs_per_row * GROUP;
        (&self.pairs[(r / GROUP) * len..][..len], r % GROUP)
    }

    /// Pairs a row.
    pub fn pairs_per_row(&self) -> usize {
        self.pairs_per_row
    }
}

/// One row rounded into its pairs: whole vectors of 16 with the instruction where `isa` has it.
fn round_row(isa: Isa, row: &[f32], out: &mut [u32]) {
    let vectored = round_vectors(isa, row, out);
    for (i, pair) in row[vectored..].chunks(2).enumerate() {
        let low = u32::from(round(pair[0]));
        let high = pair.get(1).map_or(0, |&v| u32::from(round(v)));
        out[vectored / 2 + i] = low | high << 16;
    }
}

/// The first whole vectors of `row` rounded into `out` where `isa` has `vcvtneps2bf16`; how many
/// values that was.
fn round_vectors(isa: Isa, row: &[f32], out: &mut [u32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = crate::kernels::vector::avx512_bf16::Avx512Bf16::for_isa(isa) {
        let whole = row.len() / 16 * 16;
        v.round_pairs(&row[..whole], &mut out[..whole / 2]);
        return whole;
    }
    let _ = (isa, row, out);
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_values;

    #[test]
    fn rows_are_rounded_pairs_whatever_the_kernel() {
        // 37 values: two whole vectors and an odd tail, padded with a zero; 19 rows, two groups.
        let k = 37;
        let mut x = test_values(19 * k, 91);
        x[5] = f32::MIN_POSITIVE / 4.0; // a denormal: a zero of its sign
        x[6] = -f32::MIN_POSITIVE / 4.0;
        x[7] = f32::NAN;
        x[8] = f32::INFINITY;
        let rows = Bf16Rows::round(&x, k);
        assert_eq!(rows.pairs_per_row(), 19);
        for r in 0..19 {
            for c in 0..k {
                let half = (rows.pair(r, c / 2) >> (16 * (c % 2))) as u16;
                assert_eq!(half, round(x[r * k + c]), "row {r}, value {c}");
            }
            assert_eq!(rows.pair(r, 18) >> 16, 0, "the odd row's padding");
            let (group, lane) = rows.group_of(r);
            assert_eq!(group[5 * GROUP + lane], rows.pair(r, 5));
        }
        assert_eq!(round(x[5]), 0);
        assert_eq!(round(x[6]), 0x8000);
        assert_eq!(round(1.0 + 1.0 / 256.0), 0x3f80, "a tie rounds to even");
        assert_eq!(round(1.0 + 3.0 / 256.0), 0x3f82, "a tie rounds to even");
    }
}
