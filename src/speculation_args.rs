//! `--speculative` and its settings: speculative decoding for every model served.

use std::path::PathBuf;

use sluice_engine::executor::NgramProposer;
use sluice_engine::speculation::{ProposerSpec, SpeculationConfig, MAX_DRAFT_TOKENS};

use crate::engine_args::Switch;

/// Speculative decoding flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SpeculationArgs {
    /// Speculative decoding: `ngram` proposes the tokens that followed the latest earlier
    /// occurrence of the output's last few tokens in the prompt or output (prompt lookup);
    /// `draft:PATH` proposes the greedy continuation of a smaller model of the same vocabulary
    /// (a Hugging Face directory or GGUF file, loaded beside every model served, with a KV cache
    /// as large as the model's). Each step verifies the proposals as extra rows. Outputs are the
    /// same, token for token, with or without it; it speeds up outputs the proposer guesses
    /// (code edits, extraction, agents echoing tool results; with a good draft model, most
    /// text), and, adaptively, only where the extra rows pay.
    #[arg(long, value_name = "METHOD", value_parser = parse_method)]
    pub speculative: Option<Method>,
    /// Most draft tokens a sequence verifies in one step.
    #[arg(long, value_name = "N", default_value_t = 16, requires = "speculative")]
    pub num_speculative_tokens: usize,
    /// `on`: each step verifies the draft tokens worth their rows on this machine (measured
    /// step times against each sequence's acceptance so far), so speculation fades out as load
    /// grows; `off`: every proposed token up to --num-speculative-tokens, whatever the load.
    #[arg(long, value_enum, default_value_t = Switch::On, requires = "speculative")]
    pub speculative_adaptive: Switch,
    /// Shortest run of last tokens prompt lookup matches.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "speculative")]
    pub prompt_lookup_min: usize,
    /// Longest run of last tokens prompt lookup matches (the longest that occurs wins).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "speculative")]
    pub prompt_lookup_max: usize,
}

/// Where draft tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// Prompt lookup.
    Ngram,
    /// A draft model.
    Draft(PathBuf),
}

fn parse_method(name: &str) -> Result<Method, String> {
    match name.split_once(':') {
        None if name == "ngram" => Ok(Method::Ngram),
        Some(("draft", path)) if !path.is_empty() => {
            let path = PathBuf::from(path);
            if path.exists() {
                Ok(Method::Draft(path))
            } else {
                Err(format!("no draft model at {}", path.display()))
            }
        }
        _ => Err(format!(
            "unknown speculative method `{name}` (known: ngram, draft:PATH)"
        )),
    }
}

impl SpeculationArgs {
    /// The engine's speculation settings, if speculation is on.
    pub fn config(&self) -> anyhow::Result<Option<SpeculationConfig>> {
        let Some(method) = &self.speculative else {
            return Ok(None);
        };
        anyhow::ensure!(
            (1..=MAX_DRAFT_TOKENS).contains(&self.num_speculative_tokens),
            "--num-speculative-tokens must be between 1 and {MAX_DRAFT_TOKENS}"
        );
        let proposer = match method {
            Method::Draft(path) => ProposerSpec::DraftModel(path.clone()),
            Method::Ngram => {
                let (min_ngram, max_ngram) = (self.prompt_lookup_min, self.prompt_lookup_max);
                anyhow::ensure!(
                    min_ngram >= 1 && min_ngram <= max_ngram && max_ngram <= 64,
                    "--prompt-lookup-min must be at least 1 and at most --prompt-lookup-max (at most 64)"
                );
                ProposerSpec::Ngram(NgramProposer {
                    min_ngram,
                    max_ngram,
                })
            }
        };
        Ok(Some(SpeculationConfig {
            proposer,
            max_draft_tokens: self.num_speculative_tokens,
            adaptive: self.speculative_adaptive == Switch::On,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_and_a_missing_draft_is_named() {
        assert_eq!(parse_method("ngram"), Ok(Method::Ngram));
        let dir = env!("CARGO_MANIFEST_DIR");
        assert_eq!(
            parse_method(&format!("draft:{dir}")),
            Ok(Method::Draft(PathBuf::from(dir)))
        );
        let missing = parse_method("draft:/no/such/model").unwrap_err();
        assert!(missing.contains("/no/such/model"), "{missing}");
        assert!(parse_method("eagle")
            .unwrap_err()
            .contains("ngram, draft:PATH"));
        assert!(parse_method("draft:").is_err());
    }
}
