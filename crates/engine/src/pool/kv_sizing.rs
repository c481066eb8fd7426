//! How many bytes of KV cache each model gets (`--kv-cache-memory`): a fixed figure, or `auto`,
//! sized from the pool's memory budget and the model's own weights and context.
//!
//! The auto rule, per model (vLLM gives its cache what the memory share leaves after the
//! weights; llama.cpp allocates the model's full context; this takes both bounds):
//! - `room` is the memory budget (`--max-memory`) less the model's weights;
//! - `wanted` is what holds [`AUTO_FULL_CONTEXTS`] sequences at the full context length (the
//!   model's own, or `--max-model-len` below it), so the context is never cut where memory
//!   allows it and a few long conversations keep their prefixes cached side by side;
//! - the pool gets `wanted`, but no more than `room` when one model may be loaded at a time, or
//!   `room / 2` when several may (at least half of what is left stays for the others);
//! - and never less than the old fixed default, [`AUTO_FLOOR_BYTES`], where `room` holds it, nor
//!   than two blocks, the least one sequence needs (past the budget, the pool refuses the load
//!   and says by how much).
//!
//! Where the pool holds less than one full-length sequence, the loader lowers the served context
//! to what it holds and warns.

use std::fmt;

use sluice_model::{KvDemand, KvDtype, KvPools, ModelConfig};

use super::budget::{gib, Budget};

/// Full-length sequences an `auto` pool is sized to hold when the budget allows.
pub const AUTO_FULL_CONTEXTS: usize = 4;

/// The least an `auto` pool gets where the budget holds it (the old fixed default, 1 GiB).
pub const AUTO_FLOOR_BYTES: usize = 1 << 30;

/// The memory an `auto` KV pool is sized from: what all loaded models share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryShare {
    /// Bytes all loaded models may hold together (`Budget::max_memory_bytes`).
    pub budget_bytes: usize,
    /// Models that may be loaded at once: those configured, at most `--max-models`.
    pub models: usize,
}

impl MemoryShare {
    /// The share of `budget` for a pool of `configured` models.
    pub fn of(budget: &Budget, configured: usize) -> Self {
        MemoryShare {
            budget_bytes: budget.max_memory_bytes,
            models: configured.min(budget.max_models.unwrap_or(usize::MAX)),
        }
    }
}

/// How much memory each model's KV pool gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvCacheMemory {
    /// Sized per model from the share's budget, the model's weights and its context (the rule
    /// in this module's documentation).
    Auto(MemoryShare),
    /// This many bytes for every model.
    Fixed(usize),
}

impl fmt::Display for KvCacheMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvCacheMemory::Auto(share) => write!(
                f,
                "auto ({} budget, {} model(s) at once)",
                gib(share.budget_bytes),
                share.models
            ),
            KvCacheMemory::Fixed(bytes) => write!(f, "fixed {}", gib(*bytes)),
        }
    }
}

/// A model's KV cache as sizing sees it.
#[derive(Debug, Clone, Copy)]
pub struct KvShape<'a> {
    /// The model's configuration (layers, KV heads, window layers).
    pub config: &'a ModelConfig,
    /// How keys and values are stored.
    pub dtype: KvDtype,
    /// Tokens per block.
    pub block_size: usize,
    /// What the engine runs at once (sizes the window pool).
    pub demand: KvDemand,
    /// The longest context to serve: the model's own, or `--max-model-len` below it.
    pub context: usize,
}

impl KvShape<'_> {
    /// The pools `bytes` holds.
    pub fn pools(&self, bytes: usize) -> KvPools {
        KvPools::for_budget(self.config, self.dtype, self.block_size, bytes, self.demand)
    }

    /// Bytes whose pools give the full group at least `blocks` blocks.
    fn bytes_for_blocks(&self, blocks: usize) -> usize {
        KvPools::budget_for(
            self.config,
            self.dtype,
            self.block_size,
            blocks,
            self.demand,
        )
    }
}

impl KvCacheMemory {
    /// Bytes of KV cache for a model shaped `shape` whose weights take `weights_bytes`.
    pub fn pool_bytes(&self, shape: &KvShape, weights_bytes: usize) -> usize {
        match *self {
            KvCacheMemory::Fixed(bytes) => bytes,
            KvCacheMemory::Auto(share) => {
                let context_blocks = shape.context.div_ceil(shape.block_size);
                let wanted =
                    shape.bytes_for_blocks(AUTO_FULL_CONTEXTS.saturating_mul(context_blocks));
                auto_bytes(share, weights_bytes, wanted, shape.bytes_for_blocks(2))
            }
        }
    }

    /// The flag to raise for a larger pool, for messages.
    pub fn remedy(&self) -> &'static str {
        match self {
            KvCacheMemory::Auto(_) => "raise --max-memory, or set --kv-cache-memory GIB",
            KvCacheMemory::Fixed(_) => "raise --kv-cache-memory",
        }
    }
}

