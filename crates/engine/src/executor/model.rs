//! The real [`Executor`]: a loaded [`Model`] and the paged [`KvCache`] it reads and writes.

use sluice_model::{Batch, KvCache, KvGroupId, KvPools, Logits, Model};

use super::{Executor, ExecutorError};

/// Runs forward passes of a model over its own KV cache.
#[derive(Debug)]
pub struct ModelExecutor {
    model: Model,
    kv: KvCache,
}

impl ModelExecutor {
    /// Pairs a model with a KV cache shaped for it (see `KvCache::new` / `KvCache::with_budget`).
    pub fn new(model: Model, kv: KvCache) -> Self {
        ModelExecutor { model, kv }
    }

    /// The model (for its config: vocabulary, EOS ids, context length).
    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl Executor for ModelExecutor {
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError> {
        Ok(self.model.forward(batch, &mut self.kv)?)
    }

    fn vocab_size(&self) -> usize {
        self.model.config().vocab_size
    }

    fn context_length(&self) -> Option<usize> {
        Some(self.model.config().max_position_embeddings)
    }

    fn block_size(&self) -> usize {
        self.kv.block_size()
    }

    fn kv_pools(&self) -> KvPools {
        self.kv.pools().clone()
    }

    fn block_bytes(&self, group: KvGroupId) -> usize {
        self.kv.group_block_bytes(group)
    }

    fn save_block(&self, group: KvGroupId, block: u32, out: &mut Vec<u8>) {
        self.kv.save_block(group, block as usize, out);
    }

    fn load_block(
        &mut self,
        group: KvGroupId,
        block: u32,
        bytes: &[u8],
    ) -> Result<(), ExecutorError> {
        Ok(self.kv.load_block(group, block as usize, bytes)?)
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
