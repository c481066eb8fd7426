//! The one table of the architectures sluice implements: for each, its Hugging Face name, the
//! GGUF files it is loaded from, the function that builds its decoder, its mixture-of-experts
//! facts and what its configs mean where they leave something unsaid. Every place that depends
//! on which architecture a model is asks this table ([`by_hf_name`], [`by_gguf_name`]), so the
//! names live here and nowhere else.

use crate::checkpoint::TensorSource;
pub use crate::config::spec::{AttentionBias, ConfigSpec, MoeSpec, SlidingWindow};
use crate::config::{Activation, ModelConfig};
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

use super::{
    gemma3, gemma3_vision, llama, mistral, mixtral, olmoe, phi3, qwen2, qwen2_5_vl, qwen2_moe,
    qwen3, qwen3_moe,
};

/// Builds an architecture's decoder from a checkpoint (each architecture file's `load`).
pub type LoadFn =
    fn(&dyn TensorSource, &ModelConfig, Option<WeightDtype>) -> Result<Decoder, LoadError>;

/// How the configs of `hf_name` read and its experts, for the config parser (`None`: a name
/// the table does not list).
pub fn facts(hf_name: &str) -> Option<(ConfigSpec, Option<MoeSpec>)> {
    by_hf_name(hf_name).map(|a| (a.config, a.moe))
}

/// One architecture.
#[derive(Debug, Clone, Copy)]
pub struct ArchitectureSpec {
    /// `architectures[0]` of its `config.json`, e.g. `LlamaForCausalLM`.
    pub hf_name: &'static str,
    /// Builds its decoder.
    pub load: LoadFn,
    /// What its configs mean where they leave something unsaid.
    pub config: ConfigSpec,
    /// Its experts, for a mixture of experts; `None` for a dense architecture.
    pub moe: Option<MoeSpec>,
    /// The GGUF files it is loaded from, if any.
    pub gguf: Option<GgufSpec>,
    /// The encoder of the images its prompts take; `None` for a text-only architecture.
    pub vision: Option<VisionEncoderKind>,
}

/// Which image encoder an architecture's checkpoints carry beside the language model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisionEncoderKind {
    /// Gemma 3's SigLIP tower and projector (`vision::Gemma3VisionEncoder`): a fixed number of
    /// soft tokens per image between `<start_of_image>` and `<end_of_image>`.
    Gemma3,
    /// Qwen2.5-VL's vision transformer and patch merger: one `<|image_pad|>` token per merged
    /// patch between `<|vision_start|>` and `<|vision_end|>`, as many as the image's size
    /// gives; its tokens take multimodal RoPE positions (`crate::mrope`).
    Qwen2_5Vl,
}

/// The GGUF files an architecture is loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufSpec {
    /// Their `general.architecture`. One name may serve a dense and a mixture-of-experts
    /// architecture; a file with experts (`{arch}.expert_count` > 0) is the latter.
    pub name: &'static str,
    /// llama.cpp's converter stored each head's Q and K rows permuted for its interleaved RoPE.
    pub permuted_qk: bool,
    /// Gemma's sandwich norm names (`post_attention_norm`, `ffn_norm` before the MLP,
    /// `post_ffw_norm`) and norm weights holding `1 + w` (the converter adds the one).
    pub gemma_norms: bool,
    /// For a mixture of experts: whether llama.cpp renormalises the top-k routing weights (its
    /// graph's `norm_w`; the converter writes no `norm_topk_prob`).
    pub renormalize_experts: bool,
    /// The image encoder a llama.cpp projector file (`mmproj-*.gguf`) served beside these
    /// files adds; `None` where the language model takes no images.
    pub mmproj: Option<VisionEncoderKind>,
}

impl GgufSpec {
    /// Files named `name` with none of the quirks.
    const fn plain(name: &'static str) -> GgufSpec {
        GgufSpec {
            name,
            permuted_qk: false,
            gemma_norms: false,
            renormalize_experts: false,
            mmproj: None,
        }
    }
}

