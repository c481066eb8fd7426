//! What every layer of one forward pass shares: the step's tokens and where each one belongs
//! ([`StepContext`], built once per pass), and which of them a layer produces output for
//! ([`Rows`]).

use super::rope::{Rope, RopeTables};
use crate::batch::Batch;
use crate::kv_layout::KvGroupId;

/// The step as every layer reads it: the batch, each token's sequence, the rotary tables, and
/// the rows an output is wanted for.
#[derive(Debug)]
pub struct StepContext<'a> {
    batch: &'a Batch,
    /// `[T]`: index in `batch.seqs` of each token's sequence.
    token_seq: &'a [usize],
    /// One per distinct rotary embedding of the decoder, in its order: cos and sin
    /// `[T, rotary_dim / 2]` each.
    ropes: Vec<RopeTables>,
    /// Rows that need an output: the logits rows, then the hidden-state rows not already
    /// among them.
    wanted: Vec<usize>,
    /// `[hidden_indices.len()]`: each hidden-state row's index in `wanted`.
    hidden_rows: Vec<usize>,
    /// `[T]`: the last position each token sees, when some token sees past its own (a row of
    /// a bidirectional span sees to the span's end); empty when every token is causal.
    last_visible: Vec<usize>,
}

impl<'a> StepContext<'a> {
    /// The context of `batch` (already validated) whose token `t` belongs to sequence
    /// `token_seq[t]`, for a decoder with the rotary embeddings `ropes`.
    pub fn new(batch: &'a Batch, token_seq: &'a [usize], ropes: &[Rope]) -> Self {
        let mut wanted = batch.logits_indices.clone();
        let hidden_rows = (batch.hidden_indices.iter())
            .map(|&r| {
                wanted.iter().position(|&w| w == r).unwrap_or_else(|| {
                    wanted.push(r);
                    wanted.len() - 1
                })
            })
            .collect();
        Self {
            batch,
            token_seq,
            ropes: ropes.iter().map(|r| r.tables(batch)).collect(),
            wanted,
            hidden_rows,
            last_visible: last_visible(batch),
        }
    }

    /// The step's batch.
    pub fn batch(&self) -> &'a Batch {
        self.batch
    }

    /// Tokens in the step (`T`).
    pub fn num_tokens(&self) -> usize {
        self.batch.num_tokens()
    }

    /// The cos/sin tables of the decoder's rotary embedding number `index`.
    pub fn rope(&self, index: usize) -> &RopeTables {
        &self.ropes[index]
    }

    /// Token `t`'s position in its sequence.
    pub fn position(&self, t: usize) -> usize {
        self.batch.positions[t] as usize
    }

    /// The last position token `t` sees: its own, or in a bidirectional span (an image's
    /// tokens) the span's last.
    pub fn last_visible(&self, t: usize) -> usize {
        self.last_visible
            .get(t)
            .copied()
            .unwrap_or_else(|| self.position(t))
    }

    /// The block table of token `t`'s sequence in KV group `group`'s pool.
    pub fn block_table(&self, t: usize, group: KvGroupId) -> &'a [u32] {
        self.batch.seqs[self.token_seq[t]].table(group)
    }

    /// `[T]`: the slot each token's K/V is written to in KV group `group`'s pool.
    pub fn slots(&self, group: KvGroupId) -> &'a [u32] {
        self.batch.slots(group)
    }

    /// Every token of the step.
    pub fn every_row(&self) -> Rows<'_> {
        Rows::All(self.num_tokens())
    }

    /// The rows the last layer produces: only the [`Self::wanted`] ones when they are fewer
    /// than every row (a prefill chunk). Past the last layer's K/V write nothing reads the
    /// other rows, so its attention output and MLP run for these alone (as llama.cpp does).
    pub fn last_layer_rows(&self) -> Rows<'_> {
        if self.wanted.len() < self.num_tokens() {
            Rows::Only(&self.wanted)
        } else {
            self.every_row()
        }
    }

    /// The rows whose final hidden state is needed, in order: the logits rows
    /// (`batch.logits_indices`), then the hidden-state rows not already among them.
    pub fn wanted(&self) -> &[usize] {
        &self.wanted
    }

    /// `[hidden_indices.len()]`: where each of `batch.hidden_indices` is in [`Self::wanted`].
    pub fn hidden_rows(&self) -> &[usize] {
        &self.hidden_rows
    }
}

/// `[T]`: the last position each token of `batch` sees (its own, or its bidirectional span's
/// last); empty when there are no spans.
fn last_visible(batch: &Batch) -> Vec<usize> {
    if batch.bidirectional_spans.is_empty() {
        return Vec::new();
    }
    let mut last: Vec<usize> = batch.positions.iter().map(|&p| p as usize).collect();
    for span in &batch.bidirectional_spans {
        let end = batch.positions[span.end - 1] as usize;
        last[span.clone()].fill(end);
    }
    last
}

/// The rows of a step a layer computes outputs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows<'a> {
    /// Every one of the step's `T` tokens, in order.
    All(usize),
    /// These tokens, in this order.
    Only(&'a [usize]),
}

impl Rows<'_> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::All(t) => *t,
            Self::Only(rows) => rows.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The step token of the `i`-th row.
    pub fn token(&self, i: usize) -> usize {
        match self {
            Self::All(_) => i,
            Self::Only(rows) => rows[i],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sequences of 3 and 2 tokens, the first wanting logits.
    fn batch() -> Batch {
        let mut batch = Batch::default();
        batch.push_sequence(&[1, 2, 3], 0, vec![0], 4, true);
        batch.push_sequence(&[4, 5], 0, vec![1], 4, false);
        batch
    }

    #[test]
    fn hidden_rows_reuse_logits_rows_and_append_the_others() {
        let mut batch = batch();
        batch.hidden_indices = vec![4, 2, 4];
        let ctx = StepContext::new(&batch, &[0, 0, 0, 1, 1], &[]);
        assert_eq!(ctx.wanted(), [2, 4]);
        assert_eq!(ctx.hidden_rows(), [1, 0, 1]);
        assert_eq!(ctx.last_layer_rows(), Rows::Only(&[2, 4]));
        assert_eq!((ctx.block_table(3, 0), ctx.position(4)), (&[1][..], 1));
    }

    #[test]
    fn a_bidirectional_span_sees_to_its_last_row_and_others_stay_causal() {
        let mut batch = batch();
        assert_eq!(
            StepContext::new(&batch, &[0, 0, 0, 1, 1], &[]).last_visible(1),
            1
        );
        batch.bidirectional_spans.push(0..2);
        let ctx = StepContext::new(&batch, &[0, 0, 0, 1, 1], &[]);
        let last: Vec<_> = (0..5).map(|t| ctx.last_visible(t)).collect();
        assert_eq!(last, [1, 1, 2, 0, 1]);
    }

    #[test]
    fn the_last_layer_keeps_every_row_when_every_row_is_wanted() {
        let mut batch = batch();
        batch.logits_indices = vec![4, 3, 2, 1, 0];
        let ctx = StepContext::new(&batch, &[0, 0, 0, 1, 1], &[]);
        assert_eq!(ctx.last_layer_rows(), Rows::All(5));
        assert_eq!(
            (Rows::All(5).token(3), Rows::Only(&[7, 9]).token(1)),
            (3, 9)
        );
    }
}
