//! Weight formats: how one matrix's weights are encoded, packed into panels and multiplied.
//!
//! Each format is one file implementing [`WeightFormat`] (f32 and f16 here, each ggml quant type
//! beside them), and [`format_for`] finds it by its ggml type tag. The batched product itself
//! (tiles, threads, fused epilogues) lives once in [`super::matmul`] and asks the format for
//! one tile at a time, so adding a type is a new file here and one line in [`format_for`].
//!
//! Three encodings meet here:
//! - **stored rows**: a row of `k` weights as a checkpoint stores it (GGUF's block layout for the
//!   quant types, little-endian floats otherwise) — what [`WeightFormat::encode_row`] writes and
//!   [`WeightFormat::decode_row`] reads;
//! - **panels**: [`PANEL`] consecutive rows rearranged as the format's kernel wants them
//!   ([`WeightFormat::pack_panel`]);
//! - **activations**: the `x` side of the product, prepared once per product in the form the
//!   format's kernel reads ([`ActivationKind`]).

mod act_bf16;
mod act_q8_0;
mod act_q8k;
mod act_quant;
mod bf16;
mod float;
mod k_quant;
mod legacy;

use sluice_gguf::GgmlType;

pub use super::isa::Isa;
pub(super) use super::tile::Prefetch;
pub use super::tile::{
    PanelForm, PanelView, RowSpan, Tile, TilePlace, DEFAULT_TILE_ROWS, PANEL, TILE_ROWS,
};

/// Rows a tile of the AVX-512 VNNI integer kernels takes (their 32 vector registers hold 8
/// rows' sums).
pub(super) const VECTOR_TILE_ROWS: usize = 8;

/// Rows an AMX integer kernel needs before it is worth expanding panels for it: fewer run as
/// VNNI tiles on packed panels (decode, small batches).
pub(super) const AMX_MIN_ROWS: usize = 32;

impl Isa {
    /// Rows one tile of the integer kernels takes on this ISA: an AMX tile's 16, AVX-512VL's 32
    /// vector registers hold [`VECTOR_TILE_ROWS`] rows' sums, AVX2's 16 hold
    /// [`DEFAULT_TILE_ROWS`], and the portable kernels take any number.
    pub(super) fn integer_tile_rows(self) -> usize {
        match self {
            Isa::Avx2 => DEFAULT_TILE_ROWS,
            Isa::Amx | Isa::Portable => TILE_ROWS,
            Isa::Avx512Vnni => VECTOR_TILE_ROWS,
        }
    }
}

/// The form a format's kernel reads the activations in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationKind {
    /// The f32 rows as they are.
    F32,
    /// Q8_K super-blocks of 256 signed bytes (the K-quant types).
    Q8K,
    /// Q8_0 blocks of 32 signed bytes with their sums (the 32-weight block types).
    Q8_0,
    /// Pairs of bf16 values (the bf16 type).
    Bf16,
}

/// Activations `x[m, k]` prepared once for a product.
#[derive(Debug)]
pub enum Activations<'a> {
    /// Row-major f32, `k` values a row.
    F32 {
        /// `[m, k]`.
        x: &'a [f32],
        /// Values per row.
        k: usize,
    },
    /// Q8_K super-blocks, row by row.
    Q8K(act_q8k::Q8KRows),
    /// Q8_0 blocks, row by row.
    Q8_0(act_q8_0::Q8Rows),
    /// Bf16 pairs, row by row.
    Bf16(act_bf16::Bf16Rows),
}

impl<'a> Activations<'a> {
    /// Prepares `x: [m, k]` as `kind`. Each row is prepared on its own, so a row's encoding
    /// never depends on the other rows of the batch.
    pub fn prepare(kind: ActivationKind, x: &'a [f32], k: usize) -> Self {
        match kind {
            ActivationKind::F32 => Activations::F32 { x, k },
            ActivationKind::Q8K => Activations::Q8K(act_q8k::Q8KRows::quantize(x, k)),
            ActivationKind::Q8_0 => Activations::Q8_0(act_q8_0::Q8Rows::quantize(x, k)),
            ActivationKind::Bf16 => Activations::Bf16(act_bf16::Bf16Rows::round(x, k)),
        }
    }
}

/// A way of storing a weight matrix and multiplying activations by it.
///
/// Contract for batch invariance: [`WeightFormat::tile`] computes each `tile[r][j]` with one
/// fixed sequence of operations that depends only on row `r`'s activations and output `j`'s
/// weights, never on how many rows the tile has or where it starts.
pub trait WeightFormat: Send + Sync + std::fmt::Debug {
    /// The ggml type of the stored rows.
    fn ggml_type(&self) -> GgmlType;

    /// `(weights per block, bytes per block)` of a stored row; rows hold whole blocks.
    fn block(&self) -> (usize, usize) {
        self.ggml_type()
            .block()
            .expect("every format has a known block")
    }

    /// Bytes of one stored row of `k` weights.
    fn row_bytes(&self, k: usize) -> usize {
        let (elems, bytes) = self.block();
        k / elems * bytes
    }

    /// Bytes of one packed panel of [`PANEL`] rows of `k` weights.
    fn panel_bytes(&self, k: usize) -> usize {
        PANEL * self.row_bytes(k)
    }