/// A dense architecture with the plain config reading and no GGUF files.
const fn dense(hf_name: &'static str, load: LoadFn) -> ArchitectureSpec {
    ArchitectureSpec {
        hf_name,
        load,
        config: ConfigSpec::PLAIN,
        moe: None,
        gguf: None,
        vision: None,
    }
}

/// A mixture of experts following `norm_topk_prob`.
const FOLLOWS_NORM_TOPK_PROB: Option<MoeSpec> = Some(MoeSpec {
    always_renormalize: false,
});

/// How Gemma 3's text configs read.
const GEMMA3_CONFIG: ConfigSpec = ConfigSpec {
    activation: Activation::GeluTanh,
    rope_theta: 1_000_000.0,
    window: SlidingWindow::Interleaved {
        every: 6,
        window: 4096,
        local_rope_theta: 10_000.0,
    },
    qk_norm: true,
    query_pre_attn_scalar: Some(256.0),
    ..ConfigSpec::PLAIN
};

/// transformers' `Gemma3TextConfig` defaults that a nested `text_config` may leave out (the
/// hub's multimodal checkpoints state only their sizes); the RoPE, window pattern and scalar
/// defaults are [`GEMMA3_CONFIG`]'s.
const GEMMA3_TEXT_DEFAULTS: &str = r#"{"vocab_size": 262208, "hidden_size": 2304,
    "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "bos_token_id": 2, "eos_token_id": 1,
    "sliding_window": 4096}"#;

/// How Qwen2's configs read.
const QWEN2_CONFIG: ConfigSpec = ConfigSpec {
    window: SlidingWindow::OptIn,
    attention_bias: AttentionBias::QkvOnly,
    ..ConfigSpec::PLAIN
};

