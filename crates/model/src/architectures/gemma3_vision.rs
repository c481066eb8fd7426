//! `Gemma3ForConditionalGeneration`'s language model: the Gemma 3 text model of a multimodal
//! checkpoint, whose tensors sit under the multimodal model's prefixes. Its image tokens take
//! their embeddings from the vision encoder ([`crate::vision::Gemma3VisionEncoder`]) through
//! `Batch::input_embeddings`, and attend to each other bidirectionally through
//! `Batch::bidirectional_spans` (see `Batch::push_bidirectional_image`).
//!
//! Layouts: the hub's checkpoints (transformers 4.50) and transformers 5's saves keep the text
//! model as `language_model.model.*` and the head as `language_model.lm_head.weight`;
//! transformers 4.52 to 4.57 saved their module tree as it is, `model.language_model.*` and
//! `lm_head.weight`; a conversion that kept only the text model reads as a text checkpoint
//! (`model.*`). A tied head (Gemma 3's) is the embedding whatever the layout.

use super::gemma3;
use super::language_model::{TextModel, TextModelLayout};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

/// Where a checkpoint keeps the text model's `model.*` tensors and its `lm_head.weight`, most
/// common first.
const LAYOUTS: [TextModelLayout; 3] = [
    TextModelLayout {
        model: "language_model.model.",
        head: "language_model.lm_head.weight",
    },
    TextModelLayout {
        model: "model.language_model.",
        head: "lm_head.weight",
    },
    TextModelLayout {
        model: "model.",
        head: "lm_head.weight",
    },
];

/// Loads the language model of a Gemma 3 multimodal checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    gemma3::load(&TextModel::detect(source, &LAYOUTS), config, dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architectures::language_model::tests::{mapped, Names};
    use crate::config::{LayerType, RopeScaling, WeightCapacity};

    /// google/gemma-3-4b-it's config.json (written by transformers 4.50): the text model's
    /// sizes nested, everything else left to `Gemma3TextConfig`'s defaults.
    const HUB_4B: &str = r#"{
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
        "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
        "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
            "model_type": "gemma3_text", "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
            "model_type": "siglip_vision_model", "num_attention_heads": 16,
            "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}
    }"#;

    #[test]
    fn the_hubs_nested_config_reads_with_the_text_defaults() {
        let config = ModelConfig::from_json_for(HUB_4B, WeightCapacity::of_bytes(16 << 30))
            .expect("valid config");
        assert_eq!(config.architecture, "Gemma3ForConditionalGeneration");
        let sizes = (
            config.vocab_size,
            config.hidden_size,
            config.num_hidden_layers,
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        );
        assert_eq!(sizes, (262_208, 2560, 34, 8, 4, 256));
        assert_eq!(config.sliding_window, Some(1024));
        let types = config.layer_types.as_ref().unwrap();
        assert_eq!((types[4], types[5]), (LayerType::Sliding, LayerType::Full));
        assert_eq!(config.rope.scaling, RopeScaling::Linear { factor: 8.0 });
        assert_eq!(config.rope.theta, 1_000_000.0);
        assert_eq!(config.rope_local.as_ref().map(|r| r.theta), Some(10_000.0));
        assert_eq!(config.query_pre_attn_scalar, Some(256.0));
        assert_eq!(config.eos_token_ids, [1, 106]);
        assert!(config.tie_word_embeddings && config.qk_norm);
        assert_eq!(config.checkpoint_dtype.as_deref(), Some("bfloat16"));
    }

    #[test]
    fn text_names_map_into_each_layout() {
        let hub = Names(&["language_model.model.embed_tokens.weight"]);
        assert_eq!(
            mapped(&hub, &LAYOUTS),
            [
                "language_model.model.layers.0.self_attn.q_proj.weight",
                "language_model.lm_head.weight"
            ]
        );
        let module_tree = Names(&["model.language_model.embed_tokens.weight"]);
        assert_eq!(
            mapped(&module_tree, &LAYOUTS),
            [
                "model.language_model.layers.0.self_attn.q_proj.weight",
                "lm_head.weight"
            ]
        );
    }
}
