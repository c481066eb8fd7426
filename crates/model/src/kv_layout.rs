//! How a model's KV cache is split into block pools, and how a memory budget is shared between
//! them.
//!
//! Layers that attend to every earlier position keep a block for every `block_size` tokens of a
//! sequence for as long as it lives. Sliding-window layers (Gemma 3's local layers, Mistral's
//! window) only ever read the last `window` positions, so they get a pool of their own: the block
//! manager releases a sequence's window blocks once the window has moved past them, and a long
//! chat holds `window` positions of those layers instead of its whole length. With five of six
//! layers local (Gemma 3), the budget then holds several times the context.

use crate::config::ModelConfig;
use crate::kv_cache::KvDtype;

/// Which block pool a layer reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvGroup {
    /// Layers that attend to every earlier position: a block per `block_size` tokens, kept for
    /// the sequence's life.
    Full,
    /// Sliding-window layers: blocks the window no longer reaches are released.
    Window,
}

/// Which layers keep their keys and values in the window pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvLayout {
    /// The widest window among the window layers (`None`: no window pool).
    pub window: Option<usize>,
    /// The group of each layer.
    pub groups: Vec<KvGroup>,
}

impl KvLayout {
    /// The layout of `config`'s layers: sliding-window layers in the window pool when their
    /// window is shorter than the context (a window as long as the context frees nothing).
    pub fn of(config: &ModelConfig) -> Self {
        let windows: Vec<Option<usize>> = (0..config.num_hidden_layers)
            .map(|i| {
                config
                    .layer_window(i)
                    .filter(|&w| w < config.max_position_embeddings)
            })
            .collect();
        let groups = (windows.iter())
            .map(|w| match w {
                Some(_) => KvGroup::Window,
                None => KvGroup::Full,
            })
            .collect();
        KvLayout {
            window: windows.iter().flatten().copied().max(),
            groups,
        }
    }

    /// Layers in `group`.
    pub fn num_layers(&self, group: KvGroup) -> usize {
        self.groups.iter().filter(|&&g| g == group).count()
    }
}

/// Blocks of the window pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvWindow {
    /// Positions a window layer reads: the token's own and the `window - 1` before it.
    pub window: usize,
    /// Blocks in the window pool.
    pub num_blocks: usize,
}

/// Logical blocks wholly before what a token at `position` reads in a layer seeing `window`
/// positions (its own and the `window - 1` before it): the blocks a window table may have
/// released by the time that token is computed.
pub fn blocks_behind(position: usize, window: usize, block_size: usize) -> usize {
    (position + 1).saturating_sub(window) / block_size
}

/// How many blocks each pool of a cache has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvPools {
    /// Blocks of the full-attention pool; they bound the context a sequence can reach.
    pub num_blocks: usize,
    /// The window pool, for a model with sliding-window layers.
    pub window: Option<KvWindow>,
}

/// What the engine runs at once, which bounds what the window pool can be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvDemand {
    /// Sequences running at once.
    pub max_num_seqs: usize,
    /// Tokens computed in one step, over all sequences.
    pub max_num_batched_tokens: usize,
}

/// Bytes one block of `layers` layers takes (keys and values).
pub(crate) fn block_bytes(
    config: &ModelConfig,
    dtype: KvDtype,
    block_size: usize,
    layers: usize,
) -> usize {
    2 * layers * block_size * config.num_key_value_heads * config.head_dim * dtype.size()
}

impl KvPools {
    /// Both pools of `num_blocks` blocks: every position fits in either (tests and tools that
    /// address the window layers through the full block table).
    pub fn uniform(config: &ModelConfig, num_blocks: usize) -> Self {
        let window = KvLayout::of(config).window;
        KvPools {
            num_blocks,
            window: window.map(|window| KvWindow { window, num_blocks }),
        }
    }

    /// The pools `budget_bytes` holds for `config`. Without window layers, one pool as large as
    /// fits. With them, the window pool gets what `demand` can use at most (every sequence
    /// holding a full window plus the step's new tokens), never more blocks than the budget
    /// would give one shared pool, and the full pool the rest — so the split never holds fewer
    /// positions than one pool for all layers would.
    pub fn for_budget(
        config: &ModelConfig,
        dtype: KvDtype,
        block_size: usize,
        budget_bytes: usize,
        demand: KvDemand,
    ) -> Self {
        let layout = KvLayout::of(config);
        let all = block_bytes(config, dtype, block_size, config.num_hidden_layers).max(1);
        let shared = budget_bytes / all;
        let Some(window) = layout.window else {
            return KvPools {
                num_blocks: shared,
                window: None,
            };
        };
        let per_seq = (window - 1).div_ceil(block_size) + 2;
        let wanted = demand.max_num_seqs.max(1) * per_seq
            + demand.max_num_batched_tokens.div_ceil(block_size);
        let window_blocks = wanted.min(shared);
        let window_bytes = block_bytes(
            config,
            dtype,
            block_size,
            layout.num_layers(KvGroup::Window),
        );
        let full_bytes = block_bytes(config, dtype, block_size, layout.num_layers(KvGroup::Full));
        let num_blocks = match full_bytes {
            // Every layer is a window layer: full blocks cost nothing and only count positions;
            // enough for every sequence at full length.
            0 => (demand.max_num_seqs.max(1) * config.max_position_embeddings.div_ceil(block_size))
                .max(shared),
            _ => (budget_bytes - window_blocks * window_bytes) / full_bytes,
        };
        KvPools {
            num_blocks,
            window: Some(KvWindow {
                window,
                num_blocks: window_blocks,
            }),
        }
    }

