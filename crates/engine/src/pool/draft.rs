//! Loading the draft model `--speculative draft:PATH` names, beside each model the pool loads:
//! the same vocabulary is required (token for token where both have it), its weights load as
//! the target's do, and its KV cache has a block for each of the target's full-group blocks (the
//! draft writes at the target's block ids, see `speculation::DraftModel`).

use std::path::Path;

use sluice_model::{KvCache, LoadOptions, Model, ModelFiles};
use sluice_text::Tokenizer;

use super::kv_sizing::KvShape;
use super::loader::{DirectoryLoader, ModelLoadError};
use crate::executor::{Executor, ModelExecutor};
use crate::speculation::ProposerSpec;

/// What a draft model adds to each model's memory: its weights, and its KV bytes per token.
#[derive(Debug, Clone, Copy)]
pub(super) struct DraftFootprint {
    weights: usize,
    /// KV bytes of one block of `block_size` tokens.
    kv_block_bytes: usize,
    block_size: usize,
}

impl DraftFootprint {
    /// Bytes the draft holds beside a model whose KV pool holds `tokens` tokens: its weights
    /// and a cache of as many tokens.
    pub(super) fn bytes(&self, tokens: usize) -> usize {
        self.weights + tokens.div_ceil(self.block_size) * self.kv_block_bytes
    }

    /// (the draft's weight bytes, the share of the model's KV bytes its own pool keeps): the
    /// draft's cache holds as many tokens as the model's, so the two split the bytes by their
    /// bytes per token.
    pub(super) fn split(&self, shape: &KvShape) -> (usize, f64) {
        let own = KvCache::bytes_per_block(shape.config, shape.dtype, shape.block_size) as f64
            / shape.block_size as f64;
        let draft = self.kv_block_bytes as f64 / self.block_size as f64;
        (self.weights, own / (own + draft))
    }
}

/// A loaded draft model: its executor and the memory it holds.
pub(super) struct LoadedDraft {
    pub(super) executor: Box<dyn Executor>,
    pub(super) memory_bytes: usize,
}

impl DirectoryLoader {
    /// The footprint of the draft model the settings name, from its files' headers; `None`
    /// without one or when its files do not open (loading it then fails with the reason).
    pub(super) fn read_draft_footprint(&self) -> Option<DraftFootprint> {
        let speculation = self.settings().engine.speculation.as_ref()?;
        let ProposerSpec::DraftModel(path) = &speculation.proposer else {
            return None;
        };
        let files = ModelFiles::open(path).ok()?;
        let block_size = self.settings().block_size;
        let kv_dtype = self.kv_dtype(&files);
        Some(DraftFootprint {
            weights: files.loaded_bytes(self.settings().dtype),
            kv_block_bytes: KvCache::bytes_per_block(files.config(), kv_dtype, block_size),
            block_size,
        })
    }

    /// The draft model the settings name, loaded for a target of `tokenizer` whose KV pool
    /// holds `tokens` tokens; `None` without one.
    pub(super) fn load_draft(
        &self,
        tokenizer: &Tokenizer,
        tokens: usize,
    ) -> Result<Option<LoadedDraft>, ModelLoadError> {
        let speculation = self.settings().engine.speculation.as_ref();
        let Some(ProposerSpec::DraftModel(path)) = speculation.map(|s| &s.proposer) else {
            return Ok(None);
        };
        let files = ModelFiles::open(path)?;
        let draft_tokenizer = match files.gguf_metadata() {
            Some(metadata) => Tokenizer::from_gguf(metadata)?,
            None => Tokenizer::from_dir(path)?,
        };
        check_vocabulary(path, tokenizer, &draft_tokenizer)?;
        let dtype = self.settings().dtype;
        let model = Model::from_files(&files, &LoadOptions { dtype })?;
        let block_size = self.settings().block_size;
        let kv_dtype = self.kv_dtype(&files);
        let kv = KvCache::new(
            model.config(),
            kv_dtype,
            block_size,
            tokens.div_ceil(block_size),
        );
        let footprint = self.draft().expect("the draft's files opened above");
        let memory_bytes = footprint.bytes(tokens);
        tracing::info!(
            draft = %path.display(),
            weights_mib = model.weight_bytes() / (1 << 20),
            kv_blocks = kv.num_blocks(),
            "draft model loaded for speculative decoding"
        );
        Ok(Some(LoadedDraft {
            executor: Box::new(ModelExecutor::new(model, kv)),
            memory_bytes,
        }))
    }
}

