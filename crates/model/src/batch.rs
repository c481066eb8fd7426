//! The typed input of one forward pass: a flat batch of tokens from many sequences.
//!
//! The scheduler builds a [`Batch`] every step; the model reads it and returns [`Logits`] for the
//! rows named in [`Batch::logits_indices`] (and the final hidden state of the rows named in
//! [`Batch::hidden_indices`], which embedding requests pool). Decode steps (one token) and
//! prefill chunks (many tokens) of different sequences share one batch.
//!
//! Images enter a batch as rows too: their embeddings replace the token embeddings of the
//! image-token rows ([`Batch::input_embeddings`]), and where the model attends bidirectionally
//! within an image (Gemma 3), the image's rows are one [`Batch::bidirectional_spans`] entry.

use std::ops::Range;

use crate::kv_layout::{KvGroupId, FULL_GROUP};

/// A block-table entry whose block was released: the sliding window no longer reaches it.
pub const RELEASED_BLOCK: u32 = u32::MAX;

/// The cache slot of `position` in a sequence whose blocks are `table`: `block_id * block_size +
/// offset`.
pub fn slot(table: &[u32], position: usize, block_size: usize) -> usize {
    table[position / block_size] as usize * block_size + position % block_size
}

/// One sequence's share of a flat [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqBatch {
    /// Index of this sequence's first token in the flat batch.
    pub token_start: usize,
    /// Number of new tokens this sequence contributes to the step (1 for a decode).
    pub num_tokens: usize,
    /// Tokens of this sequence held in the cache once this step has written its new tokens
    /// (previously cached tokens plus `num_tokens`). The new tokens are the last `num_tokens`.
    pub context_len: usize,
    /// This sequence's physical KV block ids in each KV group's pool, in logical order, the
    /// groups in the cache's order (see [`crate::kv_layout`]); [`RELEASED_BLOCK`] where a
    /// window has moved past. Each covers at least `context_len` tokens. A batch may carry the
    /// full group's table alone: the other groups are then addressed through it (a cache whose
    /// pools are all as large, in tests and tools).
    pub block_tables: Vec<Vec<u32>>,
}

impl SeqBatch {
    /// The block table of `group`'s pool.
    pub fn table(&self, group: KvGroupId) -> &[u32] {
        (self.block_tables.get(group)).unwrap_or(&self.block_tables[FULL_GROUP])
    }

    /// The full group's block table.
    pub fn block_table(&self) -> &[u32] {
        &self.block_tables[FULL_GROUP]
    }
}

/// A flat batch of tokens from many sequences, with everything attention needs to find each
/// sequence's history in the paged KV cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Token ids, `[num_tokens]`, sequences laid out one after another.
    pub token_ids: Vec<u32>,
    /// Absolute position of each token in its sequence, `[num_tokens]`.
    pub positions: Vec<u32>,
    /// Per KV group the sequences carry tables for, the cache slot each token's K/V is written
    /// to, `[groups][num_tokens]`: `block_id * block_size + offset` in that group's pool.
    pub slot_mappings: Vec<Vec<u32>>,
    /// The sequences, in the order their tokens appear.
    pub seqs: Vec<SeqBatch>,
    /// Flat token indices whose logits are returned, in this order (usually each sequence's
    /// last token when it has caught up with its prompt).
    pub logits_indices: Vec<usize>,
    /// Flat token indices whose final-norm hidden state is returned, in this order (rows an
    /// embedding request pools). Usually empty.
    pub hidden_indices: Vec<usize>,
    /// Rows whose input is given as an embedding instead of their token's (image soft tokens).
    /// Usually empty.
    pub input_embeddings: InputEmbeddings,
    /// Runs of consecutive flat rows of one sequence that attend to each other in both
    /// directions (Gemma 3's image tokens): a row of a span also sees the span's later rows,
    /// within its layer's sliding window. Each span lies in one sequence's rows of this batch,
    /// so the engine must never split such a run across prefill chunks. Usually empty.
    pub bidirectional_spans: Vec<Range<usize>>,
    /// Multimodal RoPE (Qwen2.5-VL): each token's `[temporal, height, width]` rotary position,
    /// `[num_tokens]`, or empty when every component of every token is its `positions` entry
    /// (text). Only the rotation reads these; cache slots, causality and windows follow
    /// `positions`. A model whose RoPE takes one position ignores them. Set with
    /// [`Batch::set_mrope_positions`].
    pub mrope_positions: Vec<[u32; 3]>,
}

