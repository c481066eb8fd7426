//! [`Model`]: a loaded checkpoint and the one entry point that runs a batch through it.

use std::path::Path;

use crate::architectures;
use crate::architectures::registry::SUPPORTED_ARCHITECTURES;
use crate::batch::{slot, Batch, Logits};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::{ForwardError, LoadError};
use crate::files::ModelFiles;
use crate::kernels::matmul::WeightDtype;
use crate::kv_cache::KvCache;
use crate::kv_layout::{blocks_behind, KvGroupId, KvPool, KvSpan};

/// How to load a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// How weight matrices are kept in memory: `None` keeps each one's stored type where sluice
    /// has a format for it (bf16 becomes f32); a dtype converts (or quantizes) every matrix.
    pub dtype: Option<WeightDtype>,
}

/// A loaded causal language model, ready to run batches against a [`KvCache`].
#[derive(Debug)]
pub struct Model {
    config: ModelConfig,
    decoder: Decoder,
}

impl Model {
    /// Loads the model at `path`: a Hugging Face directory (`config.json`, optional
    /// `generation_config.json`, `model.safetensors` or a sharded
    /// `model.safetensors.index.json`) or a GGUF file (see [`ModelFiles`]).
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Model, LoadError> {
        Self::from_files(&ModelFiles::open(path)?, opts)
    }

    /// Loads an opened model.
    pub fn from_files(files: &ModelFiles, opts: &LoadOptions) -> Result<Model, LoadError> {
        let config = files.config().clone();
        let config_path = match files {
            ModelFiles::HuggingFace { dir, .. } => dir.join("config.json"),
            ModelFiles::Gguf(_) => files.path().to_path_buf(),
        };
        if architectures::registry::by_hf_name(&config.architecture).is_none() {
            return Err(LoadError::UnsupportedArchitecture {
                path: config_path,
                architecture: config.architecture,
                supported: SUPPORTED_ARCHITECTURES.join(", "),
            });
        }
        Self::from_source(config, files.source(), opts).map_err(|e| match e {
            LoadError::UnsupportedArchitecture {
                architecture,
                supported,
                ..
            } => LoadError::UnsupportedArchitecture {
                path: config_path,
                architecture,
                supported,
            },
            other => other,
        })
    }

    /// Builds a model from any tensor source (e.g. random weights in a benchmark).
    pub fn from_source(
        config: ModelConfig,
        source: &dyn TensorSource,
        opts: &LoadOptions,
    ) -> Result<Model, LoadError> {
        let decoder = architectures::load(source, &config, opts.dtype).ok_or_else(|| {
            LoadError::UnsupportedArchitecture {
                path: Path::new("config.json").to_path_buf(),
                architecture: config.architecture.clone(),
                supported: SUPPORTED_ARCHITECTURES.join(", "),
            }
        })??;
        Ok(Self { config, decoder })
    }

    /// The model's configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Bytes of weights held in memory.
    pub fn weight_bytes(&self) -> usize {
        self.decoder.weight_bytes()
    }

    /// Distinct experts the last [`Self::forward`] ran, summed over the mixture-of-experts
    /// layers; `None` for a dense model.
    pub fn experts_touched_last_step(&self) -> Option<usize> {
        self.decoder.experts_touched_last_step()
    }

    /// Runs one step: writes every token's K/V into `kv` at its slot and returns logits for
    /// `batch.logits_indices`, `[rows, vocab_size]`, and the final-norm hidden states of
    /// `batch.hidden_indices`. A malformed batch is rejected before any
    /// work, leaving `kv` untouched.
    pub fn forward(&self, batch: &Batch, kv: &mut KvCache) -> Result<Logits, ForwardError> {
        let token_seq = self.validate(batch, kv)?;
        Ok(on_compute_pool(|| {
            self.decoder.forward(batch, &token_seq, kv)
        }))
    }

