//! Qwen2.5-VL's multimodal rotary positions: where each token of a sequence with images sits in
//! time, height and width (the three components `Batch::mrope_positions` carries).
//!
//! The rule is transformers' `Qwen2_5_VLModel.get_rope_index` for images. A running position
//! `p` starts at 0. A text token takes `[p, p, p]` and advances `p` by one. An image's
//! `<|image_pad|>` tokens (its merged patches, `t · (h/m) · (w/m)` of them in row-major order
//! over the grid `(t, h, w)` the vision encoder saw and the spatial merge size `m`) take
//! `[p + frame, p + row, p + column]`, and the image then advances `p` by `max(h, w) / m`, so
//! an image costs far fewer positions than tokens. After the prompt, token `i` (decode, or
//! anything appended) takes `i + rope_delta` in all three components, `rope_delta` being the
//! prompt's largest position plus one minus its length (negative once an image is larger
//! than one row). `<|vision_start|>` and `<|vision_end|>` are text.
//!
//! [`MropePositions`] keeps only the images' placements, so the positions of any rows
//! (a prefill chunk that starts mid-prompt, a decode step) come without recomputing the prompt.

use thiserror::Error;

/// One image's run of `<|image_pad|>` tokens in a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptImage {
    /// Index in the prompt of the image's first `<|image_pad|>` token.
    pub start: usize,
    /// The patch grid `[t, h, w]` the vision encoder saw, before merging (the processor's
    /// `image_grid_thw`).
    pub grid_thw: [usize; 3],
}

/// Why a prompt's images cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MropeError {
    /// The spatial merge size is 0.
    #[error("the spatial merge size must be at least 1")]
    MergeSize,
    /// An image's grid has an empty side, or a height or width the merge size does not divide.
    #[error("image {index}: grid {grid_thw:?} is not whole blocks of {merge}x{merge} patches")]
    Grid {
        /// The image's index among the prompt's images.
        index: usize,
        /// Its grid.
        grid_thw: [usize; 3],
        /// The spatial merge size.
        merge: usize,
    },
    /// An image's tokens start before the previous image's end or end past the prompt.
    #[error(
        "image {index}'s tokens {start}..{end} overlap the previous image or pass the prompt's \
         end ({prompt_len})"
    )]
    Placement {
        /// The image's index among the prompt's images.
        index: usize,
        /// Its first token.
        start: usize,
        /// One past its last token.
        end: usize,
        /// The prompt's length.
        prompt_len: usize,
    },
}

/// The multimodal rotary positions of one sequence: its prompt's images, placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MropePositions {
    /// In prompt order.
    images: Vec<PlacedImage>,
    prompt_len: usize,
    rope_delta: i64,
}

/// One image with the positions it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlacedImage {
    /// Its first token's index.
    start: usize,
    /// `[t, h / m, w / m]`: its tokens are `t · h/m · w/m` in row-major order over these.
    merged: [usize; 3],
    /// The running position at its first token: every component of its tokens counts from it.
    base: usize,
    /// The running position after it, where the text that follows continues.
    next: usize,
}

impl PlacedImage {
    fn tokens(&self) -> usize {
        self.merged.iter().product()
    }

    fn end(&self) -> usize {
        self.start + self.tokens()
    }

    /// The position of its `j`-th token.
    fn position(&self, j: usize) -> [usize; 3] {
        let [_, h, w] = self.merged;
        let (frame, cell) = (j / (h * w), j % (h * w));
        [
            self.base + frame,
            self.base + cell / w,
            self.base + cell % w,
        ]
    }

    /// Its largest component.
    fn max_position(&self) -> usize {
        self.base + self.merged.iter().max().map_or(0, |&n| n - 1)
    }
}

