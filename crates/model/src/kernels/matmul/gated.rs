//! A gated MLP's gate and up projections packed as one matrix, panels alternating, multiplied
//! with the SiLU applied as each pair of tiles finishes.

use std::mem::MaybeUninit;

use super::super::formats::WeightFormat;
use super::super::isa::Isa;
use super::super::tile::{TilePlace, PANEL};
use super::super::vector::{best_ops, VectorOps};
use super::driver::{row_tiles, OutPtr};
use super::expand::with_scratch;
use super::{PackedMatrix, WeightDtype};

/// A gated MLP's gate and up projections (`[out_dim, in_dim]` each) packed together for
/// [`GatedMatrix::matmul_silu`]: panels alternate between the two (panel `2p` holds gate
/// features `16p..16p + 16`, panel `2p + 1` the same up features), so a task reads one
/// contiguous stream of weights for both halves of its outputs.
#[derive(Debug, Clone)]
pub struct GatedMatrix {
    packed: PackedMatrix,
}

impl GatedMatrix {
    /// Whether projections of `out_dim` features can be packed this way (whole panels).
    pub fn fits(out_dim: usize) -> bool {
        out_dim.is_multiple_of(PANEL)
    }

    /// Packs row-major `gate` and `up` (`[out_dim, in_dim]` each). Needs
    /// [`GatedMatrix::fits`].
    pub fn pack(
        gate: &[f32],
        up: &[f32],
        out_dim: usize,
        in_dim: usize,
        dtype: WeightDtype,
    ) -> Self {
        assert!(Self::fits(out_dim), "gate/up features must be whole panels");
        assert_eq!(
            gate.len(),
            out_dim * in_dim,
            "gate length does not match its shape"
        );
        assert_eq!(
            up.len(),
            out_dim * in_dim,
            "up length does not match its shape"
        );
        let panel = PANEL * in_dim;
        let mut interleaved = Vec::with_capacity(2 * out_dim * in_dim);
        for (g, u) in gate.chunks_exact(panel).zip(up.chunks_exact(panel)) {
            interleaved.extend_from_slice(g);
            interleaved.extend_from_slice(u);
        }
        Self {
            packed: PackedMatrix::pack(&interleaved, 2 * out_dim, in_dim, dtype),
        }
    }

    /// Packs `gate` and `up` rows already stored in `format`'s row encoding (`[out_dim]` rows
    /// of `row_bytes(in_dim)` bytes each). Needs [`GatedMatrix::fits`].
    pub fn pack_encoded(
        gate: &[u8],
        up: &[u8],
        out_dim: usize,
        in_dim: usize,
        format: &'static dyn WeightFormat,
    ) -> Self {
        assert!(Self::fits(out_dim), "gate/up features must be whole panels");
        let panel = PANEL * format.row_bytes(in_dim);
        assert_eq!(gate.len(), up.len(), "gate and up differ in size");
        let mut interleaved = Vec::with_capacity(2 * gate.len());
        for (g, u) in gate.chunks_exact(panel).zip(up.chunks_exact(panel)) {
            interleaved.extend_from_slice(g);
            interleaved.extend_from_slice(u);
        }
        Self {
            packed: PackedMatrix::pack_encoded(&interleaved, 2 * out_dim, in_dim, format),
        }
    }

    /// Output features of each projection (the activation's width).
    pub fn out_dim(&self) -> usize {
        self.packed.out_dim() / 2
    }

    /// Bytes held by the packed weights.
    pub fn bytes(&self) -> usize {
        self.packed.bytes()
    }

    /// `y[m, out_dim] = silu(x · W_gateᵀ) * (x · W_upᵀ)` for `x: [m, in_dim]`: each task
    /// computes a gate panel and its up panel and writes only their activation, so the
    /// `[m, 2 * out_dim]` product never goes through memory. Bit-identical to the stacked
    /// product followed by `silu_mul` over its two halves.
    pub fn matmul_silu(&self, x: &[f32], m: usize, y: &mut [MaybeUninit<f32>]) {
        let (packed, n) = (&self.packed, self.out_dim());
        assert_eq!(y.len(), m * n, "y is not [m, out_dim]");
        let out = OutPtr(y.as_mut_ptr() as *mut f32);
        let isa = Isa::current();
        let ops = best_ops(PANEL);
        let acts = packed.prepare(x, m);
        packed.for_each_panel(m, n / PANEL, |p, rows, [gate, up]| {
            let expands = packed.expands(isa, rows.len());
            with_scratch(expands, |gate_scratch| {
                with_scratch(expands, |up_scratch| {
                    let gate_panel = packed.panel_for(isa, 2 * p, rows.len(), gate_scratch);
                    let up_panel = packed.panel_for(isa, 2 * p + 1, rows.len(), up_scratch);
                    for (span, place) in row_tiles(rows, packed.format.tile_rows(isa)) {
                        // The gate panel's next is the up panel, read now: only the up tile
                        // warms. A tile alone on its panel stays so (kernels prefetch
                        // differently there).
                        let gate_place = match place {
                            TilePlace::ALONE => place,
                            _ => TilePlace {
                                last: false,
                                ..place
                            },
                        };
                        let format = packed.format;
                        format.tile(isa, gate_panel, &acts, span, gate_place, gate);
                        format.tile(isa, up_panel, &acts, span, place, up);
                        for r in 0..span.len {
                            // SAFETY: tasks cover disjoint (row, panel) rectangles of y, and
                            // `(first + r) * n + p * PANEL + PANEL <= m * n` by the loop bounds.
                            let dst = unsafe {
                                let at = out.at((span.first + r) * n + p * PANEL);
                                std::slice::from_raw_parts_mut(at, PANEL)
                            };
                            ops.silu_mul(&gate[r], &up[r], dst);
                        }
                    }
                })
            })
        });
    }
}