    /// Checks the batch against the model and cache; returns each token's sequence index.
    fn validate(&self, batch: &Batch, kv: &KvCache) -> Result<Vec<usize>, ForwardError> {
        let c = &self.config;
        if kv.num_layers() != c.num_hidden_layers
            || kv.num_kv_heads() != c.num_key_value_heads
            || kv.head_dim() != c.head_dim
        {
            return Err(ForwardError::CacheMismatch(format!(
                "cache has {} layers x {} kv heads x {} dims, model {} x {} x {}",
                kv.num_layers(),
                kv.num_kv_heads(),
                kv.head_dim(),
                c.num_hidden_layers,
                c.num_key_value_heads,
                c.head_dim
            )));
        }
        let n = batch.num_tokens();
        let inconsistent = |m: String| Err(ForwardError::InconsistentBatch(m));
        if batch.positions.len() != n {
            return inconsistent(format!("{n} tokens, {} positions", batch.positions.len()));
        }
        let mrope = batch.mrope_positions.len();
        if mrope != 0 && mrope != n {
            return inconsistent(format!("{n} tokens, {mrope} multimodal rotary positions"));
        }
        let groups = &kv.pools().groups;
        let tables = batch.slot_mappings.len();
        if n > 0 && (tables == 0 || tables > groups.len()) {
            return inconsistent(format!(
                "slots for {tables} KV groups, the cache has {}",
                groups.len()
            ));
        }
        if let Some((g, slots)) =
            (batch.slot_mappings.iter().enumerate()).find(|(_, s)| s.len() != n)
        {
            return inconsistent(format!("{n} tokens, {} slots in group {g}", slots.len()));
        }
        // A group without tables is addressed through the full group's: its pool must hold
        // every full-group block. (An empty batch addresses nothing.)
        let short =
            (groups.iter().enumerate().skip(tables)).find(|(_, p)| p.num_blocks < kv.num_blocks());
        if let Some((g, pool)) = short.filter(|_| n > 0) {
            return inconsistent(format!(
                "no block tables for KV group {g}, and its pool ({} blocks) is smaller than the \
                 full one ({})",
                pool.num_blocks,
                kv.num_blocks()
            ));
        }
        if let Some((index, &token)) = batch
            .token_ids
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= c.vocab_size)
        {
            return Err(ForwardError::TokenOutOfRange {
                index,
                token,
                vocab_size: c.vocab_size,
            });
        }
        if let Some(&index) = batch.logits_indices.iter().find(|&&i| i >= n) {
            return Err(ForwardError::LogitsIndexOutOfRange {
                index,
                num_tokens: n,
            });
        }
        if let Some(&index) = batch.hidden_indices.iter().find(|&&i| i >= n) {
            return Err(ForwardError::HiddenIndexOutOfRange {
                index,
                num_tokens: n,
            });
        }
        self.validate_input_embeddings(batch)?;
        let block_size = kv.block_size();
        let mut token_seq = Vec::with_capacity(n);
        for (s, seq) in batch.seqs.iter().enumerate() {
            if seq.token_start != token_seq.len() || seq.num_tokens == 0 {
                return inconsistent(format!("sequence {s} does not follow the previous one"));
            }
            if seq.context_len < seq.num_tokens {
                return inconsistent(format!(
                    "sequence {s}: context {} with {} new tokens",
                    seq.context_len, seq.num_tokens
                ));
            }
            if seq.block_tables.len() != tables {
                return inconsistent(format!(
                    "sequence {s} has {} block tables, the batch {tables}",
                    seq.block_tables.len()
                ));
            }
            if seq.context_len > c.max_position_embeddings {
                return Err(ForwardError::PositionOutOfRange {
                    position: seq.context_len - 1,
                    max: c.max_position_embeddings,
                });
            }
            if (seq.token_start + seq.num_tokens) > n {
                return inconsistent(format!("sequence {s} runs past the batch"));
            }
            for (g, pool) in groups.iter().enumerate().take(tables) {
                validate_table(batch, s, g, *pool, block_size)?;
            }
            token_seq.extend(std::iter::repeat_n(s, seq.num_tokens));
        }
        if token_seq.len() != n {
            return inconsistent(format!("sequences cover {} of {n} tokens", token_seq.len()));
        }
        validate_bidirectional_spans(&batch.bidirectional_spans, &token_seq)?;
        Ok(token_seq)
    }

    /// Checks the rows given as embeddings: in the batch, strictly increasing, one hidden-size
    /// vector each.
    fn validate_input_embeddings(&self, batch: &Batch) -> Result<(), ForwardError> {
        let (embeddings, n) = (&batch.input_embeddings, batch.num_tokens());
        let hidden = self.config.hidden_size;
        let inconsistent = |m: String| Err(ForwardError::InconsistentBatch(m));
        if embeddings.values.len() != embeddings.rows.len() * hidden {
            return inconsistent(format!(
                "{} values for {} embedding rows of {hidden}",
                embeddings.values.len(),
                embeddings.rows.len()
            ));
        }
        if let Some(&row) = embeddings.rows.iter().find(|&&r| r >= n) {
            return inconsistent(format!("embedding row {row} of {n} tokens"));
        }
        if embeddings.rows.windows(2).any(|w| w[0] >= w[1]) {
            return inconsistent("embedding rows are not strictly increasing".into());
        }
        Ok(())
    }
}

