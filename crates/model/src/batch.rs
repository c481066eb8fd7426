//! The typed input of one forward pass: a flat batch of tokens from many sequences.
//!
//! The scheduler builds a [`Batch`] every step; the model reads it and returns [`Logits`] for the
//! rows named in [`Batch::logits_indices`] (and the final hidden state of the rows named in
//! [`Batch::hidden_indices`], which embedding requests pool). Decode steps (one token) and
//! prefill chunks (many tokens) of different sequences share one batch.

use crate::kv_layout::KvGroup;

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
    /// Physical KV block ids holding this sequence's tokens, in logical order. Covers at least
    /// `context_len` tokens.
    pub block_table: Vec<u32>,
    /// The window pool's blocks for this sequence, in logical order, [`RELEASED_BLOCK`] where
    /// the window has moved past (see [`crate::kv_layout`]). Empty when the sliding-window
    /// layers address their pool through `block_table` (a cache whose pools are equal).
    pub window_table: Vec<u32>,
}

impl SeqBatch {
    /// The block table of `group`'s pool.
    pub fn table(&self, group: KvGroup) -> &[u32] {
        match group {
            KvGroup::Window if !self.window_table.is_empty() => &self.window_table,
            _ => &self.block_table,
        }
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
    /// Cache slot each token's K/V is written to, `[num_tokens]`: `block_id * block_size + offset`.
    pub slot_mapping: Vec<u32>,
    /// The slot in the window pool each token's K/V is written to, `[num_tokens]`, when the
    /// sequences carry window tables; else empty.
    pub window_slot_mapping: Vec<u32>,
    /// The sequences, in the order their tokens appear.
    pub seqs: Vec<SeqBatch>,
    /// Flat token indices whose logits are returned, in this order (usually each sequence's
    /// last token when it has caught up with its prompt).
    pub logits_indices: Vec<usize>,
    /// Flat token indices whose final-norm hidden state is returned, in this order (rows an
    /// embedding request pools). Usually empty.
    pub hidden_indices: Vec<usize>,
}

impl Batch {
    /// Number of tokens in the batch.
    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// Appends one sequence's new tokens. `first_position` is the position of `tokens[0]`
    /// (equal to the number of tokens already cached); slots are derived from `block_table`.
    /// When `want_logits` is set, the last token's row is added to `logits_indices`.
    pub fn push_sequence(
        &mut self,
        tokens: &[u32],
        first_position: usize,
        block_table: Vec<u32>,
        block_size: usize,
        want_logits: bool,
    ) {
        let token_start = self.token_ids.len();
        for (i, &t) in tokens.iter().enumerate() {
            let pos = first_position + i;
            self.token_ids.push(t);
            self.positions.push(pos as u32);
            self.slot_mapping
                .push(slot(&block_table, pos, block_size) as u32);
        }
        if want_logits && !tokens.is_empty() {
            self.logits_indices.push(token_start + tokens.len() - 1);
        }
        self.seqs.push(SeqBatch {
            token_start,
            num_tokens: tokens.len(),
            context_len: first_position + tokens.len(),
            block_table,
            window_table: Vec::new(),
        });
    }

    /// Gives the last pushed sequence its window pool table: its new tokens' K/V go to the
    /// window pool slots `table` maps their positions to. Either every sequence of a batch has
    /// one or none does.
    pub fn set_window_table(&mut self, table: Vec<u32>, block_size: usize) {
        let seq = self.seqs.last_mut().expect("a sequence was pushed");
        let first = seq.context_len - seq.num_tokens;
        for pos in first..seq.context_len {
            self.window_slot_mapping
                .push(slot(&table, pos, block_size) as u32);
        }
        seq.window_table = table;
    }

    /// The slot each token's K/V is written to in `group`'s pool.
    pub fn slots(&self, group: KvGroup) -> &[u32] {
        match group {
            KvGroup::Window if !self.window_slot_mapping.is_empty() => &self.window_slot_mapping,
            _ => &self.slot_mapping,
        }
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
        assert_eq!(b.slot_mapping, vec![23, 8, 9]);
        assert_eq!(b.logits_indices, vec![2]);
        assert_eq!(b.seqs[0].context_len, 6);
    }
}
