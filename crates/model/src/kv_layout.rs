//! How a model's KV cache is split into groups of layers, each with a block pool of its own, and
//! how a memory budget is shared between them. This is the KV spec the executor exposes and the
//! engine's block manager mirrors: one pool per group, the same group order on both sides.
//!
//! Layers that attend to every earlier position keep a block for every `block_size` tokens of a
//! sequence for as long as it lives. Sliding-window layers (Gemma 3's local layers, Mistral's
//! window) only ever read the last `window` positions, so they get a pool of their own: the block
//! manager releases a sequence's window blocks once the window has moved past them, and a long
//! chat holds `window` positions of those layers instead of its whole length. With five of six
//! layers local (Gemma 3), the budget then holds several times the context.
//!
//! Group 0 is always the full-attention group (even with no layers in it): its blocks count a
//! sequence's positions and bound the context it can reach. A further kind of group (chunked
//! attention, per-adapter pools) is a new [`KvSpan`] and a new block-manager policy.

use crate::config::ModelConfig;
use crate::kernels::matmul::WeightDtype;

/// How cached keys and values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvDtype {
    /// 32-bit floats: exact copies of the computed keys and values.
    F32,
    /// IEEE half floats: half the memory and memory traffic of f32 (what llama.cpp and vLLM
    /// keep by default for 16-bit models); keys and values are rounded once when written.
    F16,
    /// bfloat16: the memory of f16 with f32's range (8 significant bits against f16's 11). On a
    /// CPU with AVX-512 BF16 attention multiplies in bf16 (queries and softmax weights rounded
    /// to bf16, sums in f32), about twice the attention speed of f32 at long contexts; other
    /// CPUs widen the values and attend in f32.
    Bf16,
}

/// The KV storage that matches how the weights are kept (what `--kv-cache-dtype auto` picks).
impl From<WeightDtype> for KvDtype {
    fn from(weights: WeightDtype) -> Self {
        // Weights kept at full precision keep the cache there too; halves and quantized
        // weights get an f16 cache (as llama.cpp's default).
        if weights == WeightDtype::F32 {
            KvDtype::F32
        } else {
            KvDtype::F16
        }
    }
}

impl KvDtype {
    /// Bytes per stored value.
    pub fn size(self) -> usize {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 | KvDtype::Bf16 => 2,
        }
    }
}

/// Index of a KV group: its place in [`KvLayout::groups`] and [`KvPools::groups`], and of its
/// block table in every [`crate::SeqBatch`].
pub type KvGroupId = usize;

/// The full-attention group, present in every layout.
pub const FULL_GROUP: KvGroupId = 0;

/// What the layers of one group read of a sequence's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvSpan {
    /// Every earlier position: a block per `block_size` tokens, kept for the sequence's life.
    Full,
    /// The last `n` positions (a token's own and the `n - 1` before it): blocks the window no
    /// longer reaches may be released.
    Window(usize),
}

/// Which group each layer keeps its keys and values in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvLayout {
    /// The span of each group, [`FULL_GROUP`] first.
    pub groups: Vec<KvSpan>,
    /// The group of each layer.
    pub layer_groups: Vec<KvGroupId>,
}

impl KvLayout {
    /// The layout of `config`'s layers: sliding-window layers in a window group (spanning the
    /// widest of their windows) when their window is shorter than the context (a window as
    /// long as the context frees nothing); every other layer in the full group.
    pub fn of(config: &ModelConfig) -> Self {
        let windows: Vec<Option<usize>> = (0..config.num_hidden_layers)
            .map(|i| {
                config
                    .layer_window(i)
                    .filter(|&w| w < config.max_position_embeddings)
            })
            .collect();
        let mut groups = vec![KvSpan::Full];
        if let Some(widest) = windows.iter().flatten().copied().max() {
            groups.push(KvSpan::Window(widest));
        }
        let layer_groups = (windows.iter())
            .map(|w| if w.is_some() { 1 } else { FULL_GROUP })
            .collect();
        KvLayout {
            groups,
            layer_groups,
        }
    }

    /// The widest window of the window group (`None`: no window group).
    pub fn window(&self) -> Option<usize> {
        self.groups.iter().find_map(|span| match span {
            KvSpan::Window(w) => Some(*w),
            KvSpan::Full => None,
        })
    }

    /// Layers in `group`.
    pub fn num_layers(&self, group: KvGroupId) -> usize {
        self.layer_groups.iter().filter(|&&g| g == group).count()
    }
}

/// Logical blocks wholly before what a token at `position` reads in a layer seeing `window`
/// positions (its own and the `window - 1` before it): the blocks a window table may have
/// released by the time that token is computed.
pub fn blocks_behind(position: usize, window: usize, block_size: usize) -> usize {
    (position + 1).saturating_sub(window) / block_size
}

