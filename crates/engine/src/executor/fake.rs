//! A deterministic stand-in for a model, for scheduler and engine tests.
//!
//! It keeps a real paged cache of token ids: every batch token is written to its slot, and each
//! logits row is a pure function of the sequence's history *as read back through its block
//! table*. A wrong block table, a stale prefix-cache hit or a lost token after preemption therefore
//! changes the output, exactly as it would with a real model.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sluice_model::batch::slot;
use sluice_model::{Batch, KvGroupId, KvPools, Logits};

use super::{Executor, ExecutorError};

/// A fake model over a paged cache of token ids.
#[derive(Debug)]
pub(crate) struct HistoryExecutor {
    vocab_size: usize,
    block_size: usize,
    num_blocks: usize,
    /// `[num_blocks * block_size]`: the token id written to each slot.
    slots: Vec<Option<u32>>,
    /// Fail every forward pass whose batch contains this token id.
    pub(crate) fail_on_token: Option<u32>,
    /// Tokens computed so far, readable after the executor moved into an engine.
    pub(crate) tokens_computed: Arc<AtomicUsize>,
}

impl HistoryExecutor {
    pub(crate) fn new(vocab_size: usize, block_size: usize, num_blocks: usize) -> Self {
        HistoryExecutor {
            vocab_size,
            block_size,
            num_blocks,
            slots: vec![None; num_blocks * block_size],
            fail_on_token: None,
            tokens_computed: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// The fake model's logits after `history`: `[vocab_size]`, peaked enough that sampling at
/// temperature 1 is varied but not uniform.
pub(crate) fn logits_after(history: &[u32], vocab_size: usize) -> Vec<f32> {
    let mut h = DefaultHasher::new();
    history.hash(&mut h);
    let seed = h.finish();
    (0..vocab_size as u64)
        .map(|v| {
            let mut h = DefaultHasher::new();
            (seed, v).hash(&mut h);
            (h.finish() % 1000) as f32 / 150.0
        })
        .collect()
}

/// Greedy continuation of `prompt` by the fake model, as if it ran alone.
pub(crate) fn greedy_alone(
    prompt: &[u32],
    vocab_size: usize,
    max_tokens: usize,
    eos: Option<u32>,
) -> Vec<u32> {
    let mut history = prompt.to_vec();
    let mut out = Vec::new();
    while out.len() < max_tokens {
        let logits = logits_after(&history, vocab_size);
        let best = (0..vocab_size)
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
            .expect("non-empty vocabulary") as u32;
        history.push(best);
        out.push(best);
        if Some(best) == eos {
            break;
        }
    }
    out
}

impl Executor for HistoryExecutor {
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError> {
        if let Some(bad) = self.fail_on_token.filter(|t| batch.token_ids.contains(t)) {
            return Err(ExecutorError::Forward(format!("token {bad} is poison")));
        }
        self.tokens_computed
            .fetch_add(batch.num_tokens(), Ordering::Relaxed);
        for (&token, &slot) in batch.token_ids.iter().zip(batch.slot_mapping()) {
            self.slots[slot as usize] = Some(token);
        }
        let mut data = Vec::with_capacity(batch.logits_indices.len() * self.vocab_size);
        for &row in &batch.logits_indices {
            let seq = (batch.seqs.iter())
                .find(|s| (s.token_start..s.token_start + s.num_tokens).contains(&row))
                .ok_or_else(|| {
                    ExecutorError::Forward("a logits row outside every sequence".into())
                })?;
            let context = seq.context_len - seq.num_tokens + (row - seq.token_start) + 1;
            let history = (0..context)
                .map(|p| self.slots[slot(seq.block_table(), p, self.block_size)])
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| ExecutorError::Forward("read an unwritten KV slot".into()))?;
            data.extend(logits_after(&history, self.vocab_size));
        }
        // A hidden state that depends on the token and its whole history, like a model's.
        let hidden = (batch.hidden_indices.iter())
            .flat_map(|&i| {
                let (token, position) = (batch.token_ids[i], batch.positions[i]);
                [
                    token as f32,
                    position as f32,
                    (token * 31 + position) as f32 % 7.0,
                ]
            })
            .collect();
        Ok(Logits {
            data,
            vocab_size: self.vocab_size,
            hidden,
            hidden_size: 3,
        })
    }

    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn kv_pools(&self) -> KvPools {
        KvPools::full(self.num_blocks)
    }

    /// A slot's token id as four bytes, `u32::MAX` for an unwritten slot.
    fn block_bytes(&self, _group: KvGroupId) -> usize {
        4 * self.block_size
    }

    fn save_block(&self, _group: KvGroupId, block: u32, out: &mut Vec<u8>) {
        let slots = &self.slots[block as usize * self.block_size..][..self.block_size];
        for slot in slots {
            out.extend_from_slice(&slot.unwrap_or(u32::MAX).to_le_bytes());
        }
    }

    fn load_block(
        &mut self,
        group: KvGroupId,
        block: u32,
        bytes: &[u8],
    ) -> Result<(), ExecutorError> {
        if bytes.len() != self.block_bytes(group) {
            return Err(ExecutorError::Forward("a block of the wrong size".into()));
        }
        let slots = &mut self.slots[block as usize * self.block_size..][..self.block_size];
        for (slot, b) in slots.iter_mut().zip(bytes.chunks_exact(4)) {
            let token = u32::from_le_bytes(b.try_into().expect("four bytes"));
            *slot = (token != u32::MAX).then_some(token);
        }
        Ok(())
    }
}