impl MropePositions {
    /// Places the images (in prompt order) of a prompt of `prompt_len` tokens whose vision
    /// encoder merges `spatial_merge_size`² patches into one token.
    pub fn new(
        prompt_len: usize,
        images: &[PromptImage],
        spatial_merge_size: usize,
    ) -> Result<Self, MropeError> {
        let m = spatial_merge_size;
        if m == 0 {
            return Err(MropeError::MergeSize);
        }
        let mut placed: Vec<PlacedImage> = Vec::with_capacity(images.len());
        // The running position and the token index it belongs to.
        let (mut position, mut index) = (0, 0);
        let mut max_position = None;
        for (i, image) in images.iter().enumerate() {
            let [t, h, w] = image.grid_thw;
            if t == 0 || h == 0 || w == 0 || !h.is_multiple_of(m) || !w.is_multiple_of(m) {
                return Err(MropeError::Grid {
                    index: i,
                    grid_thw: image.grid_thw,
                    merge: m,
                });
            }
            let merged = [t, h / m, w / m];
            let end = image.start.saturating_add(merged.iter().product());
            if image.start < index || end > prompt_len {
                return Err(MropeError::Placement {
                    index: i,
                    start: image.start,
                    end,
                    prompt_len,
                });
            }
            let base = position + (image.start - index);
            let image = PlacedImage {
                start: image.start,
                merged,
                base,
                next: base + h.max(w) / m,
            };
            max_position = max_position.max(Some(image.max_position()));
            (position, index) = (image.next, end);
            placed.push(image);
        }
        if index < prompt_len {
            max_position = max_position.max(Some(position + (prompt_len - index) - 1));
        }
        let rope_delta = max_position.map_or(0, |p| p as i64 + 1 - prompt_len as i64);
        Ok(Self {
            images: placed,
            prompt_len,
            rope_delta,
        })
    }

    /// What a token after the prompt adds to its index in every component (transformers'
    /// `rope_deltas`): 0 without images, negative once images save positions.
    pub fn rope_delta(&self) -> i64 {
        self.rope_delta
    }

    /// The prompt's length.
    pub fn prompt_len(&self) -> usize {
        self.prompt_len
    }

    /// The `[temporal, height, width]` position of token `index` of the sequence (a prompt
    /// token, or past the prompt `index + rope_delta`).
    pub fn position(&self, index: usize) -> [u32; 3] {
        if index >= self.prompt_len {
            return [(index as i64 + self.rope_delta) as u32; 3];
        }
        let before = self.images.partition_point(|image| image.start <= index);
        let position = match before.checked_sub(1).map(|i| &self.images[i]) {
            None => [index; 3],
            Some(image) if index < image.end() => image.position(index - image.start),
            Some(image) => [image.next + (index - image.end()); 3],
        };
        position.map(|p| p as u32)
    }

    /// The positions of tokens `start..start + len` (a prefill chunk, a decode step), for
    /// `Batch::set_mrope_positions`.
    pub fn rows(&self, start: usize, len: usize) -> Vec<[u32; 3]> {
        (start..start + len).map(|i| self.position(i)).collect()
    }
}

