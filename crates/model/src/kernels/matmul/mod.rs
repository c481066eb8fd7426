//! Batch-invariant matrix multiplication `y[m, n] = x[m, k] · W[n, k]ᵀ` against packed weights.
//!
//! Weights are packed once at load into column panels of [`PANEL`] output features: panel `p`
//! holds `W[p*16 + j, kk]` at `kk*16 + j`, so one `k` step reads 16 contiguous values. The
//! micro-kernel keeps a tile of up to [`TILE_ROWS`] × 16 outputs in registers and walks the
//! whole `k` dimension once, one fused multiply-add per step, starting from zero.
//!
//! Why this shape: every output element is `fma(x[k-1], w[k-1], … fma(x[0], w[0], 0))` in the
//! same order no matter how many rows the batch has, which tile a row falls in, or how work is
//! split across threads. That is what makes a sequence's logits bit-identical alone or batched.
//! (Library GEMMs pick block sizes and special paths from `m`, which changes the summation order.)
//! The same kernel serves decode (m = 1..64, memory bound: every panel streams once per call) and
//! prefill (large m: each panel is reused from cache by every row tile of a row block).
//!
//! Files: this one holds the packed matrix and its products' entry points; `driver.rs` the
//! schedule (row blocks, panel groups as rayon tasks, row tiles, stores into `y`); `expand.rs`
//! the expanded panels and their per-thread buffers; `gated.rs` the gate/up pair with its fused
//! SiLU.

mod driver;
mod expand;
mod gated;

use std::mem::MaybeUninit;

use rayon::prelude::*;
use sluice_gguf::GgmlType;

use super::formats::{format_for, AlignedBytes, WeightFormat};
use driver::{add_tile_row, write_tile_row};

pub use super::tile::{DEFAULT_TILE_ROWS, PANEL, TILE_ROWS};
pub use gated::GatedMatrix;

/// How packed weights are stored: a ggml type that has a [`WeightFormat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeightDtype(GgmlType);

impl WeightDtype {
    /// 32-bit floats.
    pub const F32: WeightDtype = WeightDtype(GgmlType::F32);
    /// IEEE half floats, widened to f32 inside the kernel.
    pub const F16: WeightDtype = WeightDtype(GgmlType::F16);
    /// bfloat16, multiplied in bf16 (activations rounded to bf16; `vdpbf16ps` where the CPU
    /// has AVX-512 BF16).
    pub const BF16: WeightDtype = WeightDtype(GgmlType::BF16);

    /// The dtype storing weights as `ty`, if sluice has a format for it.
    pub fn of(ty: GgmlType) -> Option<Self> {
        format_for(ty).map(|_| Self(ty))
    }

    /// The dtype named `name` as llama.cpp spells types (`q4_K`, `q8_0`, `f16`; any case).
    pub fn from_name(name: &str) -> Option<Self> {
        (0..64)
            .map(GgmlType::from_tag)
            .find(|t| t.name().eq_ignore_ascii_case(name))
            .and_then(Self::of)
    }

    /// The names of every quantized dtype, lower case.
    pub fn quantized_names() -> Vec<String> {
        (0..64)
            .map(GgmlType::from_tag)
            .filter(|&t| ![GgmlType::F32, GgmlType::F16, GgmlType::BF16].contains(&t))
            .filter_map(Self::of)
            .map(|d| d.0.name().to_lowercase())
            .collect()
    }

    /// The ggml type.
    pub fn ggml_type(self) -> GgmlType {
        self.0
    }

    /// The format that stores and multiplies weights of this dtype.
    pub fn format(self) -> &'static dyn WeightFormat {
        format_for(self.0).expect("a WeightDtype always has a format")
    }
}

/// A weight matrix `W[out_dim, in_dim]` packed into panels of [`PANEL`] output features for
/// [`PackedMatrix::matmul`], in its format's panel layout.
#[derive(Debug, Clone)]
pub struct PackedMatrix {
    out_dim: usize,
    in_dim: usize,
    format: &'static dyn WeightFormat,
    /// `ceil(out_dim / 16)` panels of `format.panel_bytes(in_dim)` bytes; features past
    /// `out_dim` are zero.
    data: AlignedBytes,
}