/// The auto rule over plain figures: `wanted` within `room` (half of it when several models
/// share the budget), at least the floor where `room` holds it, and at least `least`.
fn auto_bytes(share: MemoryShare, weights_bytes: usize, wanted: usize, least: usize) -> usize {
    let room = share.budget_bytes.saturating_sub(weights_bytes);
    let cap = if share.models > 1 { room / 2 } else { room };
    let floor = AUTO_FLOOR_BYTES.min(room);
    wanted.min(cap).max(floor).max(least)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::fixture;

    const GIB: usize = 1 << 30;
    /// Llama-3.1-8B's weights at Q4_K_M (4.92 GB).
    const WEIGHTS_8B: usize = 4_920_000_000;

    /// Llama-3.1-8B's KV shape: 32 layers of 8 KV heads of 128, a 131,072-token context.
    fn config_8b() -> ModelConfig {
        let mut config = ModelConfig::from_dir(&fixture("llama")).unwrap();
        config.num_hidden_layers = 32;
        config.num_key_value_heads = 8;
        config.head_dim = 128;
        config.max_position_embeddings = 131_072;
        config
    }

    fn shape_of(config: &ModelConfig, context: usize) -> KvShape<'_> {
        KvShape {
            config,
            dtype: KvDtype::F16,
            block_size: 16,
            demand: KvDemand {
                max_num_seqs: 64,
                max_num_batched_tokens: 512,
            },
            context,
        }
    }

    fn auto(budget_bytes: usize, models: usize) -> KvCacheMemory {
        KvCacheMemory::Auto(MemoryShare {
            budget_bytes,
            models,
        })
    }

    /// Tokens the pools of `memory` hold for `shape`.
    fn tokens(memory: KvCacheMemory, shape: &KvShape, weights: usize) -> usize {
        shape.pools(memory.pool_bytes(shape, weights)).num_blocks() * shape.block_size
    }

    #[test]
    fn an_8b_model_on_a_24_gib_budget_gets_its_full_context() {
        let config = config_8b();
        let shape = shape_of(&config, 131_072);
        // 128 KiB of f16 KV per token: the room after the weights (about 19.4 GiB) holds one
        // full 128K context, not the four wanted, so the pool takes all of it.
        let bytes = auto(24 * GIB, 1).pool_bytes(&shape, WEIGHTS_8B);
        assert_eq!(bytes, 24 * GIB - WEIGHTS_8B);
        assert!(tokens(auto(24 * GIB, 1), &shape, WEIGHTS_8B) >= 131_072);
        // The default budget on a 24 GiB machine (18 GiB) holds Claude Code's ~54K-token prompt
        // twice over; the old fixed 1 GiB held 8,192 tokens.
        assert!(tokens(auto(18 * GIB, 1), &shape, WEIGHTS_8B) > 100_000);
        assert_eq!(tokens(KvCacheMemory::Fixed(GIB), &shape, WEIGHTS_8B), 8_192);
    }

    #[test]
    fn a_budget_with_room_to_spare_gives_four_full_contexts_or_the_floor() {
        let config = config_8b();
        let shape = shape_of(&config, 32_768);
        assert_eq!(
            tokens(auto(64 * GIB, 1), &shape, WEIGHTS_8B),
            AUTO_FULL_CONTEXTS * 32_768
        );
        // A small model or a short context asks for less than the old 1 GiB and still gets
        // that floor: four 512-token contexts would leave 16 streams of 256 tokens waiting
        // for blocks (the 16-stream benchmark fell from 233 to 142 tokens/s that way).
        let tiny = ModelConfig::from_dir(&fixture("llama")).unwrap();
        let tiny_shape = shape_of(&tiny, 256);
        assert_eq!(auto(64 * GIB, 1).pool_bytes(&tiny_shape, 1 << 20), GIB);
        assert!(tokens(auto(64 * GIB, 1), &tiny_shape, 1 << 20) >= 64 * 256);
        let short = shape_of(&config, 512);
        assert_eq!(auto(64 * GIB, 1).pool_bytes(&short, WEIGHTS_8B), GIB);
    }

    #[test]
    fn several_models_leave_half_the_room_after_weights_to_the_others() {
        let config = config_8b();
        let shape = shape_of(&config, 131_072);
        let room = 24 * GIB - WEIGHTS_8B;
        let two = auto(24 * GIB, 2).pool_bytes(&shape, WEIGHTS_8B);
        assert_eq!(two, room / 2);
        let one = auto(24 * GIB, 1).pool_bytes(&shape, WEIGHTS_8B);
        assert_eq!(one, room);
        // Several configured, one loaded at a time (--max-models 1): the whole room again.
        let budget = Budget {
            max_memory_bytes: 24 * GIB,
            max_models: Some(1),
            wait_for_idle: std::time::Duration::ZERO,
            load_timeout: std::time::Duration::from_secs(60),
        };
        assert_eq!(MemoryShare::of(&budget, 5).models, 1);
    }

    #[test]
    fn a_tight_budget_falls_back_to_the_floor_then_to_two_blocks() {
        let config = config_8b();
        let shape = shape_of(&config, 131_072);
        // Room for 3 GiB, two models: half of it, above the floor.
        assert_eq!(
            auto(WEIGHTS_8B + 3 * GIB, 2).pool_bytes(&shape, WEIGHTS_8B),
            3 * GIB / 2
        );
        // Room for 1.5 GiB, two models: the floor (1 GiB) beats the half (0.75 GiB).
        assert_eq!(
            auto(WEIGHTS_8B + 3 * GIB / 2, 2).pool_bytes(&shape, WEIGHTS_8B),
            GIB
        );
        // Room for 100 MiB: all of it, which holds 800 tokens (the loader lowers the context
        // to that, with a warning).
        let small = auto(WEIGHTS_8B + 100 * (1 << 20), 1);
        assert_eq!(tokens(small, &shape, WEIGHTS_8B), 800);
        // No room at all: two blocks, which the pool then refuses as larger than its budget.
        let none = auto(WEIGHTS_8B / 2, 1);
        assert_eq!(tokens(none, &shape, WEIGHTS_8B), 32);
    }

    #[test]
    fn a_fixed_figure_is_used_as_given() {
        let config = config_8b();
        let shape = shape_of(&config, 131_072);
        assert_eq!(KvCacheMemory::Fixed(12345).pool_bytes(&shape, 0), 12345);
    }
}
