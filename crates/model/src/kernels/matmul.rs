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

use std::mem::MaybeUninit;
use std::ops::Range;

use rayon::prelude::*;
use sluice_gguf::GgmlType;

use super::balanced_parts;
use super::formats::{format_for, Activations, AlignedBytes, WeightFormat};
use super::isa::Isa;
use super::tile::{PanelForm, PanelView, RowSpan, Tile, TilePlace};
use super::vector::{best_ops, VectorOps};

pub use super::tile::{DEFAULT_TILE_ROWS, PANEL, TILE_ROWS};
/// Most rows of `x` run against one panel before moving to the next: the rows are re-read for
/// every panel, so they should stay in the last-level cache (256 rows of a 4864-wide
/// activation are 5 MB).
const MAX_BLOCK_ROWS: usize = 256;
/// Row tiles that must share a panel before it is expanded for them (see
/// [`WeightFormat::expand_panel`]): at 16 rows (two tiles) expanding measured 15% slower.
const EXPAND_MIN_TILES: usize = 3;

/// How packed weights are stored: a ggml type that has a [`WeightFormat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeightDtype(GgmlType);

impl WeightDtype {
    /// 32-bit floats.
    pub const F32: WeightDtype = WeightDtype(GgmlType::F32);
    /// IEEE half floats, widened to f32 inside the kernel.
    pub const F16: WeightDtype = WeightDtype(GgmlType::F16);

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
            .filter(|&t| t != GgmlType::F32 && t != GgmlType::F16)
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

    /// Runs the product tile by tile, handing each finished tile row and its destination in
    /// `y` (`cols` values at most 16) to `store`. Safety: `y` holds `m * out_dim` values that
    /// `store` may access as it does.
    unsafe fn matmul_rows(
        &self,
        x: &[f32],
        m: usize,
        y: *mut f32,
        store: impl Fn(*mut f32, &[f32; PANEL], usize) + Sync,
    ) {
        let n = self.out_dim;
        let out = OutPtr(y);
        let isa = Isa::current();
        let acts = self.prepare(x, m);
        self.for_each_panel(m, n.div_ceil(PANEL), |p, rows, [tile, _]| {
            let cols = PANEL.min(n - p * PANEL);
            with_scratch(self.expands(isa, rows.len()), |scratch| {
                let panel = self.panel_for(isa, p, rows.len(), scratch);
                for (span, place) in row_tiles(rows, self.format.tile_rows(isa)) {
                    self.format.tile(isa, panel, &acts, span, place, tile);
                    for (r, tile_row) in tile.iter().take(span.len).enumerate() {
                        // SAFETY: tasks cover disjoint (row, panel) rectangles of y, and
                        // `(first + r) * n + p * PANEL + cols <= m * n` by the loop bounds.
                        let at = (span.first + r) * n + p * PANEL;
                        store(unsafe { out.at(at) }, tile_row, cols)
                    }
                }
            })
        });
    }

    /// `x: [m, in_dim]` in the form this matrix's format reads.
    fn prepare<'a>(&self, x: &'a [f32], m: usize) -> Activations<'a> {
        assert_eq!(x.len(), m * self.in_dim, "x is not [m, in_dim]");
        Activations::prepare(self.format.activation(), x, self.in_dim)
    }

    /// Runs `per_panel(p, rows, tiles)` for every panel `p < panels` and block of the `m`
    /// rows, spread over the rayon pool; `tiles` is the task's own pair of tile buffers, made
    /// once a task rather than zeroed again for every panel.
    fn for_each_panel(
        &self,
        m: usize,
        panels: usize,
        per_panel: impl Fn(usize, Range<usize>, &mut [Tile; 2]) + Sync,
    ) {
        if m == 0 {
            return;
        }
        // As few row blocks as possible, of even size: every block streams all the weights from
        // memory once more, and the first tile of each panel waits on that stream.
        let rows_per_block = m
            .div_ceil(m.div_ceil(MAX_BLOCK_ROWS))
            .next_multiple_of(TILE_ROWS);
        let row_blocks = m.div_ceil(rows_per_block);
        // Enough tasks to balance the threads, few enough to amortise scheduling.
        let wanted_tasks = (rayon::current_num_threads() * 8).max(1);
        let panels_per_task = panels.div_ceil(wanted_tasks.div_ceil(row_blocks)).max(1);
        let panel_groups = panels.div_ceil(panels_per_task);
        (0..row_blocks * panel_groups)
            .into_par_iter()
            .for_each(|task| {
                let (rb, pg) = (task / panel_groups, task % panel_groups);
                let rows = rb * rows_per_block..(m.min((rb + 1) * rows_per_block));
                let first_panel = pg * panels_per_task;
                let mut tiles = [[[0f32; PANEL]; TILE_ROWS]; 2];
                for p in first_panel..panels.min(first_panel + panels_per_task) {
                    per_panel(p, rows.clone(), &mut tiles);
                }
            });
    }

    /// Whether the tiles of `rows` rows read expanded panels: where the format has an
    /// expanded form and enough row tiles share each panel to repay the pass (prefill).
    fn expands(&self, isa: Isa, rows: usize) -> bool {
        rows >= EXPAND_MIN_TILES * self.format.tile_rows(isa)
            && self.format.expanded_bytes(isa, self.in_dim) > 0
    }

    /// Panel `p` as the tiles of `rows` rows should read it: expanded into `scratch` where
    /// [`PackedMatrix::expands`], else packed.
    fn panel_for<'a>(
        &'a self,
        isa: Isa,
        p: usize,
        rows: usize,
        scratch: &'a mut Vec<u8>,
    ) -> PanelView<'a> {
        let k = self.in_dim;
        if !self.expands(isa, rows) {
            return PanelView::packed(self.panel(p), k);
        }
        scratch.resize(self.format.expanded_bytes(isa, k), 0);
        self.format.expand_panel(isa, self.panel(p), k, scratch);
        PanelView {
            bytes: scratch,
            k,
            form: PanelForm::Expanded,
        }
    }
}

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

