//! The backend boundary: what the engine asks of whatever runs the model. [`Executor`] runs one
//! forward pass over a [`Batch`] and says what KV spec its cache has; [`ModelExecutor`] is the
//! CPU model and its paged cache, and a GPU backend is another implementation. The scheduler,
//! engine thread and invariance tests run through `dyn Executor` alone (the tests with a fake
//! executor and no weights, in `fake.rs`). Beside it, a [`Proposer`] guesses draft tokens for
//! the step to verify.

mod model;
mod proposer;

pub use model::ModelExecutor;
pub use proposer::{DraftRequest, NgramProposer, Proposer};

#[cfg(test)]
pub(crate) mod fake;

use sluice_model::kv_cache::BlockSizeMismatch;
use sluice_model::{Batch, KvGroupId, KvPools, Logits};
use thiserror::Error;

/// Runs forward passes for the engine; the model and its KV cache live behind it.
pub trait Executor: Send + 'static {
    /// Runs one forward pass; returns logits for `batch.logits_indices` rows.
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError>;
    /// Columns of every logits row.
    fn vocab_size(&self) -> usize;
    /// The most positions a sequence may have, when the backend has such a bound.
    fn context_length(&self) -> Option<usize> {
        None
    }
    /// Tokens per KV block.
    fn block_size(&self) -> usize;
    /// The KV spec: one block pool per KV group (see `sluice_model::kv_layout`), the
    /// full-attention group's first. The engine's block manager keeps a pool of as many blocks
    /// per group and gives every sequence a block table in each.
    fn kv_pools(&self) -> KvPools;
    /// Bytes one block of group `group` holds: the unit a lower tier of the prefix cache (a
    /// disk) stores.
    fn block_bytes(&self, group: KvGroupId) -> usize;
    /// Appends the content of block `block` of group `group` to `out` ([`Executor::block_bytes`]
    /// bytes).
    fn save_block(&self, group: KvGroupId, block: u32, out: &mut Vec<u8>);
    /// Overwrites block `block` of group `group` with bytes [`Executor::save_block`] gave for an
    /// executor of the same model and KV layout.
    fn load_block(
        &mut self,
        group: KvGroupId,
        block: u32,
        bytes: &[u8],
    ) -> Result<(), ExecutorError>;
}

/// A forward pass failed; the sequences in that step finish with `error`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExecutorError {
    /// The model refused the batch.
    #[error(transparent)]
    Model(#[from] sluice_model::ForwardError),
    /// A block's bytes did not fit the KV cache they were loaded into.
    #[error(transparent)]
    KvBlock(#[from] BlockSizeMismatch),
    /// Another executor reported a failure.
    #[error("forward pass failed: {0}")]
    Forward(String),
    /// The model returned logits of the wrong shape.
    #[error("model returned {rows} rows of {vocab} logits; {expected_rows} rows of {expected_vocab} were asked for")]
    WrongLogitsShape {
        /// Rows returned.
        rows: usize,
        /// Columns returned.
        vocab: usize,
        /// Rows asked for.
        expected_rows: usize,
        /// The executor's vocabulary size.
        expected_vocab: usize,
    },
    /// The model returned a different number of hidden-state rows than were asked for.
    #[error("model returned {floats} hidden-state floats for {expected_rows} rows")]
    WrongHiddenShape {
        /// Floats returned.
        floats: usize,
        /// Rows asked for.
        expected_rows: usize,
    },
}