/// A draft's proposals are token ids of the target: both tokenizers must give every id they
/// share the same bytes, and neither may have many ids the other lacks (as llama.cpp checks).
fn check_vocabulary(
    path: &Path,
    target: &Tokenizer,
    draft: &Tokenizer,
) -> Result<(), ModelLoadError> {
    let (a, b) = (target.token_bytes(), draft.token_bytes());
    const MAX_SIZE_DIFFERENCE: usize = 128;
    let refuse = |why: String| {
        Err(ModelLoadError::Other(format!(
            "the draft model {} cannot draft for this model: {why}",
            path.display()
        )))
    };
    if a.len().abs_diff(b.len()) > MAX_SIZE_DIFFERENCE {
        return refuse(format!(
            "vocabularies of {} and {} tokens",
            b.len(),
            a.len()
        ));
    }
    if let Some(id) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        return refuse(format!("token {id} differs between the two vocabularies"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sluice_model::WeightDtype;

    use super::super::loader::ModelLoader;
    use super::super::LoadSettings;
    use super::*;
    use crate::speculation::SpeculationConfig;
    use crate::testkit::fixture;
    use crate::EngineConfig;

    fn loader(draft: &Path) -> DirectoryLoader {
        DirectoryLoader::new(LoadSettings {
            dtype: Some(WeightDtype::F32),
            max_model_len: Some(128),
            engine: EngineConfig {
                speculation: Some(SpeculationConfig {
                    proposer: ProposerSpec::DraftModel(draft.to_owned()),
                    max_draft_tokens: 4,
                    adaptive: true,
                }),
                ..EngineConfig::default()
            },
            ..LoadSettings::with_fixed_kv(16, 1 << 20)
        })
    }

    #[test]
    fn a_draft_loads_beside_the_model_and_counts_in_its_memory() {
        let plain = DirectoryLoader::new(LoadSettings {
            engine: EngineConfig::default(),
            ..loader(&fixture("llama")).settings().clone()
        });
        let alone = plain.load(&fixture("llama")).unwrap();
        alone.engine.shutdown();
        let with_draft = loader(&fixture("llama")).load(&fixture("llama")).unwrap();
        with_draft.engine.shutdown();
        assert!(
            with_draft.memory_bytes > alone.memory_bytes,
            "{} <= {}",
            with_draft.memory_bytes,
            alone.memory_bytes
        );
    }

    #[test]
    fn a_draft_shares_the_kv_budget_by_bytes_per_token() {
        // A fixed KV budget: the model and its draft (the same shape) split it evenly, and the
        // draft's weights come out of it first where the budget is `auto`.
        let fixed = loader(&fixture("llama"));
        let estimate = fixed.estimate_bytes(&fixture("llama")).unwrap();
        let loaded = fixed.load(&fixture("llama")).unwrap();
        loaded.engine.shutdown();
        assert_eq!(
            loaded.memory_bytes, estimate,
            "the estimate is what a load holds"
        );
        let files = ModelFiles::open(&fixture("llama")).unwrap();
        let weights = files.loaded_bytes(Some(WeightDtype::F32));
        let kv = loaded.memory_bytes - 2 * weights;
        assert!(
            kv <= 1 << 20,
            "model and draft KV {kv} within the 1 MiB budget"
        );
        assert!(kv > (1 << 20) - (1 << 18), "and most of it used: {kv}");
    }

    #[test]
    fn a_draft_of_another_vocabulary_is_refused_by_name() {
        // The bundled model's 4,096-token vocabulary against the fixtures' 512.
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/sluice-kjv-mini");
        let error = match loader(&bundled).load(&fixture("llama")) {
            Ok(_) => panic!("a 4096-token vocabulary drafted for a 512-token one"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains("cannot draft for this model"), "{error}");
        assert!(error.contains("sluice-kjv-mini"), "{error}");
    }
}
