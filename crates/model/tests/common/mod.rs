//! Shared test support: fixture paths, reference outputs, and a tiny block allocator that
//! drives `Model::forward` the way the engine will.

#![allow(dead_code)]

pub mod qwen2_5_vl;
pub mod qwen_vision;
pub mod vision;

use std::path::PathBuf;

use serde::Deserialize;
use sluice_model::{Batch, KvCache, KvDtype, LoadOptions, Logits, Model, WeightDtype};

/// Every fixture directory under `fixtures/models` with a transformers reference.
pub const FIXTURES: [&str; 16] = [
    "llama",
    "llama3-rope-scaling",
    "llama-odd-head-dim",
    "mistral",
    "qwen2",
    "qwen3",
    // Rows of 256 for the K-quants (scripts/make_gguf_fixtures.py).
    "qwen2-q256",
    "gemma3",
    // Gemma 3 as a GGUF file can state it: every 6th layer global, scores by head_dim^-1/2.
    "gemma3-p6",
    // Mixtures of experts: 8 experts, 2 per token (qwen3-moe's layer 1 dense, qwen2-moe with a
    // shared expert).
    "qwen3-moe",
    "mixtral",
    "olmoe",
    "qwen2-moe",
    // Every layer sparse, rows of 256 for the K-quants (scripts/make_gguf_fixtures.py).
    "qwen3-moe-q256",
    // LongRoPE: the prompt within the original length (phi3), past it with partial rotary (phi4-mini).
    "phi3",
    "phi4-mini",
];

/// The fixtures `scripts/make_gguf_fixtures.py` also converted to GGUF (`fixtures/gguf`).
pub const GGUF_FIXTURES: [&str; 13] = [
    "llama",
    "llama3-rope-scaling",
    "llama-odd-head-dim",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen2-q256",
    // `phi3` files: fused attn_qkv and ffn_up, LongRoPE factors as tensors.
    "phi3",
    "phi4-mini",
    // `llama` files with experts: stacked `ffn_*_exps` tensors sliced per expert.
    "mixtral",
    "qwen3-moe-q256",
    // `olmoe` files: q/k norms over whole projections, top-k weights not renormalised.
    "olmoe",
    // `gemma3` files: sandwich norms under their own names, norm weights holding `1 + w`.
    "gemma3-p6",
];

/// Tokens per KV block in the tests: small, so prompts span several blocks.
pub const BLOCK_SIZE: usize = 4;

/// The path of a fixture model directory.
pub fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

/// What `scripts/make_fixtures.py` recorded from transformers.
#[derive(Deserialize)]
pub struct Reference {
    pub prompt_ids: Vec<u32>,
    /// `[prompt_len, vocab]`.
    pub prompt_logits: Vec<Vec<f32>>,
    pub greedy_tokens: Vec<u32>,
}

pub fn reference(name: &str) -> Reference {
    let text = std::fs::read_to_string(fixture_dir(name).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn load(name: &str, dtype: WeightDtype) -> Model {
    Model::load(&fixture_dir(name), &LoadOptions { dtype: Some(dtype) })
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// An f32 cache with room for a few sequences of the fixtures' lengths.
pub fn cache(model: &Model) -> KvCache {
    cache_of(model, KvDtype::F32)
}

/// A cache of the given storage type with room for a few sequences of the fixtures' lengths.
pub fn cache_of(model: &Model, dtype: KvDtype) -> KvCache {
    KvCache::new(model.config(), dtype, BLOCK_SIZE, 128)
}

/// Hands out blocks from a free list, like a minimal block manager.
pub struct BlockPool {
    free: Vec<u32>,
}

impl BlockPool {
    /// Blocks are handed out in a scrambled order so sequences do not get contiguous storage.
    pub fn new(num_blocks: usize) -> Self {
        let mut free: Vec<u32> = (0..num_blocks as u32).collect();
        free.sort_by_key(|b| (b * 37) % num_blocks as u32);
        Self { free }
    }
}

/// One sequence's state: its tokens, how many are cached, and its blocks.
pub struct Sequence {
    pub tokens: Vec<u32>,
    pub num_computed: usize,
    pub block_table: Vec<u32>,
}

impl Sequence {
    pub fn new(tokens: Vec<u32>) -> Self {
        Self {
            tokens,
            num_computed: 0,
            block_table: Vec::new(),
        }
    }

    /// Adds this sequence's next `n` uncomputed tokens to `batch`, allocating blocks as needed;
    /// logits are requested for the chunk's last token.
    pub fn schedule(&mut self, n: usize, pool: &mut BlockPool, batch: &mut Batch) {
        self.schedule_with_groups(n, pool, batch, Vec::new());
    }

    /// [`Sequence::schedule`] with the sequence's block tables in the cache's other KV groups.
    #[allow(dead_code)] // not every test binary has several groups
    pub fn schedule_with_groups(
        &mut self,
        n: usize,
        pool: &mut BlockPool,
        batch: &mut Batch,
        other_groups: Vec<Vec<u32>>,
    ) {
        let end = self.num_computed + n;
        while self.block_table.len() * BLOCK_SIZE < end {
            self.block_table
                .push(pool.free.pop().expect("test pool exhausted"));
        }
        let mut tables = vec![self.block_table.clone()];
        tables.extend(other_groups);
        batch.push_sequence_tables(
            &self.tokens[self.num_computed..end],
            self.num_computed,
            tables,
            BLOCK_SIZE,
            true,
        );
        self.num_computed = end;
    }
}

/// Runs the whole of `tokens` as one prefill chunk and returns the logits of every position.
pub fn prefill_all_positions(model: &Model, tokens: &[u32]) -> Logits {
    prefill_all_positions_with(model, tokens, KvDtype::F32)
}

/// [`prefill_all_positions`] with a KV cache of the given storage type.
pub fn prefill_all_positions_with(model: &Model, tokens: &[u32], kv_dtype: KvDtype) -> Logits {
    let mut kv = cache_of(model, kv_dtype);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut seq = Sequence::new(tokens.to_vec());
    let mut batch = Batch::default();
    seq.schedule(tokens.len(), &mut pool, &mut batch);
    batch.logits_indices = (0..tokens.len()).collect();
    model.forward(&batch, &mut kv).unwrap()
}

/// Index of the largest logit (first on ties).
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}