/// One group's block pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvPool {
    /// What the group's layers read.
    pub span: KvSpan,
    /// Blocks in the pool.
    pub num_blocks: usize,
}

/// The block pools of a cache, one per group of its [`KvLayout`], in the same order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvPools {
    /// The pools, the full group's first.
    pub groups: Vec<KvPool>,
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

/// Window blocks `demand` can use at most: every sequence holding a full window (and the
/// blocks a window straddles) plus one step's new tokens.
fn window_demand(window: usize, block_size: usize, demand: KvDemand) -> usize {
    // A window is a claim of the model file (up to its context length): saturate, never wrap.
    let per_seq = (window.saturating_sub(1).div_ceil(block_size)).saturating_add(2);
    (demand.max_num_seqs.max(1).saturating_mul(per_seq))
        .saturating_add(demand.max_num_batched_tokens.div_ceil(block_size))
}

impl KvPools {
    /// One full-attention pool of `num_blocks` blocks (a model without window layers).
    pub fn full(num_blocks: usize) -> Self {
        KvPools {
            groups: vec![KvPool {
                span: KvSpan::Full,
                num_blocks,
            }],
        }
    }

    /// A full pool of `num_blocks` blocks and a pool of `window_blocks` blocks for layers that
    /// read the last `window` positions.
    pub fn with_window(num_blocks: usize, window: usize, window_blocks: usize) -> Self {
        let mut pools = Self::full(num_blocks);
        pools.groups.push(KvPool {
            span: KvSpan::Window(window),
            num_blocks: window_blocks,
        });
        pools
    }

    /// Every group with `num_blocks` blocks: every position fits in any pool (tests and tools
    /// that address all groups through the full block table).
    pub fn uniform(config: &ModelConfig, num_blocks: usize) -> Self {
        let groups = (KvLayout::of(config).groups.into_iter())
            .map(|span| KvPool { span, num_blocks })
            .collect();
        KvPools { groups }
    }

    /// Blocks of the full group; they bound the context a sequence can reach.
    pub fn num_blocks(&self) -> usize {
        self.groups[FULL_GROUP].num_blocks
    }

    /// The window group's pool, for a model with sliding-window layers.
    pub fn window(&self) -> Option<KvPool> {
        (self.groups.iter())
            .find(|p| matches!(p.span, KvSpan::Window(_)))
            .copied()
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
        let Some(window) = layout.window() else {
            return KvPools::full(shared);
        };
        let window_blocks = window_demand(window, block_size, demand).min(shared);
        let layer_bytes = |group| block_bytes(config, dtype, block_size, layout.num_layers(group));
        let (full_bytes, window_bytes) = (layer_bytes(FULL_GROUP), layer_bytes(1));
        let num_blocks = match full_bytes {
            // Every layer is a window layer: full blocks cost nothing and only count positions;
            // enough for every sequence at full length.
            0 => (demand.max_num_seqs.max(1))
                .saturating_mul(config.max_position_embeddings.div_ceil(block_size))
                .max(shared),
            _ => (budget_bytes - window_blocks * window_bytes) / full_bytes,
        };
        KvPools::with_window(num_blocks, window, window_blocks)
    }

    /// A budget whose [`KvPools::for_budget`] pools give the full group at least `full_blocks`
    /// blocks, exactly that many when the window pool gets all `demand` can use (always, for a
    /// model without window layers): `full_blocks` blocks of the full layers plus that window
    /// pool. A model whose every layer is a window layer needs only the window pool: its full
    /// blocks cost nothing and cover every running sequence at full length.
    pub fn budget_for(
        config: &ModelConfig,
        dtype: KvDtype,
        block_size: usize,
        full_blocks: usize,
        demand: KvDemand,
    ) -> usize {
        let layout = KvLayout::of(config);
        let layer_bytes = |group| block_bytes(config, dtype, block_size, layout.num_layers(group));
        let window_bytes = layout.window().map_or(0, |window| {
            window_demand(window, block_size, demand) * layer_bytes(1)
        });
        full_blocks
            .saturating_mul(layer_bytes(FULL_GROUP))
            .saturating_add(window_bytes)
    }

