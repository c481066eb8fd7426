//! Where an image encoding may stop for a while: the encoders call [`Pause::point`] between
//! units of their work, so a server can hand the CPU to its decoding streams in the middle of
//! an encoding that takes seconds (the engine's encode gate), and resume it after.
//!
//! A unit is a block of at most [`Pause::unit_rows`] rows through one row-wise stage (a norm and
//! a linear layer, or the MLP), one head of a long span's attention, or the patch embedding.
//! Every stage works per row with the kernels' fixed reduction orders, so the units change no
//! bits: an encoding cut into units of 7 rows gives what one unit of every row gives (tested).

use std::ops::Range;

/// Rows per unit for an encoding that pauses: a unit of a Gemma-3-4B-shaped tower's MLP is
/// about 2.5 G multiply-adds (some 15-25 ms on two cores), and units this size made two tower
/// layers 3-5% faster in bf16 than one unit of all 4,096 rows (f16 within noise: smaller
/// activations stay in cache; `vision_bench tower 2 896 bf16 256`).
pub const UNIT_ROWS: usize = 256;

/// Where an encoding may pause, and how much row-wise work it does between two points.
pub trait Pause: Sync {
    /// Called between units of work; returns when the encoding may go on.
    fn point(&self);
    /// The most rows one unit of row-wise work covers.
    fn unit_rows(&self) -> usize;
}

/// An encoding that never pauses: every stage in one unit of all rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPause;

impl Pause for NoPause {
    fn point(&self) {}

    fn unit_rows(&self) -> usize {
        usize::MAX
    }
}

/// Calls `unit` on consecutive ranges of at most `pause.unit_rows()` of `rows` rows, with a
/// pause point after each.
pub(crate) fn in_units(rows: usize, pause: &dyn Pause, mut unit: impl FnMut(Range<usize>)) {
    let step = pause.unit_rows().max(1);
    let mut start = 0;
    while start < rows {
        let end = start.saturating_add(step).min(rows);
        unit(start..end);
        pause.point();
        start = end;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Units of `rows` rows, counting the points reached.
    #[derive(Debug, Default)]
    pub(crate) struct Units {
        pub rows: usize,
        pub points: AtomicUsize,
    }

    impl Units {
        pub(crate) fn of(rows: usize) -> Self {
            Units {
                rows,
                points: AtomicUsize::new(0),
            }
        }
    }

    impl Pause for Units {
        fn point(&self) {
            self.points.fetch_add(1, Ordering::Relaxed);
        }

        fn unit_rows(&self) -> usize {
            self.rows
        }
    }

    #[test]
    fn units_cover_every_row_once_in_order() {
        let mut seen = Vec::new();
        let units = Units::of(3);
        in_units(8, &units, |r| seen.push(r));
        assert_eq!(seen, [0..3, 3..6, 6..8]);
        assert_eq!(units.points.load(Ordering::Relaxed), 3);
        let mut all = Vec::new();
        in_units(8, &NoPause, |r| all.push(r));
        assert_eq!(all, vec![0..8]);
    }
}
