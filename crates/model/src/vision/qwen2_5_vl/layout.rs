//! Where each patch of an image goes in Qwen2.5-VL's vision transformer: its 2D rotary position,
//! the window order the blocks run in, and the spans each row attends to
//! (transformers' `get_vision_position_ids`, `get_vision_window_index` and the `cu_seqlens` of
//! `Qwen2_5_VisionTransformerPretrainedModel.forward`).
//!
//! The processor lays an image's patches out by merged token (`merge²` contiguous rows each,
//! tokens in row-major order of the `h/merge × w/merge` token grid). The transformer reorders
//! the tokens window by window: windows of `window_tokens × window_tokens` tokens in row-major
//! order over the grid (the last row and column of windows partial), tokens row-major inside a
//! window. Window blocks attend within a window, full-attention blocks within a frame (the whole
//! image for a still image); the merger's output is put back in the original token order.

use std::ops::Range;

/// One image's layout, for a `t × h × w` patch grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageLayout {
    /// `order[k]`: the original index of the merged token that runs `k`-th.
    pub order: Vec<usize>,
    /// The windows, as ranges of rows in run order (patches, not tokens).
    pub windows: Vec<Range<usize>>,
    /// The frames, as ranges of rows (each the same in both orders: windows never cross one).
    pub frames: Vec<Range<usize>>,
    /// `(row, column)` in the patch grid of each row in run order.
    pub positions: Vec<(usize, usize)>,
}

impl ImageLayout {
    /// The layout of a `[t, h, w]` grid merged `merge × merge`, windows of `window` tokens a
    /// side. `h` and `w` are multiples of `merge` (the processor's resize makes them so).
    pub fn new([t, h, w]: [usize; 3], merge: usize, window: usize) -> Self {
        let (th, tw) = (h / merge, w / merge);
        let unit = merge * merge;
        let mut order = Vec::with_capacity(t * th * tw);
        let mut windows = Vec::new();
        for frame in 0..t {
            for wy in (0..th).step_by(window) {
                for wx in (0..tw).step_by(window) {
                    let start = order.len() * unit;
                    for y in wy..(wy + window).min(th) {
                        for x in wx..(wx + window).min(tw) {
                            order.push((frame * th + y) * tw + x);
                        }
                    }
                    windows.push(start..order.len() * unit);
                }
            }
        }
        let frames = (0..t).map(|f| f * h * w..(f + 1) * h * w).collect();
        // Token `k` of the grid covers patches (y·merge + i, x·merge + j), i and j row-major.
        let positions = (order.iter())
            .flat_map(|&token| {
                let within = token % (th * tw);
                let (y, x) = (within / tw, within % tw);
                (0..unit).map(move |u| (y * merge + u / merge, x * merge + u % merge))
            })
            .collect();
        Self {
            order,
            windows,
            frames,
            positions,
        }
    }

    /// Rows (patches) of the image.
    pub fn rows(&self) -> usize {
        self.positions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_wider_than_a_window_is_cut_into_full_and_partial_windows() {
        // 6 x 8 patches, merge 2: a 3 x 4 token grid; windows of 2 x 2 tokens.
        let layout = ImageLayout::new([1, 6, 8], 2, 2);
        // Tokens numbered row-major 0..12; windows: {0,1,4,5} {2,3,6,7} {8,9} {10,11}.
        assert_eq!(layout.order, [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 10, 11]);
        assert_eq!(layout.windows, [0..16, 16..32, 32..40, 40..48]);
        assert_eq!((layout.frames.len(), layout.frames[0].clone()), (1, 0..48));
        // Token 4 (the third to run) is token row 1, column 0: patches (2..4, 0..2).
        assert_eq!(&layout.positions[8..12], [(2, 0), (2, 1), (3, 0), (3, 1)]);
        assert_eq!(layout.positions[16], (0, 4));
    }

    #[test]
    fn a_grid_within_one_window_keeps_its_order() {
        let layout = ImageLayout::new([1, 4, 4], 2, 2);
        assert_eq!(layout.order, [0, 1, 2, 3]);
        assert_eq!(
            (layout.windows.len(), layout.windows[0].clone()),
            (1, 0..16)
        );
        assert_eq!(
            &layout.positions[..8],
            [
                (0, 0),
                (0, 1),
                (1, 0),
                (1, 1),
                (0, 2),
                (0, 3),
                (1, 2),
                (1, 3)
            ]
        );
    }
}