    /// The activations this format's kernel reads.
    fn activation(&self) -> ActivationKind;

    /// Whether a matrix stored in this type is kept in it when no dtype is asked for: true where
    /// the format multiplies at the stored precision; false where its arithmetic is coarser
    /// than f32's (bf16 rounds the activations too), so such matrices are widened to f32.
    fn kept_as_stored(&self) -> bool {
        true
    }

    /// Writes `src` (`k` weights) as one stored row into `dst` (`row_bytes(k)` bytes).
    fn encode_row(&self, src: &[f32], dst: &mut [u8]);

    /// Reads one stored row `src` into `dst` (`k` weights).
    fn decode_row(&self, src: &[u8], dst: &mut [f32]);

    /// Packs up to [`PANEL`] stored rows of `k` weights into `panel` (`panel_bytes(k)` bytes,
    /// zeroed: missing rows stay zero and produce zero outputs).
    fn pack_panel(&self, rows: &[&[u8]], k: usize, panel: &mut [u8]);

    /// Row `j` of a packed panel as `k` f32 weights (embedding look-ups of a tied head).
    fn unpack_row(&self, panel: &[u8], k: usize, j: usize, out: &mut [f32]);

    /// Most rows one [`WeightFormat::tile`] call takes on `isa` (at most [`TILE_ROWS`]).
    fn tile_rows(&self, _isa: Isa) -> usize {
        DEFAULT_TILE_ROWS
    }

    /// Fewest rows of a row block whose tiles read expanded panels on `isa` (where the format
    /// expands): a panel is expanded once per row block, which enough tiles must repay. Five
    /// tiles by default: at two VNNI tiles (16 rows) expanding measured 15% slower, at four
    /// (32 rows) 6-15% slower for the 32-weight block types (`forward_bench formats`, 2-core
    /// AMD EPYC), and a step of 16 decodes and an 8- or 16-token prompt chunk (24-32 rows, the
    /// steps beside a long prompt) 2-12% faster without it.
    fn expand_min_rows(&self, isa: Isa) -> usize {
        5 * self.tile_rows(isa)
    }

    /// Bytes of one panel of `k` weights expanded for `isa` by
    /// [`WeightFormat::expand_panel`]; 0 (the default) where the kernel reads only packed
    /// panels.
    fn expanded_bytes(&self, _isa: Isa, _k: usize) -> usize {
        0
    }

    /// Writes `panel` into `out` (`expanded_bytes(isa, k)` bytes) in the form its kernel reads
    /// fastest, for a call that runs many row tiles against it: unpacked once, not once a
    /// tile. The same integers, so the same bits. Only called where `expanded_bytes` is not 0.
    fn expand_panel(&self, isa: Isa, _panel: &[u8], _k: usize, _out: &mut [u8]) {
        panic!("{self:?} has no expanded panels on {isa:?}")
    }

    /// `tile[r][j] = Σ_kk x[rows.first + r, kk] · W_panel[j, kk]` for `r < rows.len`,
    /// `j < PANEL`, `kk < panel.k`, where `rows.len <= self.tile_rows(isa)`. `place` says which
    /// of the panel's row tiles this is, so the kernel may prefetch; `panel.form`, whether the
    /// panel is packed or expanded.
    fn tile(
        &self,
        isa: Isa,
        panel: PanelView<'_>,
        x: &Activations<'_>,
        rows: RowSpan,
        place: TilePlace,
        tile: &mut Tile,
    );
}

/// The format that keeps weights of ggml type `ty` as they are, if sluice has one.
pub fn format_for(ty: GgmlType) -> Option<&'static dyn WeightFormat> {
    Some(match ty {
        GgmlType::F32 => &float::F32,
        GgmlType::F16 => &float::F16,
        GgmlType::BF16 => &bf16::Bf16,
        GgmlType::Q8_0 => &legacy::Q8_0,
        GgmlType::Q4_0 => &legacy::Q4_0,
        GgmlType::Q4_1 => &legacy::Q4_1,
        GgmlType::Q5_0 => &legacy::Q5_0,
        GgmlType::Q5_1 => &legacy::Q5_1,
        GgmlType::Q2_K => &k_quant::Q2_K,
        GgmlType::Q3_K => &k_quant::Q3_K,
        GgmlType::Q4_K => &k_quant::Q4_K,
        GgmlType::Q5_K => &k_quant::Q5_K,
        GgmlType::Q6_K => &k_quant::Q6_K,
        _ => return None,
    })
}

/// Decodes stored rows of type `ty` (any format's type) into f32; `None` when `ty` cannot be
/// read.
pub fn decode(ty: GgmlType, src: &[u8], k: usize, dst: &mut [f32]) -> Option<()> {
    let format = format_for(ty)?;
    let row_bytes = format.row_bytes(k);
    for (s, d) in src.chunks_exact(row_bytes).zip(dst.chunks_exact_mut(k)) {
        format.decode_row(s, d);
    }
    Some(())
}

/// Bytes in 64-byte aligned storage, so panels can be read as f32 or f16 slices and start on
/// cache lines.
#[derive(Clone)]
pub struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line([0; 64]); len.div_ceil(64)],
            len,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `lines` holds at least `len` initialised bytes, and `Line` has no padding.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as for `as_slice`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests;