/// Every prompt token's `[temporal, height, width]` position and the prompt's `rope_delta`
/// (see [`MropePositions`]): transformers' `get_rope_index` for one prompt with images.
pub fn prompt_positions(
    prompt_len: usize,
    images: &[PromptImage],
    spatial_merge_size: usize,
) -> Result<(Vec<[u32; 3]>, i64), MropeError> {
    let placed = MropePositions::new(prompt_len, images, spatial_merge_size)?;
    Ok((placed.rows(0, prompt_len), placed.rope_delta()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(start: usize, grid_thw: [usize; 3]) -> PromptImage {
        PromptImage { start, grid_thw }
    }

    /// `(positions, rope_delta)` as `prompt_positions` gives them, for comparison with what
    /// transformers 5.24's `get_rope_index` returned for the same prompt (its `mm_token_type_ids`
    /// 1 at the images' tokens).
    fn positions(len: usize, images: &[PromptImage], merge: usize) -> (Vec<[u32; 3]>, i64) {
        prompt_positions(len, images, merge).unwrap()
    }

    #[test]
    fn a_wide_image_takes_its_rows_and_columns_and_saves_positions() {
        // 4x6 patches merged 2x2: 2 rows of 3 tokens; the text after continues at 2 + 3.
        let expected = [
            [0, 0, 0],
            [1, 1, 1],
            [2, 2, 2],
            [2, 2, 3],
            [2, 2, 4],
            [2, 3, 2],
            [2, 3, 3],
            [2, 3, 4],
            [5, 5, 5],
        ];
        assert_eq!(
            positions(9, &[image(2, [1, 4, 6])], 2),
            (expected.to_vec(), -3)
        );
    }

    #[test]
    fn two_images_one_wide_one_tall() {
        let images = [image(1, [1, 2, 4]), image(5, [1, 6, 2])];
        let mut expected = vec![
            [0, 0, 0],
            [1, 1, 1],
            [1, 1, 2],
            [3, 3, 3],
            [4, 4, 4],
            [5, 5, 5],
            [5, 6, 5],
            [5, 7, 5],
        ];
        expected.extend((8..16).map(|p| [p; 3]));
        assert_eq!(positions(16, &images, 2), (expected, 0));
    }

    #[test]
    fn images_at_the_start_and_at_the_end_of_the_prompt() {
        let images = [image(0, [1, 2, 4]), image(6, [1, 4, 4])];
        let expected = [
            [0, 0, 0],
            [0, 0, 1],
            [2, 2, 2],
            [3, 3, 3],
            [4, 4, 4],
            [5, 5, 5],
            [6, 6, 6],
            [6, 6, 7],
            [6, 7, 6],
            [6, 7, 7],
        ];
        assert_eq!(positions(10, &images, 2), (expected.to_vec(), -2));
    }

    #[test]
    fn frames_advance_the_temporal_component_only() {
        let expected = [
            [0, 0, 0],
            [1, 1, 1],
            [1, 1, 2],
            [2, 1, 1],
            [2, 1, 2],
            [3, 3, 3],
            [4, 4, 4],
            [5, 5, 5],
        ];
        assert_eq!(
            positions(8, &[image(1, [2, 2, 4])], 2),
            (expected.to_vec(), -2)
        );
        // Without merging, a 2x3 grid is 6 tokens, and the prompt ends with it.
        let expected = [
            [0, 0, 0],
            [1, 1, 1],
            [2, 2, 2],
            [2, 2, 3],
            [2, 2, 4],
            [2, 3, 2],
            [2, 3, 3],
            [2, 3, 4],
        ];
        assert_eq!(
            positions(8, &[image(2, [1, 2, 3])], 1),
            (expected.to_vec(), -3)
        );
    }

    #[test]
    fn text_alone_is_plain_positions() {
        assert_eq!(positions(3, &[], 2), (vec![[0; 3], [1; 3], [2; 3]], 0));
        assert_eq!(positions(0, &[], 2), (vec![], 0));
    }

    #[test]
    fn any_rows_match_the_whole_prompts_and_decode_adds_the_delta() {
        let images = [image(1, [1, 2, 4]), image(5, [1, 6, 2])];
        let placed = MropePositions::new(12, &images, 2).unwrap();
        let whole = placed.rows(0, 12);
        for start in 0..12 {
            for len in 0..=12 - start {
                assert_eq!(placed.rows(start, len), whole[start..start + len]);
            }
        }
        // The prompt ends with text at position 11 - 0: decode continues from its index.
        let delta = placed.rope_delta();
        assert_eq!(delta, 0);
        let wide = MropePositions::new(9, &[image(2, [1, 4, 6])], 2).unwrap();
        assert_eq!(wide.rows(9, 2), [[6; 3], [7; 3]]);
        assert_eq!(wide.position(9)[0] as i64, 9 + wide.rope_delta());
        // A chunk across the prompt's end.
        assert_eq!(wide.rows(7, 3), [[2, 3, 4], [5; 3], [6; 3]]);
    }

    #[test]
    fn misplaced_images_and_grids_are_refused() {
        let grid = MropePositions::new(9, &[image(2, [1, 3, 6])], 2);
        assert!(matches!(grid, Err(MropeError::Grid { index: 0, .. })));
        let past_the_end = MropePositions::new(7, &[image(2, [1, 4, 6])], 2);
        assert!(matches!(
            past_the_end,
            Err(MropeError::Placement { end: 8, .. })
        ));
        let overlapping = [image(1, [1, 2, 4]), image(2, [1, 2, 4])];
        assert!(matches!(
            MropePositions::new(9, &overlapping, 2),
            Err(MropeError::Placement { index: 1, .. })
        ));
        assert_eq!(MropePositions::new(9, &[], 0), Err(MropeError::MergeSize));
    }
}