/// Embeddings that replace rows' token embeddings: row `rows[i]` of the batch starts the
/// forward pass as `values[i * hidden..(i + 1) * hidden]`, exactly as given (not multiplied by
/// any embedding scale: transformers scatters image features into the already scaled
/// embeddings).
#[derive(Debug, Clone, Default)]
pub struct InputEmbeddings {
    /// Flat row indices, strictly increasing.
    pub rows: Vec<usize>,
    /// `[rows.len(), hidden]` row-major.
    pub values: Vec<f32>,
}

impl InputEmbeddings {
    /// Whether no row is replaced.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Replaces the inputs of the `rows.len()` rows from `first_row` on with `values`
    /// (`[rows, hidden]`), e.g. one image's embeddings at its soft tokens.
    pub fn push_run(&mut self, first_row: usize, values: &[f32], hidden: usize) {
        assert!(
            hidden > 0 && values.len().is_multiple_of(hidden),
            "whole rows"
        );
        self.rows
            .extend(first_row..first_row + values.len() / hidden);
        self.values.extend_from_slice(values);
    }
}

// Equality by bits, so a batch stays `Eq` (and a NaN equals itself).
impl PartialEq for InputEmbeddings {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.values.len() == other.values.len()
            && (self.values.iter().zip(&other.values)).all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl Eq for InputEmbeddings {}

impl Batch {
    /// Number of tokens in the batch.
    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// Appends one sequence's new tokens with its full group's `block_table` alone (see
    /// [`Batch::push_sequence_tables`]).
    pub fn push_sequence(
        &mut self,
        tokens: &[u32],
        first_position: usize,
        block_table: Vec<u32>,
        block_size: usize,
        want_logits: bool,
    ) {
        let tables = vec![block_table];
        self.push_sequence_tables(tokens, first_position, tables, block_size, want_logits);
    }

    /// Appends one sequence's new tokens. `first_position` is the position of `tokens[0]`
    /// (equal to the number of tokens already cached); `tables` holds its block table in each
    /// KV group (the full group's first), and every group's slots are derived from its table.
    /// Every sequence of a batch carries as many tables. When `want_logits` is set, the last
    /// token's row is added to `logits_indices`.
    pub fn push_sequence_tables(
        &mut self,
        tokens: &[u32],
        first_position: usize,
        tables: Vec<Vec<u32>>,
        block_size: usize,
        want_logits: bool,
    ) {
        assert!(!tables.is_empty(), "a sequence has a full-group table");
        let token_start = self.token_ids.len();
        if self.slot_mappings.len() < tables.len() {
            self.slot_mappings.resize(tables.len(), Vec::new());
        }
        for (i, &t) in tokens.iter().enumerate() {
            let pos = first_position + i;
            self.token_ids.push(t);
            self.positions.push(pos as u32);
            if !self.mrope_positions.is_empty() {
                self.mrope_positions.push([pos as u32; 3]);
            }
            for (slots, table) in self.slot_mappings.iter_mut().zip(&tables) {
                slots.push(slot(table, pos, block_size) as u32);
            }
        }
        if want_logits && !tokens.is_empty() {
            self.logits_indices.push(token_start + tokens.len() - 1);
        }
        self.seqs.push(SeqBatch {
            token_start,
            num_tokens: tokens.len(),
            context_len: first_position + tokens.len(),
            block_tables: tables,
        });
    }

    /// The slot each token's K/V is written to in `group`'s pool (through the full group's
    /// table when the sequences carry none for `group`).
    pub fn slots(&self, group: KvGroupId) -> &[u32] {
        (self.slot_mappings.get(group))
            .or(self.slot_mappings.first())
            .map_or(&[], |s| s)
    }

    /// The slot of each token in the full group's pool.
    pub fn slot_mapping(&self) -> &[u32] {
        self.slots(FULL_GROUP)
    }

    /// Gives the rows `first_row..first_row + positions.len()` these multimodal rotary
    /// positions (a Qwen2.5-VL sequence with images: `crate::mrope::MropePositions::rows`). The
    /// batch's other rows, and those of sequences pushed later, take `[p, p, p]`, `p` their
    /// `positions` entry.
    pub fn set_mrope_positions(&mut self, first_row: usize, positions: &[[u32; 3]]) {
        if self.mrope_positions.is_empty() {
            self.mrope_positions = self.positions.iter().map(|&p| [p; 3]).collect();
        }
        self.mrope_positions[first_row..][..positions.len()].copy_from_slice(positions);
    }