/// Every architecture, by Hugging Face name. To add one, write its file in `architectures/` and
/// a row here.
const TABLE: [ArchitectureSpec; 12] = [
    ArchitectureSpec {
        config: GEMMA3_CONFIG,
        // llama.cpp: local RoPE base `rope.freq_base_swa` (else 10000), layer pattern
        // `attention.sliding_window_pattern` (else every 6th layer global).
        // llama.cpp writes Gemma 3's language model as a `gemma3` file and its vision tower
        // and projector as an mmproj file of projector type `gemma3`.
        gguf: Some(GgufSpec {
            gemma_norms: true,
            mmproj: Some(VisionEncoderKind::Gemma3),
            ..GgufSpec::plain("gemma3")
        }),
        ..dense("Gemma3ForCausalLM", gemma3::load)
    },
    // The language model alone; the image encoder is `vision::Gemma3VisionEncoder`.
    ArchitectureSpec {
        config: ConfigSpec {
            text_config_defaults: Some(GEMMA3_TEXT_DEFAULTS),
            ..GEMMA3_CONFIG
        },
        vision: Some(VisionEncoderKind::Gemma3),
        ..dense("Gemma3ForConditionalGeneration", gemma3_vision::load)
    },
    ArchitectureSpec {
        gguf: Some(GgufSpec {
            permuted_qk: true,
            ..GgufSpec::plain("llama")
        }),
        ..dense("LlamaForCausalLM", llama::load)
    },
    // Its GGUF files are `llama` files (whose model is Llama's).
    dense("MistralForCausalLM", mistral::load),
    ArchitectureSpec {
        moe: Some(MoeSpec {
            always_renormalize: true,
        }),
        // `llama` files with experts; llama.cpp's graph passes `norm_w = true`.
        gguf: Some(GgufSpec {
            permuted_qk: true,
            renormalize_experts: true,
            ..GgufSpec::plain("llama")
        }),
        ..dense("MixtralForCausalLM", mixtral::load)
    },
    ArchitectureSpec {
        config: ConfigSpec {
            qk_norm: true,
            ..ConfigSpec::PLAIN
        },
        moe: FOLLOWS_NORM_TOPK_PROB,
        // OLMoE's `norm_topk_prob` is false, and llama.cpp does not renormalise either.
        gguf: Some(GgufSpec::plain("olmoe")),
        ..dense("OlmoeForCausalLM", olmoe::load)
    },
    ArchitectureSpec {
        gguf: Some(GgufSpec::plain("phi3")),
        ..dense("Phi3ForCausalLM", phi3::load)
    },
    ArchitectureSpec {
        config: QWEN2_CONFIG,
        gguf: Some(GgufSpec::plain("qwen2")),
        ..dense("Qwen2ForCausalLM", qwen2::load)
    },
    ArchitectureSpec {
        moe: FOLLOWS_NORM_TOPK_PROB,
        ..dense("Qwen2MoeForCausalLM", qwen2_moe::load)
    },
    // The language model alone; images enter as embeddings with multimodal RoPE positions.
    ArchitectureSpec {
        config: ConfigSpec {
            // `Qwen2_5_VLTextConfig`'s base and `Qwen2_5_VLRotaryEmbedding`'s split.
            rope_theta: 1_000_000.0,
            mrope_section: Some([16, 24, 24]),
            ..QWEN2_CONFIG
        },
        // llama.cpp's `qwen2vl` files (Qwen2-VL's and Qwen2.5-VL's language model): the split as
        // `rope.dimension_sections`; Q/K rows as the checkpoint's, since llama.cpp's multimodal
        // RoPE rotates halves as transformers does (the converter permutes `llama` files only).
        // The image encoder is a separate projector file (`clip.projector_type`
        // `qwen2.5vl_merger`; Qwen2-VL's `qwen2vl_merger` is not served).
        gguf: Some(GgufSpec {
            mmproj: Some(VisionEncoderKind::Qwen2_5Vl),
            ..GgufSpec::plain("qwen2vl")
        }),
        vision: Some(VisionEncoderKind::Qwen2_5Vl),
        ..dense("Qwen2_5_VLForConditionalGeneration", qwen2_5_vl::load)
    },
    ArchitectureSpec {
        config: ConfigSpec {
            qk_norm: true,
            ..ConfigSpec::PLAIN
        },
        gguf: Some(GgufSpec::plain("qwen3")),
        ..dense("Qwen3ForCausalLM", qwen3::load)
    },
    ArchitectureSpec {
        config: ConfigSpec {
            qk_norm: true,
            ..ConfigSpec::PLAIN
        },
        moe: FOLLOWS_NORM_TOPK_PROB,
        // llama.cpp's graph passes `norm_w = true`.
        gguf: Some(GgufSpec {
            renormalize_experts: true,
            ..GgufSpec::plain("qwen3moe")
        }),
        ..dense("Qwen3MoeForCausalLM", qwen3_moe::load)
    },
];

/// Every architecture sluice implements, in Hugging Face name order.
pub static ARCHITECTURES: &[ArchitectureSpec] = &TABLE;

/// The Hugging Face names of the architectures sluice implements.
pub const SUPPORTED_ARCHITECTURES: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].hf_name;
        i += 1;
    }
    names
};

/// The architecture `config.json` names `name`, if sluice implements it.
pub fn by_hf_name(name: &str) -> Option<&'static ArchitectureSpec> {
    ARCHITECTURES.iter().find(|a| a.hf_name == name)
}

/// The image encoder of the architecture `config.json` names `name`; `None` for a text-only
/// architecture or a name the table does not list.
pub fn vision_encoder(name: &str) -> Option<VisionEncoderKind> {
    by_hf_name(name).and_then(|a| a.vision)
}

