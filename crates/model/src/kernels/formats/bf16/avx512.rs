//! The bf16 tile kernel on AVX-512 BF16: up to 16 rows × 16 outputs, one accumulator vector a
//! row, one `vdpbf16ps` a row and pair of `k` (the row's pair broadcast against the panel's 16
//! pairs). The rows' pairs come interleaved by group ([`Bf16Rows`]), so each step reads them
//! at fixed offsets from one pointer. The instruction's lane is the order `portable.rs`
//! computes, so the same bits.

use std::arch::x86_64::*;

use super::super::act_bf16::{Bf16Rows, GROUP};
use super::super::{RowSpan, Tile, PANEL};

/// `R` rows from lane `lane` of a group (`lane + R <= GROUP`).
#[inline(always)]
unsafe fn tile_rows<const R: usize>(
    group: &[u32],
    lane: usize,
    pairs: usize,
    panel: &[u32],
    tile: &mut [[f32; PANEL]],
) {
    let mut acc = [_mm512_setzero_ps(); R];
    let (wp, xp) = (panel.as_ptr(), group.as_ptr().add(lane));
    for c in 0..pairs {
        let w = _mm512_loadu_si512(wp.add(c * PANEL) as *const __m512i);
        let w = std::mem::transmute::<__m512i, __m512bh>(w);
        let x = xp.add(c * GROUP);
        for (r, acc) in acc.iter_mut().enumerate() {
            // The broadcast as the last operand, where it can be the instruction's own `{1to16}`
            // memory operand (each product is exact, so the operands' order changes no bit).
            let a = _mm512_set1_epi32(*x.add(r) as i32);
            *acc = _mm512_dpbf16_ps(*acc, w, std::mem::transmute::<__m512i, __m512bh>(a));
        }
    }
    for (row, acc) in tile.iter_mut().zip(acc) {
        _mm512_storeu_ps(row.as_mut_ptr(), acc);
    }
}

/// Safety: the CPU has AVX-512 F and BF16; `panel` holds `x.pairs_per_row() * 16` pairs and `x`
/// the rows of `rows`.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn tile(x: &Bf16Rows, rows: RowSpan, panel: &[u32], tile: &mut Tile) {
    let pairs = x.pairs_per_row();
    debug_assert!(panel.len() >= pairs * PANEL);
    // A tile that crosses a group runs as two: each row's sums are its own.
    let mut done = 0;
    while done < rows.len {
        let (group, lane) = x.group_of(rows.first + done);
        let len = (rows.len - done).min(GROUP - lane);
        let out = &mut tile[done..];
        macro_rules! rows {
            ($($r:literal)*) => {
                match len {
                    $($r => tile_rows::<$r>(group, lane, pairs, panel, out),)*
                    n => unreachable!("a bf16 tile has 1 to 16 rows, not {n}"),
                }
            };
        }
        rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
        done += len;
    }
}