/// Checks that each bidirectional span is non-empty, within one sequence's rows of the batch,
/// and after the previous one (`token_seq[t]`: token `t`'s sequence).
fn validate_bidirectional_spans(
    spans: &[std::ops::Range<usize>],
    token_seq: &[usize],
) -> Result<(), ForwardError> {
    let mut after = 0;
    for span in spans {
        let within = span.start < span.end
            && span.start >= after
            && span.end <= token_seq.len()
            && token_seq[span.start] == token_seq[span.end - 1];
        if !within {
            return Err(ForwardError::InconsistentBatch(format!(
                "bidirectional span {span:?} is empty, overlaps the previous one or is not \
                 within one sequence's {} rows",
                token_seq.len()
            )));
        }
        after = span.end;
    }
    Ok(())
}

/// Checks sequence `s`'s table in KV group `g`: it covers the context, every block its new
/// tokens read (in a window group, the last `window` positions of each) or write is in the
/// group's pool, and the group's slots are the ones the tokens' positions map to (the attention
/// kernel reads history through the table, so a token must be written where it will be read).
fn validate_table(
    batch: &Batch,
    s: usize,
    g: KvGroupId,
    pool: KvPool,
    block_size: usize,
) -> Result<(), ForwardError> {
    let seq = &batch.seqs[s];
    let table = &seq.block_tables[g];
    let first = seq.context_len - seq.num_tokens;
    if table.len() * block_size < seq.context_len {
        return Err(ForwardError::InconsistentBatch(format!(
            "sequence {s}: context {} with {} blocks of {block_size} in KV group {g}",
            seq.context_len,
            table.len()
        )));
    }
    let used = match pool.span {
        KvSpan::Full => &table[..],
        KvSpan::Window(window) => {
            &table[blocks_behind(first, window, block_size)..seq.context_len.div_ceil(block_size)]
        }
    };
    if let Some(&block) = used.iter().find(|&&b| b as usize >= pool.num_blocks) {
        return Err(ForwardError::SlotOutOfRange {
            slot: block as usize * block_size,
            num_slots: pool.num_blocks * block_size,
        });
    }
    for i in 0..seq.num_tokens {
        let (position, flat) = (first + i, seq.token_start + i);
        let slot = slot(table, position, block_size);
        let (given, expected) = (batch.positions[flat] as usize, batch.slot_mappings[g][flat]);
        if given != position || expected as usize != slot {
            return Err(ForwardError::InconsistentBatch(format!(
                "token {flat}: position {given} slot {expected} in KV group {g} but sequence {s} \
                 implies {position} and {slot}"
            )));
        }
    }
    Ok(())
}

/// Runs `f` on a thread of rayon's global pool, so the hundreds of parallel loops in one
/// forward pass are forked from inside the pool (a worker splits work with its siblings
/// directly) instead of each one being injected from outside and the caller put to sleep until
/// it ends — a futex round trip per matmul, about a tenth of a decode step on two cores.
fn on_compute_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    let mut out = None;
    rayon::scope(|s| s.spawn(|_| out = Some(f())));
    out.expect("the scope ran its task")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_and_cache_can_move_to_the_engine_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<Model>();
        assert_send::<KvCache>();
    }
}