/// The image encoder an mmproj file adds to a GGUF model whose config names the architecture
/// `name` (`Gemma3ForCausalLM` for a `gemma3` file); `None` for a language model that takes no
/// images.
pub fn mmproj_encoder(name: &str) -> Option<VisionEncoderKind> {
    by_hf_name(name).and_then(|a| a.gguf).and_then(|g| g.mmproj)
}

/// The architecture a GGUF file whose `general.architecture` is `name` is loaded as: the one
/// with experts when the file has them, the dense one when not.
pub fn by_gguf_name(name: &str, experts: bool) -> Option<&'static ArchitectureSpec> {
    ARCHITECTURES
        .iter()
        .find(|a| a.gguf.is_some_and(|g| g.name == name) && a.moe.is_some() == experts)
}

/// Whether some architecture is loaded from GGUF files named `name` (with or without experts).
pub fn is_gguf_name(name: &str) -> bool {
    gguf_names().contains(&name)
}

/// The GGUF architecture names sluice loads, each once, in table order.
pub fn gguf_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for gguf in ARCHITECTURES.iter().filter_map(|a| a.gguf) {
        if !names.contains(&gguf.name) {
            names.push(gguf.name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hf_name_resolves_to_its_own_entry() {
        for spec in ARCHITECTURES {
            let found = by_hf_name(spec.hf_name).expect(spec.hf_name);
            assert!(std::ptr::eq(found, spec), "{}", spec.hf_name);
        }
        assert_eq!(SUPPORTED_ARCHITECTURES.len(), ARCHITECTURES.len());
        assert!(SUPPORTED_ARCHITECTURES
            .iter()
            .zip(ARCHITECTURES)
            .all(|(name, spec)| *name == spec.hf_name));
        assert!(by_hf_name("GPT2LMHeadModel").is_none());
    }

    #[test]
    fn names_are_unique_and_sorted() {
        let names: Vec<_> = ARCHITECTURES.iter().map(|a| a.hf_name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "Hugging Face names: unique, in order");
        // A GGUF name serves at most one dense and one mixture-of-experts architecture.
        for name in gguf_names() {
            let serving = ARCHITECTURES
                .iter()
                .filter(|a| a.gguf.is_some_and(|g| g.name == name));
            let moe = serving.clone().filter(|a| a.moe.is_some()).count();
            let dense = serving.filter(|a| a.moe.is_none()).count();
            assert!(moe <= 1 && dense <= 1, "{name}: {dense} dense, {moe} MoE");
        }
        let listed = gguf_names();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(listed, sorted, "GGUF names: in order");
    }

    #[test]
    fn every_gguf_name_maps_to_an_entry() {
        let names = gguf_names();
        assert!(!names.is_empty());
        for name in names {
            assert!(is_gguf_name(name));
            let found = [false, true].map(|experts| by_gguf_name(name, experts));
            assert!(found.iter().any(Option::is_some), "{name}");
            for (experts, spec) in [false, true].into_iter().zip(found) {
                if let Some(spec) = spec {
                    assert_eq!(spec.gguf.map(|g| g.name), Some(name));
                    assert_eq!(spec.moe.is_some(), experts, "{name}");
                }
            }
        }
        assert!(!is_gguf_name("gpt2"));
        assert!(by_gguf_name("gpt2", false).is_none());
    }

    #[test]
    fn gguf_quirks_belong_to_the_files_that_have_them() {
        for spec in ARCHITECTURES {
            let Some(gguf) = spec.gguf else { continue };
            // Files sharing a name share how their tensors are stored.
            for other in ARCHITECTURES.iter().filter_map(|a| a.gguf) {
                if other.name == gguf.name {
                    assert_eq!(other.permuted_qk, gguf.permuted_qk, "{}", gguf.name);
                    assert_eq!(other.gemma_norms, gguf.gemma_norms, "{}", gguf.name);
                }
            }
            if spec.moe.is_none() {
                assert!(!gguf.renormalize_experts, "{}", spec.hf_name);
            }
        }
    }
}
