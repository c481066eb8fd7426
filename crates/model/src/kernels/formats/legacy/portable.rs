//! The 32-weight block types' portable kernel, the bit-exact reference of the vector ones: for
//! each block, output `j` and activation row `r`, the exact integer `A = Σ level·q` (less `c·Σq`
//! for a centred type), then `acc = fma(d_w·d_x, A, acc)` and, for the `_1` types,
//! `acc = fma(m_w·d_x, Σq, acc)`, block by block. Integer sums are exact in any order, so the
//! AVX2 kernel (`avx2.rs`), the AVX-512 VNNI one (`avx512.rs`: 16 outputs a 512-bit vector,
//! `vpdpbusd` on the stored unsigned bytes) and this one give the same bits, and a row's result
//! never depends on the tile it is in.

use super::super::act_q8_0::{BlockQ8, QK};
use super::layout::{Offset, Scheme, CELL_OUTPUTS};

/// Level `e` of output `i` as the integer the kernel multiplies.
fn level(scheme: &Scheme, levels: &[u8], i: usize, e: usize) -> i32 {
    let level = scheme.level(levels, i, e);
    if matches!(scheme.offset, Offset::Signed) {
        i32::from(level as i8)
    } else {
        i32::from(level)
    }
}

fn float_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Scalar kernel: the same integers and the same f32 operations in the same order.
pub(super) fn half_row(
    scheme: &Scheme,
    panel: &[u8],
    half: usize,
    xs: &[BlockQ8],
    out: &mut [f32; CELL_OUTPUTS],
) {
    let cell_bytes = scheme.cell_bytes();
    let mut acc = [0f32; CELL_OUTPUTS];
    for (b, x) in xs.iter().enumerate() {
        let cell = &panel[(2 * b + half) * cell_bytes..][..cell_bytes];
        let (levels, floats) = cell.split_at(scheme.level_bytes());
        for (i, a) in acc.iter_mut().enumerate() {
            let mut dot: i32 = (0..QK)
                .map(|e| level(scheme, levels, i, e) * i32::from(x.qs[e]))
                .sum();
            if let Offset::Centre(c) = scheme.offset {
                dot -= c * x.sum;
            }
            let scale = float_at(floats, 4 * i) * x.d;
            *a = scale.mul_add(dot as f32, *a);
            if scheme.offset == Offset::Min {
                let min = float_at(floats, 32 + 4 * i) * x.d;
                *a = min.mul_add(x.sum as f32, *a);
            }
        }
    }
    *out = acc;
}