    /// Bytes the pools take.
    pub fn bytes(&self, config: &ModelConfig, dtype: KvDtype, block_size: usize) -> usize {
        let layout = KvLayout::of(config);
        (self.groups.iter().enumerate())
            .map(|(g, pool)| {
                pool.num_blocks * block_bytes(config, dtype, block_size, layout.num_layers(g))
            })
            .sum()
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
        assert_eq!(
            (layout.window(), &layout.groups[..]),
            (None, &[KvSpan::Full][..])
        );
        assert_eq!(layout.num_layers(FULL_GROUP), config.num_hidden_layers);
        let per_block = block_bytes(&config, KvDtype::F16, 16, config.num_hidden_layers);
        let pools = KvPools::for_budget(&config, KvDtype::F16, 16, per_block * 10 + 5, DEMAND);
        assert_eq!(
            pools.groups,
            [KvPool {
                span: KvSpan::Full,
                num_blocks: 10
            }]
        );
        // A window as long as the context frees nothing: no window pool.
        let mut long = gemma_like();
        long.sliding_window = Some(4096);
        assert_eq!(KvLayout::of(&long).window(), None);
    }

    #[test]
    fn the_window_pool_takes_what_running_sequences_can_use_and_the_rest_goes_to_full_layers() {
        let config = gemma_like();
        let layout = KvLayout::of(&config);
        assert_eq!(layout.window(), Some(64));
        assert_eq!(layout.groups, [KvSpan::Full, KvSpan::Window(64)]);
        assert_eq!(layout.layer_groups, [1, 1, 1, 1, 1, FULL_GROUP]);
        assert_eq!(layout.num_layers(1), 5);
        let one_layer = block_bytes(&config, KvDtype::F16, 16, 1);
        let budget = one_layer * 6 * 1000;
        let pools = KvPools::for_budget(&config, KvDtype::F16, 16, budget, DEMAND);
        // 4 sequences * (ceil(63 / 16) + 2) + 128 / 16 = 32 window blocks.
        let window = pools.window().unwrap();
        assert_eq!((window.span, window.num_blocks), (KvSpan::Window(64), 32));
        // The full layer gets the rest: 6000 one-layer blocks less 32 * 5.
        assert_eq!(pools.num_blocks(), 6000 - 32 * 5);
        assert!(pools.bytes(&config, KvDtype::F16, 16) <= budget);
        // A small budget: no fewer blocks than one shared pool would have.
        let small = KvPools::for_budget(&config, KvDtype::F16, 16, one_layer * 6 * 10, DEMAND);
        assert_eq!(small.window().unwrap().num_blocks, 10);
        assert_eq!(small.num_blocks(), 10);
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
            (
                shared,
                pools.window().unwrap().num_blocks,
                pools.num_blocks()
            ),
            (2520, 2208, 4240)
        );
        let four = KvPools::for_budget(&config, KvDtype::F16, 16, 4 * gib, demand);
        assert_eq!(
            (
                4 * gib / block_bytes(&config, KvDtype::F16, 16, 26),
                four.num_blocks()
            ),
            (10082, 53392)
        );
    }

    #[test]
    fn a_budget_for_n_full_blocks_gives_the_full_group_n_blocks() {
        let plain = crate::config::tests_support::tiny_config();
        for n in [2, 10, 1000] {
            let budget = KvPools::budget_for(&plain, KvDtype::F16, 16, n, DEMAND);
            let pools = KvPools::for_budget(&plain, KvDtype::F16, 16, budget, DEMAND);
            assert_eq!(pools.num_blocks(), n);
            assert_eq!(pools.bytes(&plain, KvDtype::F16, 16), budget);
        }
        // With a window pool: exactly n once the window pool gets its 32 blocks, at least n
        // below that (the shared-pool bound gives the full layers more).
        let gemma = gemma_like();
        for n in [2, 10, 31, 32, 1000] {
            let budget = KvPools::budget_for(&gemma, KvDtype::F16, 16, n, DEMAND);
            let pools = KvPools::for_budget(&gemma, KvDtype::F16, 16, budget, DEMAND);
            assert!(pools.num_blocks() >= n, "{n}: {pools:?}");
            assert!(pools.bytes(&gemma, KvDtype::F16, 16) <= budget);
            if n >= 32 {
                assert_eq!(pools.num_blocks(), n);
                assert_eq!(pools.bytes(&gemma, KvDtype::F16, 16), budget);
            }
        }
    }

    #[test]
    fn all_window_layers_leave_full_blocks_free_of_memory() {
        let mut config = gemma_like();
        config.layer_types = None;
        let one_layer = block_bytes(&config, KvDtype::F32, 16, 1);
        let pools = KvPools::for_budget(&config, KvDtype::F32, 16, one_layer * 6 * 100, DEMAND);
        assert_eq!(pools.window().unwrap().num_blocks, 32);
        assert_eq!(pools.num_blocks(), 4 * 4096 / 16);
        assert_eq!(pools.bytes(&config, KvDtype::F32, 16), 32 * 6 * one_layer);
    }
}