    /// Gemma 3's image rows: the `values.len() / hidden` rows from `first_row` on take `values`
    /// (`[rows, hidden]`, the image's embeddings) as their input and attend to each other
    /// bidirectionally. The rows must be one sequence's, in this batch.
    pub fn push_bidirectional_image(&mut self, first_row: usize, values: &[f32], hidden: usize) {
        self.input_embeddings.push_run(first_row, values, hidden);
        let rows = values.len() / hidden;
        self.bidirectional_spans.push(first_row..first_row + rows);
    }
}

/// What one forward pass returns: logits for the rows a [`Batch`] asked for, `[rows,
/// vocab_size]` row-major, and the final-norm hidden states of its `hidden_indices`,
/// `[hidden rows, hidden_size]` row-major.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Logits {
    /// Row-major values, `rows * vocab_size` long.
    pub data: Vec<f32>,
    /// Columns per row.
    pub vocab_size: usize,
    /// Final-norm hidden states (the input of the output head) of `Batch::hidden_indices`,
    /// `hidden_indices.len() * hidden_size` long; empty when none were asked for.
    pub hidden: Vec<f32>,
    /// Columns of every hidden-state row.
    pub hidden_size: usize,
}

impl Logits {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.vocab_size).unwrap_or(0)
    }

    /// One row's logits.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.vocab_size..(i + 1) * self.vocab_size]
    }

    /// The final hidden state of the `i`-th entry of `Batch::hidden_indices`.
    pub fn hidden_row(&self, i: usize) -> &[f32] {
        &self.hidden[i * self.hidden_size..(i + 1) * self.hidden_size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_sequence_maps_positions_to_slots_through_the_block_table() {
        let mut b = Batch::default();
        b.push_sequence(&[7, 8, 9], 3, vec![5, 2], 4, true);
        assert_eq!(b.positions, vec![3, 4, 5]);
        // position 3 -> block 5 offset 3; 4 -> block 2 offset 0; 5 -> block 2 offset 1
        assert_eq!(b.slot_mapping(), [23, 8, 9]);
        assert_eq!(b.logits_indices, vec![2]);
        assert_eq!(b.seqs[0].context_len, 6);
    }

    #[test]
    fn each_group_gets_slots_from_its_own_table() {
        let mut b = Batch::default();
        let released = RELEASED_BLOCK;
        b.push_sequence_tables(&[7, 8], 4, vec![vec![5, 2], vec![released, 9]], 4, false);
        assert_eq!((b.slots(0), b.slots(1)), (&[8, 9][..], &[36, 37][..]));
        assert_eq!(b.seqs[0].table(1), [released, 9]);
        // A group the sequences carry no table for is addressed through the full group's.
        assert_eq!(b.slots(2), b.slots(0));
        assert_eq!(b.seqs[0].table(2), [5, 2]);
    }

    #[test]
    fn rows_without_mrope_positions_take_their_position_in_every_component() {
        let mut b = Batch::default();
        b.push_sequence(&[1, 2], 5, vec![0, 1], 4, true);
        b.push_sequence(&[3, 4, 5], 0, vec![2], 4, true);
        assert!(b.mrope_positions.is_empty());
        b.set_mrope_positions(3, &[[1, 2, 3], [1, 2, 4]]);
        b.push_sequence(&[6], 9, vec![3, 4, 5], 4, true);
        assert_eq!(
            b.mrope_positions,
            [
                [5, 5, 5],
                [6, 6, 6],
                [0, 0, 0],
                [1, 2, 3],
                [1, 2, 4],
                [9, 9, 9]
            ]
        );
    }

    #[test]
    fn an_image_replaces_its_rows_inputs_and_spans_them() {
        let mut b = Batch::default();
        b.push_sequence(&[1, 9, 9, 9, 2], 0, vec![0, 1], 4, true);
        b.push_bidirectional_image(1, &[0.5; 6], 2);
        assert_eq!(b.input_embeddings.rows, [1, 2, 3]);
        assert_eq!(b.input_embeddings.values.len(), 6);
        assert_eq!(
            (b.bidirectional_spans.len(), &b.bidirectional_spans[0]),
            (1, &(1..4))
        );
        assert_eq!(b.clone(), b);
    }
}
