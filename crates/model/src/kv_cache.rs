//! Paged KV storage: a fixed pool of blocks, each holding `block_size` tokens' keys and values
//! for every layer. The engine's block manager decides which blocks a sequence owns; the forward
//! pass writes new tokens to the slots the batch names and reads history through block tables.

use crate::config::ModelConfig;

/// One layer's keys and values, slot-major: `[num_blocks * block_size, num_kv_heads, head_dim]`.
#[derive(Debug)]
pub struct LayerKv {
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
}

/// The paged key/value cache of one model.
#[derive(Debug)]
pub struct KvCache {
    block_size: usize,
    num_blocks: usize,
    num_kv_heads: usize,
    head_dim: usize,
    layers: Vec<LayerKv>,
}

impl KvCache {
    /// A zeroed cache of `num_blocks` blocks of `block_size` tokens, shaped for `config`.
    /// Pages are only touched when first written, so an idle pool costs address space only.
    pub fn new(config: &ModelConfig, block_size: usize, num_blocks: usize) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        let slot_floats = config.num_key_value_heads * config.head_dim;
        let layer_floats = num_blocks * block_size * slot_floats;
        let layers = (0..config.num_hidden_layers)
            .map(|_| LayerKv {
                keys: vec![0.0; layer_floats],
                values: vec![0.0; layer_floats],
            })
            .collect();
        Self {
            block_size,
            num_blocks,
            num_kv_heads: config.num_key_value_heads,
            head_dim: config.head_dim,
            layers,
        }
    }

    /// Bytes one block occupies across all layers (keys and values, f32).
    pub fn bytes_per_block(config: &ModelConfig, block_size: usize) -> usize {
        2 * config.num_hidden_layers
            * block_size
            * config.num_key_value_heads
            * config.head_dim
            * std::mem::size_of::<f32>()
    }

    /// The number of blocks that fit in `budget_bytes`.
    pub fn num_blocks_for_budget(
        config: &ModelConfig,
        block_size: usize,
        budget_bytes: usize,
    ) -> usize {
        budget_bytes / Self::bytes_per_block(config, block_size).max(1)
    }

    /// A cache using at most `budget_bytes`.
    pub fn with_budget(config: &ModelConfig, block_size: usize, budget_bytes: usize) -> Self {
        Self::new(
            config,
            block_size,
            Self::num_blocks_for_budget(config, block_size, budget_bytes),
        )
    }

    /// Blocks in the pool.
    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Token slots in the pool (`num_blocks * block_size`).
    pub fn num_slots(&self) -> usize {
        self.num_blocks * self.block_size
    }

    /// Key/value heads per slot.
    pub(crate) fn num_kv_heads(&self) -> usize {
        self.num_kv_heads
    }

    /// Width of one head.
    pub(crate) fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Layers held.
    pub(crate) fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// One layer's storage.
    pub(crate) fn layer_mut(&mut self, layer: usize) -> &mut LayerKv {
        &mut self.layers[layer]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_sizing_rounds_down_to_whole_blocks() {
        let config = crate::config::tests_support::tiny_config();
        let per_block = KvCache::bytes_per_block(&config, 16);
        assert_eq!(
            per_block,
            2 * config.num_hidden_layers * 16 * config.num_key_value_heads * config.head_dim * 4
        );
        assert_eq!(
            KvCache::num_blocks_for_budget(&config, 16, per_block * 3 + 1),
            3
        );
        let cache = KvCache::with_budget(&config, 16, per_block * 5);
        assert_eq!(
            (cache.num_blocks(), cache.block_size(), cache.num_slots()),
            (5, 16, 80)
        );
    }
}
