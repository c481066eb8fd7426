//! The mixture-of-experts part of a `config.json`: how many experts, how many a token uses, how
//! wide each is, whether the chosen weights are renormalised, and which layers stay dense.
//!
//! Dialects: transformers 4.x Qwen3-MoE and OLMoE say `num_experts`, Mixtral
//! `num_local_experts`; transformers 5.x writes Qwen3-MoE's as `num_local_experts` (its
//! `attribute_map` aliases the two). Either name is read for every architecture.

use serde::Deserialize;

/// A sparse (mixture-of-experts) feed-forward block's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoeConfig {
    /// Experts per MoE layer (rows of the router).
    pub num_experts: usize,
    /// Experts each token is sent to (`num_experts_per_tok`).
    pub experts_per_token: usize,
    /// Width of one expert's gated hidden layer (`moe_intermediate_size`, else
    /// `intermediate_size`).
    pub expert_intermediate_size: usize,
    /// Whether the top-k routing weights are divided by their sum (`norm_topk_prob`; Mixtral
    /// always does).
    pub renormalize: bool,
    /// Width of the always-on shared expert (Qwen2-MoE's `shared_expert_intermediate_size`).
    pub shared_expert_intermediate_size: Option<usize>,
    /// Layers that keep a dense MLP of `intermediate_size` (Qwen3-MoE's `mlp_only_layers`),
    /// ascending and without repeats (see [`MoeConfig::dense_layers`]), so asking about a layer
    /// is a binary search, not a scan: a GGUF file may list a dense layer per block.
    pub mlp_only_layers: Vec<usize>,
    /// Every `decoder_sparse_step`-th layer (1-based) is sparse; the others are dense.
    pub decoder_sparse_step: usize,
}

impl MoeConfig {
    /// Whether layer `index` (0-based) runs experts rather than a dense MLP.
    pub fn is_sparse(&self, index: usize) -> bool {
        self.mlp_only_layers.binary_search(&index).is_err()
            && (index + 1).is_multiple_of(self.decoder_sparse_step)
    }

    /// `layers` as [`MoeConfig::mlp_only_layers`] keeps them: ascending, without repeats.
    pub fn dense_layers(mut layers: Vec<usize>) -> Vec<usize> {
        layers.sort_unstable();
        layers.dedup();
        layers
    }
}

/// The raw MoE fields of `config.json`.
#[derive(Deserialize)]
struct RawMoe {
    num_experts: Option<usize>,
    num_local_experts: Option<usize>,
    num_experts_per_tok: Option<usize>,
    moe_intermediate_size: Option<usize>,
    intermediate_size: usize,
    norm_topk_prob: Option<bool>,
    shared_expert_intermediate_size: Option<usize>,
    mlp_only_layers: Option<Vec<usize>>,
    decoder_sparse_step: Option<usize>,
    clip_qkv: Option<f64>,
}

/// The experts of a mixture-of-experts architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeSpec {
    /// `config.json` models renormalise the top-k routing weights whatever `norm_topk_prob`
    /// says (Mixtral); otherwise they follow it (absent: not).
    pub always_renormalize: bool,
}

/// The MoE shape from `config.json` text of an architecture with experts `spec`; `None` for a
/// dense architecture (`spec` `None`: one the registry lists without experts, or does not list).
pub(crate) fn parse(text: &str, spec: Option<MoeSpec>) -> Result<Option<MoeConfig>, String> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let raw: RawMoe = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let num_experts = raw
        .num_experts
        .or(raw.num_local_experts)
        .ok_or("an MoE config needs `num_experts` or `num_local_experts`")?;
    let experts_per_token = raw
        .num_experts_per_tok
        .ok_or("an MoE config needs `num_experts_per_tok`")?;
    if num_experts == 0 || experts_per_token == 0 || experts_per_token > num_experts {
        return Err(format!(
            "num_experts_per_tok {experts_per_token} must be in 1..={num_experts} (num_experts)"
        ));
    }
    if raw.clip_qkv.is_some() {
        return Err("OLMoE's clip_qkv is not supported".into());
    }
    let decoder_sparse_step = raw.decoder_sparse_step.unwrap_or(1);
    if decoder_sparse_step == 0 {
        return Err("decoder_sparse_step is 0".into());
    }
    Ok(Some(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size: raw.moe_intermediate_size.unwrap_or(raw.intermediate_size),
        renormalize: spec.always_renormalize || raw.norm_topk_prob.unwrap_or(false),
        shared_expert_intermediate_size: raw
            .shared_expert_intermediate_size
            .filter(|&width| width > 0),
        mlp_only_layers: MoeConfig::dense_layers(raw.mlp_only_layers.unwrap_or_default()),
        decoder_sparse_step,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`parse`] with the registry's facts of `architecture`.
    fn parse_for(text: &str, architecture: &str) -> Result<Option<MoeConfig>, String> {
        let facts = crate::architectures::registry::facts(architecture);
        parse(text, facts.and_then(|(_, moe)| moe))
    }

    #[test]
    fn both_expert_count_names_read_the_same() {
        let four = r#"{"intermediate_size": 64, "moe_intermediate_size": 32, "num_experts": 8,
            "num_experts_per_tok": 2, "norm_topk_prob": true, "mlp_only_layers": [0],
            "decoder_sparse_step": 1}"#;
        let five = four.replace("\"num_experts\"", "\"num_local_experts\"");
        let a = parse_for(four, "Qwen3MoeForCausalLM").unwrap().unwrap();
        assert_eq!(a, parse_for(&five, "Qwen3MoeForCausalLM").unwrap().unwrap());
        assert_eq!(a.num_experts, 8);
        assert_eq!(a.expert_intermediate_size, 32);
        assert!(a.renormalize);
        assert!(!a.is_sparse(0) && a.is_sparse(1));
    }

    #[test]
    fn mixtral_always_renormalizes_and_uses_intermediate_size() {
        let text = r#"{"intermediate_size": 64, "num_local_experts": 4, "num_experts_per_tok": 2}"#;
        let moe = parse_for(text, "MixtralForCausalLM").unwrap().unwrap();
        assert!(moe.renormalize);
        assert_eq!(moe.expert_intermediate_size, 64);
        assert!((0..4).all(|i| moe.is_sparse(i)));
    }

    #[test]
    fn sparse_step_makes_every_nth_layer_sparse_for() {
        let text = r#"{"intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 1,
            "decoder_sparse_step": 2}"#;
        let moe = parse_for(text, "OlmoeForCausalLM").unwrap().unwrap();
        assert_eq!(
            (0..4).map(|i| moe.is_sparse(i)).collect::<Vec<_>>(),
            [false, true, false, true]
        );
        assert!(!moe.renormalize);
    }

    #[test]
    fn more_experts_per_token_than_experts_is_an_error() {
        let text = r#"{"intermediate_size": 64, "num_experts": 2, "num_experts_per_tok": 3}"#;
        assert!(parse_for(text, "OlmoeForCausalLM").is_err());
        assert_eq!(parse_for(text, "LlamaForCausalLM"), Ok(None));
    }
}
