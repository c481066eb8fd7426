//! f32 weights: panels `[k, 16]` of 32-bit floats, multiplied with f32 activations.

use super::super::{
    ActivationKind, Activations, Isa, PanelForm, PanelView, RowSpan, Tile, TilePlace, WeightFormat,
};
use sluice_gguf::GgmlType;

/// The f32 format.
#[derive(Debug)]
pub struct F32;

impl WeightFormat for F32 {
    fn ggml_type(&self) -> GgmlType {
        GgmlType::F32
    }

    fn activation(&self) -> ActivationKind {
        ActivationKind::F32
    }

    fn encode_row(&self, src: &[f32], dst: &mut [u8]) {
        for (d, v) in dst.chunks_exact_mut(4).zip(src) {
            d.copy_from_slice(&v.to_le_bytes());
        }
    }

    fn decode_row(&self, src: &[u8], dst: &mut [f32]) {
        for (d, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
            *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }

    fn pack_panel(&self, rows: &[&[u8]], k: usize, panel: &mut [u8]) {
        super::pack_panel::<f32>(rows, k, panel)
    }

    fn unpack_row(&self, panel: &[u8], _k: usize, j: usize, out: &mut [f32]) {
        super::unpack_row::<f32>(panel, j, out)
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
        assert_eq!(
            panel.form,
            PanelForm::Packed,
            "{self:?} panels do not expand"
        );
        let Activations::F32 { x, .. } = x else {
            panic!("f32 weights multiply f32 activations");
        };
        super::tile::<f32>(isa, panel, x, rows, place.first, tile)
    }
}
