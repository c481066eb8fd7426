//! bf16 weights multiplied in bf16: panels of pairs `[ceil(k / 2), 16]`, the pair of a row's
//! weights `(2c, 2c + 1)` in one `u32` (the even one in the low half), times activations rounded
//! to bf16 pairs ([`super::act_bf16`]), as llama.cpp multiplies its bf16 tensors.
//!
//! Every output is summed from +0 over its pairs in order, `acc += x[2c+1]·w[2c+1]`, then
//! `acc += x[2c]·w[2c]`, each a fused f32 multiply-add (the product of two bf16 values is exact)
//! with denormal inputs read as zero and a denormal result flushed to zero: one lane of
//! `vdpbf16ps` as Intel defines it. `avx512.rs` runs that instruction on CPUs with AVX-512 BF16
//! (twice the multiply-adds of an f32 FMA); `portable.rs` is its bit-exact reference, and the
//! kernel of CPUs without it (scalar: slow, which is why nothing picks bf16 for them unasked).
//!
//! The arithmetic is coarser than f32's (activations keep 8 significant bits), so `--dtype auto`
//! does not keep bf16 checkpoints in this format ([`WeightFormat::kept_as_stored`]): it widens
//! them to f32 as before; `--dtype bf16` and `--vision-dtype bf16` ask for it.

#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;

use half::bf16;
use sluice_gguf::GgmlType;

use super::act_bf16::round;
use super::{
    ActivationKind, Activations, Isa, PanelForm, PanelView, RowSpan, Tile, TilePlace, WeightFormat,
    PANEL, TILE_ROWS,
};

/// The bf16 format.
#[derive(Debug)]
pub struct Bf16;

/// Index in a panel's `u16`s of weight `kk` of row `j`.
fn at(j: usize, kk: usize) -> usize {
    (kk / 2) * 2 * PANEL + 2 * j + kk % 2
}

impl WeightFormat for Bf16 {
    fn ggml_type(&self) -> GgmlType {
        GgmlType::BF16
    }

    fn kept_as_stored(&self) -> bool {
        false
    }

    fn panel_bytes(&self, k: usize) -> usize {
        PANEL * 2 * k.next_multiple_of(2)
    }

    fn activation(&self) -> ActivationKind {
        ActivationKind::Bf16
    }

    fn encode_row(&self, src: &[f32], dst: &mut [u8]) {
        for (d, v) in dst.chunks_exact_mut(2).zip(src) {
            d.copy_from_slice(&round(*v).to_le_bytes());
        }
    }

    fn decode_row(&self, src: &[u8], dst: &mut [f32]) {
        for (d, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
            *d = bf16::from_le_bytes([b[0], b[1]]).to_f32();
        }
    }

    fn pack_panel(&self, rows: &[&[u8]], k: usize, panel: &mut [u8]) {
        let panel: &mut [u16] = bytemuck::cast_slice_mut(panel);
        for (j, row) in rows.iter().enumerate() {
            for (kk, b) in row[..2 * k].chunks_exact(2).enumerate() {
                panel[at(j, kk)] = u16::from_le_bytes([b[0], b[1]]);
            }
        }
    }

    fn unpack_row(&self, panel: &[u8], k: usize, j: usize, out: &mut [f32]) {
        let panel: &[u16] = bytemuck::cast_slice(panel);
        for (kk, o) in out[..k].iter_mut().enumerate() {
            *o = bf16::from_bits(panel[at(j, kk)]).to_f32();
        }
    }

    fn tile_rows(&self, _isa: Isa) -> usize {
        TILE_ROWS
    }

    fn tile(
        &self,
        isa: Isa,
        panel: PanelView<'_>,
        x: &Activations<'_>,
        rows: RowSpan,
        _place: TilePlace,
        tile: &mut Tile,
    ) {
        assert_eq!(
            panel.form,
            PanelForm::Packed,
            "{self:?} panels do not expand"
        );
        let Activations::Bf16(x) = x else {
            panic!("bf16 weights multiply bf16 activations");
        };
        let pairs = panel.k.div_ceil(2);
        assert_eq!(x.pairs_per_row(), pairs, "activations of another length");
        let panel: &[u32] = bytemuck::cast_slice(&panel.bytes[..pairs * PANEL * 4]);
        #[cfg(target_arch = "x86_64")]
        if isa.has_avx512_bf16() {
            // SAFETY: the CPU has AVX-512 F and BF16; the panel holds `pairs` vectors and each
            // row of the span `pairs` values.
            unsafe { avx512::tile(x, rows, panel, tile) };
            return;
        }
        let _ = isa;
        portable::tile(x, rows, panel, tile)
    }
}