impl PackedMatrix {
    /// Packs a row-major `w[out_dim, in_dim]` (the Hugging Face `Linear.weight` layout),
    /// encoding it as `dtype`.
    pub fn pack(w: &[f32], out_dim: usize, in_dim: usize, dtype: WeightDtype) -> Self {
        assert_eq!(
            w.len(),
            out_dim * in_dim,
            "weight length does not match its shape"
        );
        let format = dtype.format();
        let row_bytes = format.row_bytes(in_dim);
        let mut encoded = vec![0u8; out_dim * row_bytes];
        encoded
            .par_chunks_mut(row_bytes.max(1))
            .zip(w.par_chunks(in_dim.max(1)))
            .for_each(|(dst, src)| format.encode_row(src, dst));
        Self::pack_encoded(&encoded, out_dim, in_dim, format)
    }

    /// Packs `out_dim` rows already stored in `format`'s row encoding (`row_bytes(in_dim)`
    /// bytes each, back to back), as a GGUF file holds them.
    pub fn pack_encoded(
        rows: &[u8],
        out_dim: usize,
        in_dim: usize,
        format: &'static dyn WeightFormat,
    ) -> Self {
        let row_bytes = format.row_bytes(in_dim);
        assert_eq!(
            rows.len(),
            out_dim * row_bytes,
            "encoded rows do not match their shape"
        );
        let panel_bytes = format.panel_bytes(in_dim);
        let mut data = AlignedBytes::zeroed(out_dim.div_ceil(PANEL) * panel_bytes);
        data.as_mut_slice()
            .par_chunks_mut(panel_bytes.max(1))
            .enumerate()
            .for_each(|(p, panel)| {
                let first = p * PANEL;
                let panel_rows: Vec<&[u8]> = (first..out_dim.min(first + PANEL))
                    .map(|r| &rows[r * row_bytes..][..row_bytes])
                    .collect();
                format.pack_panel(&panel_rows, in_dim, panel);
            });
        Self {
            out_dim,
            in_dim,
            format,
            data,
        }
    }

    /// Output features (`n`).
    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// Input features (`k`).
    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    /// The format the weights are kept in.
    pub fn format(&self) -> &'static dyn WeightFormat {
        self.format
    }

    /// Bytes held by the packed weights.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Bytes `pack` would hold for `[out_dim, in_dim]` in `format`, without packing.
    pub fn packed_bytes(out_dim: usize, in_dim: usize, format: &dyn WeightFormat) -> usize {
        out_dim.div_ceil(PANEL) * format.panel_bytes(in_dim)
    }

    #[inline]
    fn panel(&self, p: usize) -> &[u8] {
        let panel_bytes = self.format.panel_bytes(self.in_dim);
        &self.data.as_slice()[p * panel_bytes..][..panel_bytes]
    }

    /// Copies row `r` of `W` (one output feature's weights, `[in_dim]`) into `out` as f32.
    /// Used to look up token embeddings when the embedding is tied to the output head.
    pub fn row_into(&self, r: usize, out: &mut [f32]) {
        self.format
            .unpack_row(self.panel(r / PANEL), self.in_dim, r % PANEL, out);
    }

    /// `y[m, out_dim] = x[m, in_dim] · Wᵀ`, multi-threaded on the global rayon pool.
    pub fn matmul(&self, x: &[f32], m: usize, y: &mut [f32]) {
        // SAFETY: `MaybeUninit<f32>` has f32's layout, and `matmul_uninit` only writes.
        let y = unsafe { &mut *(y as *mut [f32] as *mut [MaybeUninit<f32>]) };
        self.matmul_uninit(x, m, y);
    }

    /// [`PackedMatrix::matmul`] into memory that need not be initialised: every element of
    /// `y` is written (the tiles cover all `m` rows and all `out_dim` columns).
    pub fn matmul_uninit(&self, x: &[f32], m: usize, y: &mut [MaybeUninit<f32>]) {
        assert_eq!(y.len(), m * self.out_dim, "y is not [m, out_dim]");
        // SAFETY: `y` holds `m * out_dim` values, and `write_tile_row` only writes them.
        unsafe {
            self.matmul_rows(x, m, y.as_mut_ptr() as *mut f32, |dst, row, cols| {
                write_tile_row(dst, row, cols)
            })
        }
    }

    /// `y[m, out_dim] += x[m, in_dim] · Wᵀ`: the product added into `y` (a residual stream)
    /// as each tile finishes, with the bits of computing the product and then adding.
    pub fn matmul_add(&self, x: &[f32], m: usize, y: &mut [f32]) {
        assert_eq!(y.len(), m * self.out_dim, "y is not [m, out_dim]");
        // SAFETY: `y` holds `m * out_dim` initialised values, so `add_tile_row` may read them.
        unsafe {
            self.matmul_rows(x, m, y.as_mut_ptr(), |dst, row, cols| {
                add_tile_row(dst, row, cols)
            })
        }
    }
}

#[cfg(test)]
mod tests;
