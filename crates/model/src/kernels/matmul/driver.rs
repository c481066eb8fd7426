//! The product's schedule, shared by every format and both products (plain and gated): rows in
//! blocks that stay in cache, panels in groups, one rayon task per (row block, panel group),
//! and in each task the panel's row tiles, balanced, each told its place so its kernel may
//! prefetch. Finished tile rows go to `y` through [`OutPtr`].

use std::ops::Range;

use rayon::prelude::*;

use super::super::balanced_parts;
use super::super::formats::Activations;
use super::super::isa::Isa;
use super::super::tile::{RowSpan, Tile, TilePlace, PANEL, TILE_ROWS};
use super::expand::with_scratch;
use super::PackedMatrix;

/// Most rows of `x` run against one panel before moving to the next: the rows are re-read for
/// every panel, so they should stay in the last-level cache (256 rows of a 4864-wide
/// activation are 5 MB).
const MAX_BLOCK_ROWS: usize = 256;

impl PackedMatrix {
    /// Runs the product tile by tile, handing each finished tile row and its destination in
    /// `y` (`cols` values at most 16) to `store`. Safety: `y` holds `m * out_dim` values that
    /// `store` may access as it does.
    pub(super) unsafe fn matmul_rows(
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
    pub(super) fn prepare<'a>(&self, x: &'a [f32], m: usize) -> Activations<'a> {
        assert_eq!(x.len(), m * self.in_dim, "x is not [m, in_dim]");
        Activations::prepare(self.format.activation(), x, self.in_dim)
    }

    /// Runs `per_panel(p, rows, tiles)` for every panel `p < panels` and block of the `m`
    /// rows, spread over the rayon pool; `tiles` is the task's own pair of tile buffers, made
    /// once a task rather than zeroed again for every panel.
    pub(super) fn for_each_panel(
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
}

/// The row tiles of a block of rows, with their places, at most `per_tile` rows each:
/// balanced, so 13 rows run as 5 + 4 + 4 in tiles of 6, not 6 + 6 + 1 (see `balanced_parts`).
pub(super) fn row_tiles(
    rows: Range<usize>,
    per_tile: usize,
) -> impl Iterator<Item = (RowSpan, TilePlace)> {
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

/// A pointer to the output that tasks writing disjoint regions may share.
#[derive(Clone, Copy)]
pub(super) struct OutPtr(pub(super) *mut f32);
// SAFETY: only used for disjoint writes within one `matmul` call, which outlives the tasks.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The element `offset` places in. Safety: `offset` must lie inside the output slice.
    #[inline(always)]
    pub(super) unsafe fn at(self, offset: usize) -> *mut f32 {
        self.0.add(offset)
    }
}

/// Writes the first `cols` values of a tile row to `dst`. Safety: `dst` is valid for `cols`
/// writes.
#[inline(always)]
pub(super) unsafe fn write_tile_row(dst: *mut f32, row: &[f32; PANEL], cols: usize) {
    if cols == PANEL {
        // Four vector stores. (A fixed-size `write_unaligned` here was merged with the
        // other branch into one `memcpy` call of `cols` values: 1.5% of a decode step. These
        // intrinsics were merged the same way by a later compiler, 2% of 16-stream serving, so
        // the partial copy is now a call of its own that cannot be merged.)
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
        write_partial_row(dst, row, cols);
    }
}

/// The last panel's narrower row (an output width not a multiple of 16). Safety: as
/// [`write_tile_row`].
#[cold]
#[inline(never)]
unsafe fn write_partial_row(dst: *mut f32, row: &[f32; PANEL], cols: usize) {
    std::ptr::copy_nonoverlapping(row.as_ptr(), dst, cols);
}

/// Adds the first `cols` values of a tile row into `dst`. Safety: `dst` is valid for `cols`
/// reads and writes.
#[inline(always)]
pub(super) unsafe fn add_tile_row(dst: *mut f32, row: &[f32; PANEL], cols: usize) {
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
