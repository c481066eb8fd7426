//! A prompt's images as the engine sees them: each image's run of soft tokens (prompt
//! positions) and the embeddings the model reads there, owned by the sequence.
//!
//! Two rules follow from the model (see docs/model.md#images-in-the-language-model):
//! - **chunking**: where an image's rows attend to each other both ways (Gemma 3), a step that
//!   computes any uncached row of the run computes all of its uncached rows
//!   ([`PromptImages::chunk_len`] cuts a chunk before the run, or stretches it to the run's end
//!   when it starts inside one); where they are read causally (Qwen2.5-VL), a chunk may end
//!   anywhere, as in text;
//! - **prefix cache**: a block holding an image's soft tokens is keyed by the image's content
//!   hash ([`PromptImages::cache_keys`]), so two different images never share a block, and the
//!   same image at the same place after the same tokens hits (the next turn of a chat), whatever
//!   images follow it.

use std::ops::Range;
use std::sync::Arc;

use sluice_model::{Batch, MropeError, MropePositions, PromptImage};
use thiserror::Error;

use crate::block_manager::{CacheKeys, KeySpan};

/// One image of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSpan {
    /// Prompt position of its first soft token.
    pub start: usize,
    /// Its embeddings, `[soft tokens, hidden]` row-major: one row per soft token.
    pub embeddings: Arc<[f32]>,
    /// Hash of the image's content (the encoded bytes), which scopes the prefix cache.
    pub content_hash: [u8; 32],
}

/// Why a prompt's images do not fit it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImageSpanError {
    /// An image's embeddings are not whole rows of `hidden`.
    #[error("image {index}: {values} values are not whole rows of {hidden}")]
    PartialRow {
        /// Which image.
        index: usize,
        /// Values it has.
        values: usize,
        /// Row width.
        hidden: usize,
    },
    /// Images overlap or are out of order.
    #[error("image {index} starts at {start}, inside or before the previous image")]
    Unordered {
        /// Which image.
        index: usize,
        /// Where it starts.
        start: usize,
    },
}

/// How a family's language model reads a prompt's image rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ImageLayout {
    /// An image's rows attend to each other both ways; positions are the token indices
    /// (Gemma 3).
    #[default]
    Bidirectional,
    /// Causal attention over image rows as over text; every row of the sequence (prompt and
    /// generated tokens) takes a 3-D rotary position laid out by the images' grids
    /// (Qwen2.5-VL's multimodal RoPE).
    Mrope(MropePositions),
}

/// The images of one prompt, in prompt order; empty for a text prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptImages {
    spans: Vec<ImageSpan>,
    /// Width of an embedding row (the text model's hidden size).
    hidden: usize,
    layout: ImageLayout,
}

impl PromptImages {
    /// Images at the given positions, checked to be ordered, apart and made of whole rows.
    pub fn new(spans: Vec<ImageSpan>, hidden: usize) -> Result<Self, ImageSpanError> {
        let mut end = 0;
        for (index, span) in spans.iter().enumerate() {
            let values = span.embeddings.len();
            if hidden == 0 || values == 0 || values % hidden != 0 {
                return Err(ImageSpanError::PartialRow {
                    index,
                    values,
                    hidden,
                });
            }
            if span.start < end {
                let start = span.start;
                return Err(ImageSpanError::Unordered { index, start });
            }
            end = span.start + values / hidden;
        }
        Ok(PromptImages {
            spans,
            hidden,
            layout: ImageLayout::Bidirectional,
        })
    }

    /// The same images read causally with 3-D rotary positions: `grids[i]` is image i's patch
    /// grid `[t, h, w]` before merging `spatial_merge_size` x `spatial_merge_size` patches
    /// into one token, and `prompt_len` the prompt's length.
    pub fn with_mrope(
        mut self,
        prompt_len: usize,
        grids: &[[usize; 3]],
        spatial_merge_size: usize,
    ) -> Result<Self, MropeError> {
        let images: Vec<PromptImage> = (self.spans.iter().zip(grids))
            .map(|(span, &grid_thw)| PromptImage {
                start: span.start,
                grid_thw,
            })
            .collect();
        let positions = MropePositions::new(prompt_len, &images, spatial_merge_size)?;
        self.layout = ImageLayout::Mrope(positions);
        Ok(self)
    }