    /// Bytes the pools take.
    pub fn bytes(&self, config: &ModelConfig, dtype: KvDtype, block_size: usize) -> usize {
        let layout = KvLayout::of(config);
        let full = block_bytes(config, dtype, block_size, layout.num_layers(KvGroup::Full));
        let window = block_bytes(
            config,
            dtype,
            block_size,
            layout.num_layers(KvGroup::Window),
        );
        self.num_blocks * full + self.window.map_or(0, |w| w.num_blocks * window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LayerType;

    fn gemma_like() -> ModelConfig {
        let mut config = crate::config::tests_support::tiny_config();
        config.num_hidden_layers = 6;
        config.max_position_embeddings = 4096;
        config.sliding_window = Some(64);
        let (s, f) = (LayerType::Sliding, LayerType::Full);
        config.layer_types = Some(vec![s, s, s, s, s, f]);
        config
    }

    const DEMAND: KvDemand = KvDemand {
        max_num_seqs: 4,
        max_num_batched_tokens: 128,
    };

    #[test]
    fn layers_without_a_short_window_share_one_pool() {
        let config = crate::config::tests_support::tiny_config();
        let layout = KvLayout::of(&config);
        assert_eq!(layout.window, None);
        assert_eq!(layout.num_layers(KvGroup::Full), config.num_hidden_layers);
        let per_block = block_bytes(&config, KvDtype::F16, 16, config.num_hidden_layers);
        let pools = KvPools::for_budget(&config, KvDtype::F16, 16, per_block * 10 + 5, DEMAND);
        assert_eq!(
            pools,
            KvPools {
                num_blocks: 10,
                window: None
            }
        );
        // A window as long as the context frees nothing: no window pool.
        let mut long = gemma_like();
        long.sliding_window = Some(4096);
        assert_eq!(KvLayout::of(&long).window, None);
    }

    #[test]
    fn the_window_pool_takes_what_running_sequences_can_use_and_the_rest_goes_to_full_layers() {
        let config = gemma_like();
        let layout = KvLayout::of(&config);
        assert_eq!(layout.window, Some(64));
        assert_eq!(layout.num_layers(KvGroup::Window), 5);
        let one_layer = block_bytes(&config, KvDtype::F16, 16, 1);
        let budget = one_layer * 6 * 1000;
        let pools = KvPools::for_budget(&config, KvDtype::F16, 16, budget, DEMAND);
        // 4 sequences * (ceil(63 / 16) + 2) + 128 / 16 = 32 window blocks.
        let window = pools.window.unwrap();
        assert_eq!((window.window, window.num_blocks), (64, 32));
        // The full layer gets the rest: 6000 one-layer blocks less 32 * 5.
        assert_eq!(pools.num_blocks, 6000 - 32 * 5);
        assert!(pools.bytes(&config, KvDtype::F16, 16) <= budget);
        // A small budget: no fewer blocks than one shared pool would have.
        let small = KvPools::for_budget(&config, KvDtype::F16, 16, one_layer * 6 * 10, DEMAND);
        assert_eq!(small.window.unwrap().num_blocks, 10);
        assert_eq!(small.num_blocks, 10);
    }

    #[test]
    fn a_gemma_3_1b_shape_at_the_server_defaults_holds_more_positions_than_one_pool() {
        let mut config = gemma_like();
        config.num_hidden_layers = 26;
        config.num_key_value_heads = 1;
        config.head_dim = 256;
        config.max_position_embeddings = 32768;
        config.sliding_window = Some(512);
        let global = |i: usize| i % 6 == 5;
        config.layer_types = Some(
            (0..26)
                .map(|i| {
                    if global(i) {
                        LayerType::Full
                    } else {
                        LayerType::Sliding
                    }
                })
                .collect(),
        );
        let demand = KvDemand {
            max_num_seqs: 64,
            max_num_batched_tokens: 512,
        };
        let gib = 1usize << 30;
        let shared = gib / block_bytes(&config, KvDtype::F16, 16, 26);
        let pools = KvPools::for_budget(&config, KvDtype::F16, 16, gib, demand);
        // (docs/engine.md quotes these.)
        assert_eq!(
            (shared, pools.window.unwrap().num_blocks, pools.num_blocks),
            (2520, 2208, 4240)
        );
        let four = KvPools::for_budget(&config, KvDtype::F16, 16, 4 * gib, demand);
        assert_eq!(
            (
                4 * gib / block_bytes(&config, KvDtype::F16, 16, 26),
                four.num_blocks
            ),
            (10082, 53392)
        );
    }

    #[test]
    fn all_window_layers_leave_full_blocks_free_of_memory() {
        let mut config = gemma_like();
        config.layer_types = None;
        let one_layer = block_bytes(&config, KvDtype::F32, 16, 1);
        let pools = KvPools::for_budget(&config, KvDtype::F32, 16, one_layer * 6 * 100, DEMAND);
        assert_eq!(pools.window.unwrap().num_blocks, 32);
        assert_eq!(pools.num_blocks, 4 * 4096 / 16);
        assert_eq!(pools.bytes(&config, KvDtype::F32, 16), 32 * 6 * one_layer);
    }
}