/// The row tiles of a block of rows, with their places, at most `per_tile` rows each:
/// balanced, so 13 rows run as 5 + 4 + 4 in tiles of 6, not 6 + 6 + 1 (see `balanced_parts`).
fn row_tiles(rows: Range<usize>, per_tile: usize) -> impl Iterator<Item = (RowSpan, TilePlace)> {
    debug_assert!((1..=TILE_ROWS).contains(&per_tile));
    balanced_parts(rows.len(), per_tile).scan(rows.start, move |first, len| {
        let place = TilePlace {
            first: *first == rows.start,
            last: *first + len == rows.end,
        };
        let tile = (RowSpan { first: *first, len }, place);
        *first += len;
        Some(tile)
    })
}

thread_local! {
    /// Each thread's buffers for expanded panels, one per level of nesting.
    static SCRATCH: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a buffer of this thread's that no enclosing call is using (taken out of the
/// thread's pool while `f` runs, so nested calls each get their own), or with an empty one
/// when the buffer is not `needed` (decode: no thread-local access per panel).
fn with_scratch<T>(needed: bool, f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    if !needed {
        return f(&mut Vec::new());
    }
    let mut buffer = SCRATCH
        .with_borrow_mut(|pool| pool.pop())
        .unwrap_or_default();
    let result = f(&mut buffer);
    SCRATCH.with_borrow_mut(|pool| pool.push(buffer));
    result
}

/// A pointer to the output that tasks writing disjoint regions may share.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: only used for disjoint writes within one `matmul` call, which outlives the tasks.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The element `offset` places in. Safety: `offset` must lie inside the output slice.
    unsafe fn at(self, offset: usize) -> *mut f32 {
        self.0.add(offset)
    }
}

/// Writes the first `cols` values of a tile row to `dst`. Safety: `dst` is valid for `cols`
/// writes.
#[inline(always)]
unsafe fn write_tile_row(dst: *mut f32, row: &[f32; PANEL], cols: usize) {
    if cols == PANEL {
        // Four vector stores. (A fixed-size `write_unaligned` here was merged with the
        // other branch into one `memcpy` call of `cols` values: 1.5% of a decode step.)
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_storeu_ps};
            for q in (0..PANEL).step_by(4) {
                // SAFETY: SSE is part of x86_64; `row` holds PANEL values and `dst` is valid
                // for PANEL writes.
                _mm_storeu_ps(dst.add(q), _mm_loadu_ps(row.as_ptr().add(q)));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        dst.cast::<[f32; PANEL]>().write_unaligned(*row);
    } else {
        std::ptr::copy_nonoverlapping(row.as_ptr(), dst, cols);
    }
}

/// Adds the first `cols` values of a tile row into `dst`. Safety: `dst` is valid for `cols`
/// reads and writes.
#[inline(always)]
unsafe fn add_tile_row(dst: *mut f32, row: &[f32; PANEL], cols: usize) {
    if cols == PANEL {
        let mut sum = dst.cast::<[f32; PANEL]>().read_unaligned();
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
        dst.cast::<[f32; PANEL]>().write_unaligned(sum);
    } else {
        for (j, v) in row.iter().take(cols).enumerate() {
            *dst.add(j) += v;
        }
    }
}

#[cfg(test)]
#[path = "matmul_tests.rs"]
mod tests;
