//! The real [`Executor`]: a loaded [`Model`] and the paged [`KvCache`] it reads and writes.

use sluice_model::{Batch, KvCache, Logits, Model};

use crate::engine::{Executor, ExecutorError};

/// Runs batches through a loaded model. The engine thread owns it, and with it the weights and
/// the KV cache.
#[derive(Debug)]
pub struct ModelExecutor {
    model: Model,
    kv: KvCache,
}

impl ModelExecutor {
    /// Pairs a model with the cache its forward passes use.
    pub fn new(model: Model, kv: KvCache) -> Self {
        ModelExecutor { model, kv }
    }

    /// The model's configuration.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl Executor for ModelExecutor {
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError> {
        self.model
            .forward(batch, &mut self.kv)
            .map_err(|e| ExecutorError::Forward(e.to_string()))
    }

    fn vocab_size(&self) -> usize {
        self.model.config().vocab_size
    }

    fn block_size(&self) -> usize {
        self.kv.block_size()
    }

    fn num_blocks(&self) -> usize {
        self.kv.num_blocks()
    }
}