    /// How the language model reads the image rows.
    pub fn layout(&self) -> &ImageLayout {
        &self.layout
    }

    /// True for a prompt without images.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The images, in prompt order.
    pub fn spans(&self) -> &[ImageSpan] {
        &self.spans
    }

    /// Prompt positions of each image's soft tokens.
    pub fn runs(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        (self.spans.iter()).map(|s| s.start..s.start + s.embeddings.len() / self.hidden)
    }

    /// Soft tokens over all images.
    pub fn num_tokens(&self) -> usize {
        self.runs().map(|r| r.len()).sum()
    }

    /// How many of the tokens from position `start` a step computes when the budget allows
    /// `wanted` (> 0): `wanted`, unless its end falls inside the run of an image whose rows
    /// attend to each other both ways, which is then left whole to a later step (the chunk
    /// ends before the run) or, when the chunk starts inside the run (a prefix-cache hit ended
    /// there), taken whole past the budget. Causal image rows are cut like text.
    pub fn chunk_len(&self, start: usize, wanted: usize) -> usize {
        let end = start + wanted;
        if wanted == 0 || self.layout != ImageLayout::Bidirectional {
            return wanted;
        }
        for run in self.runs() {
            if run.start < end && end < run.end {
                return if run.start > start {
                    run.start - start
                } else {
                    run.end - start
                };
            }
        }
        wanted
    }

    /// Gives the model the embeddings of the image rows among positions
    /// `start..start + len`, computed at batch rows from `first_row` on, with each image's
    /// rows attending to each other where the layout says so. A run whose rows attend both
    /// ways must end in the chunk if it holds part of it ([`PromptImages::chunk_len`]).
    pub fn push_rows(&self, batch: &mut Batch, start: usize, len: usize, first_row: usize) {
        let end = start + len;
        let bidirectional = self.layout == ImageLayout::Bidirectional;
        for (span, run) in self.spans.iter().zip(self.runs()) {
            if run.end <= start || run.start >= end {
                continue;
            }
            debug_assert!(
                !bidirectional || run.end <= end,
                "a chunk ends inside an image"
            );
            let (first, last) = (run.start.max(start), run.end.min(end));
            let values = &span.embeddings
                [(first - run.start) * self.hidden..(last - run.start) * self.hidden];
            let row = first_row + first - start;
            match bidirectional {
                true => batch.push_bidirectional_image(row, values, self.hidden),
                false => batch.input_embeddings.push_run(row, values, self.hidden),
            }
        }
    }

    /// Gives the model the rotary positions of the sequence's rows `start..start + rows`
    /// (prompt, generated and draft tokens alike), at batch rows from `first_row` on, where
    /// the layout has positions of its own; nothing otherwise.
    pub fn push_positions(&self, batch: &mut Batch, start: usize, rows: usize, first_row: usize) {
        if let ImageLayout::Mrope(positions) = &self.layout {
            batch.set_mrope_positions(first_row, &positions.rows(start, rows));
        }
    }

    /// The prefix-cache keys of a prompt with these images under scope `salt`: each image's
    /// soft tokens are keyed by its content hash, so blocks holding them are found only for the
    /// same image at the same place after the same tokens ([`CacheKeys`]).
    pub fn cache_keys(&self, salt: Option<u64>) -> CacheKeys {
        let spans = (self.runs().zip(&self.spans))
            .map(|(positions, span)| KeySpan {
                positions,
                key: span.content_hash,
            })
            .collect();
        CacheKeys::new(salt, spans)
    }
}

#[cfg(test)]
#[path = "images_tests.rs"]
mod tests;
