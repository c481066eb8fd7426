//! `Qwen2_5_VLForConditionalGeneration`'s language model: Qwen2's decoder (`qwen2.rs`) with
//! multimodal RoPE. Its `rope_scaling` / `rope_parameters` name an `mrope_section` (the hub's
//! 3B and 7B: `[16, 24, 24]`, also the default when none is named), so each layer's rotary
//! embedding turns the frequency pairs of the three runs by a token's temporal, height and width
//! positions (`Batch::mrope_positions`, from [`crate::mrope::MropePositions`]). Image tokens
//! take their embeddings from the vision encoder through `Batch::input_embeddings` and attend
//! causally, as every other token: transformers' text model builds its plain causal mask
//! whatever the tokens are, so an image needs no bidirectional span.
//!
//! Layouts: the hub's checkpoints keep the text model as `model.*` beside `visual.*` and
//! `lm_head.weight`, and transformers 5.24 saves those names too (its modules are
//! `model.language_model.*` and `model.visual.*`, renamed on save); a save of the module tree as
//! it is (transformers 4.52 to 4.57) has `model.language_model.*`. A tied head (the 3B's) is the
//! embedding whatever the layout.

use super::language_model::{TextModel, TextModelLayout};
use super::qwen2;
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

/// Where a checkpoint keeps the text model's `model.*` tensors and its `lm_head.weight`, most
/// common first.
const LAYOUTS: [TextModelLayout; 2] = [
    TextModelLayout {
        model: "model.",
        head: "lm_head.weight",
    },
    TextModelLayout {
        model: "model.language_model.",
        head: "lm_head.weight",
    },
];

/// Loads the language model of a Qwen2.5-VL checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    qwen2::load(&TextModel::detect(source, &LAYOUTS), config, dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architectures::language_model::tests::{mapped, Names};
    use crate::config::{RopeScaling, WeightCapacity};

    /// Qwen/Qwen2.5-VL-3B-Instruct's config.json (transformers 4.x, flat), its vision settings
    /// abridged.
    const HUB_3B: &str = r#"{
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "vision_start_token_id": 151652,
        "vision_end_token_id": 151653, "vision_token_id": 151654, "image_token_id": 151655,
        "video_token_id": 151656, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 128000,
        "max_window_layers": 70, "model_type": "qwen2_5_vl", "num_attention_heads": 16,
        "num_hidden_layers": 36, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
        "torch_dtype": "bfloat16", "transformers_version": "4.41.2", "use_cache": true,
        "use_sliding_window": false,
        "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 2048,
            "spatial_merge_size": 2, "patch_size": 14, "window_size": 112},
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vocab_size": 151936
    }"#;

    /// The same model as transformers 5 writes it: the text settings nested, RoPE as
    /// `rope_parameters`.
    const NESTED_3B: &str = r#"{
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "image_token_id": 151655,
        "model_type": "qwen2_5_vl", "tie_word_embeddings": true, "dtype": "bfloat16",
        "text_config": {"bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
            "hidden_size": 2048, "intermediate_size": 11008, "max_position_embeddings": 128000,
            "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06, "sliding_window": null, "use_sliding_window": false,
            "layer_types": ["full_attention"],
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                "mrope_section": [16, 24, 24]},
            "vocab_size": 151936, "model_type": "qwen2_5_vl_text"},
        "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 2048}
    }"#;

    fn parse(text: &str) -> Result<ModelConfig, String> {
        ModelConfig::from_json_for(text, WeightCapacity::of_bytes(16 << 30))
    }

    #[test]
    fn the_hubs_flat_config_and_transformers_5s_nested_one_read_alike() {
        let nested = NESTED_3B.replace(
            r#""layer_types": ["full_attention"]"#,
            &format!(
                r#""layer_types": [{}]"#,
                ["\"full_attention\""; 36].join(", ")
            ),
        );
        let (hub, nested) = (parse(HUB_3B).unwrap(), parse(&nested).unwrap());
        assert_eq!(hub.architecture, "Qwen2_5_VLForConditionalGeneration");
        let sizes = |c: &ModelConfig| {
            (
                c.vocab_size,
                c.hidden_size,
                c.num_hidden_layers,
                c.num_attention_heads,
                c.num_key_value_heads,
                c.head_dim,
            )
        };
        assert_eq!(sizes(&hub), (151_936, 2048, 36, 16, 2, 128));
        assert_eq!(sizes(&nested), sizes(&hub));
        for config in [&hub, &nested] {
            assert_eq!(config.rope.theta, 1_000_000.0);
            assert_eq!(config.rope.scaling, RopeScaling::Default);
            assert_eq!(config.rope.mrope_section, Some([16, 24, 24]));
            assert_eq!(config.sliding_window, None);
            assert!(config.qkv_bias && !config.o_bias && config.tie_word_embeddings);
            assert_eq!(config.eos_token_ids, [151_645]);
        }
    }

    #[test]
    fn the_section_defaults_to_the_hubs_and_must_cover_the_pairs() {
        let unnamed = HUB_3B.replace(r#", "mrope_section": [16, 24, 24]"#, "");
        assert_eq!(
            parse(&unnamed).unwrap().rope.mrope_section,
            Some([16, 24, 24])
        );
        let short = HUB_3B.replace("[16, 24, 24]", "[16, 24, 16]");
        let err = parse(&short).unwrap_err();
        assert!(err.contains("64 rotary frequency pairs"), "{err}");
        let four = HUB_3B.replace("[16, 24, 24]", "[16, 24, 16, 8]");
        assert!(parse(&four).unwrap_err().contains("three counts"));
        // A text model's RoPE takes one position.
        let qwen2 = HUB_3B.replace("Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM");
        let qwen2 = qwen2.replace(r#", "mrope_section": [16, 24, 24]"#, "");
        assert_eq!(parse(&qwen2).unwrap().rope.mrope_section, None);
    }

    #[test]
    fn text_names_map_into_each_layout() {
        let saved = Names(&["model.language_model.embed_tokens.weight"]);
        assert_eq!(
            mapped(&saved, &LAYOUTS),
            [
                "model.language_model.layers.0.self_attn.q_proj.weight",
                "lm_head.weight"
            ]
        );
        let hub = Names(&["model.embed_tokens.weight"]);
        assert_eq!(
            mapped(&hub, &LAYOUTS),
            ["model.layers.0.self_attn.q_proj.weight", "lm_head.weight"]
        );
    }
}
