//! [`ModelConfig`] from GGUF metadata: the `{arch}.*` hyper-parameters llama.cpp's converter
//! writes, with the parts the metadata does not state (biases, q/k norms, a tied head) read from
//! which tensors the file holds.
//!
//! Mixtures of experts: `{arch}.expert_count`, `expert_used_count` and
//! `expert_feed_forward_length` give the shape; a layer is sparse where the file holds its
//! router `blk.N.ffn_gate_inp.weight`. A file with experts is the mixture-of-experts
//! architecture its GGUF name serves in the registry (a `llama` file with experts is Mixtral),
//! and its top-k routing weights are renormalised where llama.cpp's graph does so
//! ([`GgufSpec::renormalize_experts`]; the converter writes no `norm_topk_prob`).
//!
//! Interleaved sliding-window layers ([`SlidingWindow::Interleaved`], Gemma 3): llama.cpp reads
//! the local RoPE base from `rope.freq_base_swa` (else the registry's) and the layer pattern
//! from `attention.sliding_window_pattern` (else the registry's), and scales scores by
//! `head_dim^-½` (the converter writes no `query_pre_attn_scalar`).
//!
//! Multimodal RoPE (`qwen2vl`, an architecture whose [`ConfigSpec::mrope_section`] says its
//! RoPE takes three positions): the runs come from `rope.dimension_sections`, see
//! [`mrope_section`].
//!
//! [`GgufSpec::renormalize_experts`]: crate::architectures::registry::GgufSpec::renormalize_experts

use sluice_gguf::{GgufModel, Metadata};

use crate::architectures::registry::{self, ConfigSpec, SlidingWindow};
use crate::config::{
    LayerType, LongRope, ModelConfig, MoeConfig, RopeConfig, RopeScaling, SizeClaims,
    WeightCapacity,
};

/// The GGUF architecture names sluice loads.
pub fn supported_gguf_architectures() -> Vec<&'static str> {
    registry::gguf_names()
}

/// The config of a GGUF model; `Err` names the missing or malformed key.
pub fn config_from_gguf(model: &GgufModel) -> Result<ModelConfig, String> {
    let meta = model.metadata();
    let e = |err: sluice_gguf::MetadataError| err.to_string();
    let arch = meta.require_str("general.architecture").map_err(e)?;
    if !registry::is_gguf_name(arch) {
        return Err(format!(
            "unsupported GGUF architecture `{arch}` (supported: {})",
            supported_gguf_architectures().join(", ")
        ));
    }
    let key = |name: &str| format!("{arch}.{name}");
    let usize_of = |name: &str| -> Result<Option<usize>, String> {
        Ok(meta.u64(&key(name)).map_err(e)?.map(|v| v as usize))
    };
    let required = |name: &str| -> Result<usize, String> {
        usize_of(name)?.ok_or_else(|| format!("metadata key `{}` is missing", key(name)))
    };
    let hidden_size = required("embedding_length")?;
    let num_attention_heads = required("attention.head_count")?;
    if num_attention_heads == 0 {
        return Err(format!("{} is 0", key("attention.head_count")));
    }
    let num_key_value_heads = usize_of("attention.head_count_kv")?.unwrap_or(num_attention_heads);
    if num_key_value_heads == 0 || !num_attention_heads.is_multiple_of(num_key_value_heads) {
        return Err(format!(
            "head_count ({num_attention_heads}) is not a multiple of head_count_kv ({num_key_value_heads})"
        ));
    }
    let head_dim = usize_of("attention.key_length")?.unwrap_or(hidden_size / num_attention_heads);
    if head_dim == 0 || !head_dim.is_multiple_of(2) {
        return Err(format!(
            "head dimension {head_dim} must be even and non-zero"
        ));
    }
    let rotary_dim = match usize_of("rope.dimension_count")? {
        Some(rotary) if rotary > head_dim || rotary == 0 || !rotary.is_multiple_of(2) => {
            return Err(format!(
                "rope.dimension_count {rotary} must be even, non-zero and at most {head_dim}"
            ));
        }
        Some(rotary) if rotary < head_dim => Some(rotary),
        _ => None,
    };
    let vocab_size = match usize_of("vocab_size")? {
        Some(n) => n,
        None => model
            .tensor_info("token_embd.weight")
            .map(|info| info.shape()[0])
            .ok_or("no vocab_size and no token_embd.weight")?,
    };
    let has = |name: &str| model.tensor_info(name).is_some();
    let num_hidden_layers = required("block_count")?;
    let blocks = blocks_present(model, num_hidden_layers);
    if blocks < num_hidden_layers {
        return Err(format!(
            "{} is {num_hidden_layers}, but the file holds tensors of {blocks} blocks",
            key("block_count")
        ));
    }
    let intermediate_size = required("feed_forward_length")?;
    let experts = match usize_of("expert_count")?.filter(|&n| n > 0) {
        Some(n) => {
            let width = usize_of("expert_feed_forward_length")?.unwrap_or(intermediate_size);
            Some((n, width))
        }
        None => None,
    };
    let capacity = WeightCapacity::of_bytes(model.file_bytes() as u64);
    capacity.check(&SizeClaims {
        vocab: vocab_size,
        hidden: hidden_size,
        layers: num_hidden_layers,
        heads: num_attention_heads,
        kv_heads: num_key_value_heads,
        head_dim,
        intermediate: intermediate_size,
        experts,
    })?;
    let moe = match experts {
        Some((num_experts, width)) => Some(moe_config(
            num_experts,
            required("expert_used_count")?,
            width,
            (0..num_hidden_layers)
                .filter(|i| !has(&format!("blk.{i}.ffn_gate_inp.weight")))
                .collect(),
        )?),
        None => None,
    };
    // The architecture the file's name serves with experts, or without.
    let Some(spec) = registry::by_gguf_name(arch, moe.is_some()) else {
        return Err(match moe {
            Some(_) => format!("`{arch}` files with experts are not supported"),
            None => format!("metadata key `{}` is missing or 0", key("expert_count")),
        });
    };
    let moe = moe.map(|moe| MoeConfig {
        renormalize: spec.gguf.is_some_and(|g| g.renormalize_experts),
        ..moe
    });
    let quirks = spec.config;
    let sliding_window = match quirks.window {
        SlidingWindow::OptIn => None,
        _ => usize_of("attention.sliding_window")?.filter(|&w| w > 0),
    };
    let layer_types = match (quirks.layer_pattern(), sliding_window) {
        (Some(pattern), Some(_)) => {
            let every = usize_of("attention.sliding_window_pattern")?
                .unwrap_or(pattern)
                .max(1);
            let types: Vec<_> = (0..num_hidden_layers)
                .map(|i| match (i + 1) % every {
                    0 => LayerType::Full,
                    _ => LayerType::Sliding,
                })
                .collect();
            // Layers all of one type are the uniform case, as in `config.json`.
            types.contains(&LayerType::Full).then_some(types)
        }
        _ => None,
    };
    let rope_local = match quirks.local_rope_theta() {
        Some(default) => Some(RopeConfig {
            theta: meta
                .f64(&key("rope.freq_base_swa"))
                .map_err(e)?
                .map_or(default, as_written),
            scaling: RopeScaling::Default,
            rotary_dim,
            mrope_section: None,
        }),
        None => None,
    };
    let ids = |name: &str| -> Result<Option<u32>, String> {
        Ok(meta
            .u64(&format!("tokenizer.ggml.{name}"))
            .map_err(e)?
            .and_then(|v| u32::try_from(v).ok()))
    };
    let mut eos_token_ids = Vec::new();
    for name in ["eos_token_id", "eot_token_id", "eom_token_id"] {
        if let Some(id) = ids(name)? {
            if !eos_token_ids.contains(&id) {
                eos_token_ids.push(id);
            }
        }
    }
    Ok(ModelConfig {
        vocab_size,
        hidden_size,
        intermediate_size,
        num_hidden_layers,
        num_attention_heads,
        num_key_value_heads,
        head_dim,
        max_position_embeddings: usize_of("context_length")?.unwrap_or(2048),
        rms_norm_eps: meta
            .f64(&key("attention.layer_norm_rms_epsilon"))
            .map_err(e)?
            .map_or(1e-6, as_written),
        hidden_activation: quirks.activation,
        rope: RopeConfig {
            rotary_dim,
            mrope_section: mrope_section(meta, arch, &quirks, rotary_dim.unwrap_or(head_dim) / 2)?,
            ..rope_config(meta, arch, model)?
        },
        tie_word_embeddings: !has("output.weight"),
        qkv_bias: has("blk.0.attn_q.bias"),
        o_bias: has("blk.0.attn_output.bias"),
        mlp_bias: has("blk.0.ffn_down.bias"),
        qk_norm: has("blk.0.attn_q_norm.weight"),
        sliding_window,
        layer_types,
        rope_local,
        query_pre_attn_scalar: quirks.query_pre_attn_scalar.map(|_| head_dim as f64),
        final_logit_softcapping: meta
            .f64(&key("final_logit_softcapping"))
            .map_err(e)?
            .map(as_written),
        attn_logit_softcapping: None,
        eos_token_ids,
        bos_token_id: ids("bos_token_id")?,
        checkpoint_dtype: None,
        moe,
        architecture: spec.hf_name.to_string(),
    })
}

/// How many of the blocks `0..claimed` have at least one tensor (`blk.N.…`) in the file: a
/// file cannot have more layers than that, whatever `block_count` says. Linear in the tensors.
fn blocks_present(model: &GgufModel, claimed: usize) -> usize {
    let block = |name: &str| -> Option<usize> {
        let (number, _) = name.strip_prefix("blk.")?.split_once('.')?;
        number.parse().ok().filter(|&n| n < claimed)
    };
    let found: std::collections::HashSet<usize> =
        model.tensors().filter_map(|t| block(&t.name)).collect();
    found.len()
}

/// The experts of a file whose metadata names `num_experts`; `dense_layers` are those without a
/// router tensor. Whether the top-k routing weights are renormalised is the architecture's, set
/// once it is known.
fn moe_config(
    num_experts: usize,
    experts_per_token: usize,
    expert_intermediate_size: usize,
    dense_layers: Vec<usize>,
) -> Result<MoeConfig, String> {
    if experts_per_token == 0 || experts_per_token > num_experts {
        return Err(format!(
            "expert_used_count {experts_per_token} must be in 1..={num_experts} (expert_count)"
        ));
    }
    Ok(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size,
        renormalize: false,
        shared_expert_intermediate_size: None,
        mlp_only_layers: MoeConfig::dense_layers(dense_layers),
        decoder_sparse_step: 1,
    })
}

/// RoPE base and scaling. Llama 3.1 files carry the llama3 scaling as a `rope_freqs.weight`
/// tensor of per-frequency divisors, which is what [`RopeScaling::FreqFactors`] applies.
fn rope_config(meta: &Metadata, arch: &str, model: &GgufModel) -> Result<RopeConfig, String> {
    let e = |err: sluice_gguf::MetadataError| err.to_string();
    let theta = meta
        .f64(&format!("{arch}.rope.freq_base"))
        .map_err(e)?
        .map_or(10_000.0, as_written);
    let scaling_type = meta
        .str(&format!("{arch}.rope.scaling.type"))
        .map_err(e)?
        .unwrap_or("none");
    let f32s = |name: &str| -> Result<Option<Vec<f32>>, String> {
        let Some((info, bytes)) = model.tensor(name) else {
            return Ok(None);
        };
        if info.ggml_type != sluice_gguf::GgmlType::F32 {
            return Err(format!("{name} is {}, expected f32", info.ggml_type));
        }
        Ok(Some(
            (bytes.chunks_exact(4))
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ))
    };
    let long = (f32s("rope_factors_short.weight")?).zip(f32s("rope_factors_long.weight")?);
    let scaling = match (scaling_type, f32s("rope_freqs.weight")?, long) {
        (_, Some(factors), _) => RopeScaling::FreqFactors(factors),
        // Phi-3's LongRoPE: llama.cpp's converter writes both factor sets as tensors.
        (_, None, Some((short_factor, long_factor))) => {
            let key = format!("{arch}.rope.scaling.original_context_length");
            let original = meta.u64(&key).map_err(e)?;
            RopeScaling::LongRope(LongRope {
                short_factor,
                long_factor,
                original_max_position_embeddings: original
                    .ok_or_else(|| format!("metadata key `{key}` is missing"))?
                    as usize,
                attention_factor: meta
                    .f64(&format!("{arch}.rope.scaling.attn_factor"))
                    .map_err(e)?
                    .map_or(1.0, |f| f as f32),
            })
        }
        ("none", None, None) => RopeScaling::Default,
        ("linear", None, None) => {
            let key = format!("{arch}.rope.scaling.factor");
            RopeScaling::Linear {
                factor: meta
                    .f64(&key)
                    .map_err(e)?
                    .ok_or_else(|| format!("metadata key `{key}` is missing"))?,
            }
        }
        (other, None, None) => {
            return Err(format!("unsupported RoPE scaling type `{other}`"));
        }
    };
    Ok(RopeConfig {
        theta,
        scaling,
        rotary_dim: None,
        mrope_section: None,
    })
}

/// Multimodal RoPE's temporal, height and width runs of the `pairs` frequency pairs, for an
/// architecture whose RoPE takes three positions (`None` for any other):
/// `{arch}.rope.dimension_sections`, which llama.cpp's converter writes as the config's
/// `mrope_section` padded with zeros to four numbers, and which llama.cpp requires. llama.cpp
/// turns pair `i` by the position of the run that `i mod (sum of the runs)` falls in, consecutive
/// runs as transformers' split; its fourth run would turn by a fourth position, which sluice does
/// not have. So the file must state three runs covering the pairs exactly (the check
/// `config.json`'s `mrope_section` gets) and a fourth of zero.
fn mrope_section(
    meta: &Metadata,
    arch: &str,
    spec: &ConfigSpec,
    pairs: usize,
) -> Result<Option<[usize; 3]>, String> {
    if spec.mrope_section.is_none() {
        return Ok(None);
    }
    let key = format!("{arch}.rope.dimension_sections");
    let sections = (meta.i64_array(&key).map_err(|e| e.to_string())?)
        .ok_or_else(|| format!("metadata key `{key}` is missing"))?;
    let runs: Option<Vec<usize>> = sections.iter().map(|&s| usize::try_from(s).ok()).collect();
    let covered =
        |runs: [usize; 3]| runs.iter().try_fold(0usize, |a, &r| a.checked_add(r)) == Some(pairs);
    match runs.as_deref() {
        Some(&[t, h, w] | &[t, h, w, 0]) if covered([t, h, w]) => Ok(Some([t, h, w])),
        _ => Err(format!(
            "{key} {sections:?} must be three runs adding up to the {pairs} rotary frequency \
             pairs (half the rotated features of a head), then 0"
        )),
    }
}

/// An f32 metadata value as the decimal the converter was given (`1e-5`, not the f32 nearest
/// to it widened, `9.9999997e-6`): the shortest decimal that rounds to the same f32.
fn as_written(value: f64) -> f64 {
    (value as f32).to_string().parse().unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::Activation;

    /// A metadata value.
    #[derive(Clone, Copy)]
    enum Meta {
        U32(u32),
        U64(u64),
        Str(&'static str),
        I32s(&'static [i32]),
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u64).to_le_bytes().to_vec();
        v.extend(s.as_bytes());
        v
    }

    /// A GGUF v3 file holding `general.architecture = arch`, the hyper-parameters every config
    /// needs, and `extra` (`{arch}.` prefixed), without tensors.
    fn header(tag: &str, arch: &'static str, extra: &[(&str, Meta)]) -> PathBuf {
        let mut pairs = vec![("general.architecture".to_string(), Meta::Str(arch))];
        let required = [
            ("embedding_length", 8),
            ("attention.head_count", 2),
            ("block_count", 12),
            ("feed_forward_length", 16),
            ("vocab_size", 32),
        ];
        for (key, value) in required {
            pairs.push((format!("{arch}.{key}"), Meta::U32(value)));
        }
        pairs.extend(
            extra
                .iter()
                .map(|&(key, value)| (format!("{arch}.{key}"), value)),
        );
        // The tensors a config is checked against: a norm per block, and the embedding.
        let mut tensors: Vec<(String, Vec<u64>)> = (0..12)
            .map(|i| (format!("blk.{i}.attn_norm.weight"), vec![8]))
            .collect();
        tensors.push(("token_embd.weight".into(), vec![8, 32]));
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((tensors.len() as u64).to_le_bytes());
        out.extend((pairs.len() as u64).to_le_bytes());
        for (key, value) in pairs {
            out.extend(string(&key));
            match value {
                Meta::U32(v) => {
                    out.extend(4u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::U64(v) => {
                    out.extend(10u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::Str(s) => {
                    out.extend(8u32.to_le_bytes());
                    out.extend(string(s));
                }
                Meta::I32s(values) => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(5u32.to_le_bytes());
                    out.extend((values.len() as u64).to_le_bytes());
                    values.iter().for_each(|v| out.extend(v.to_le_bytes()));
                }
            }
        }
        let mut offset = 0u64;
        for (name, dims) in &tensors {
            out.extend(string(name));
            out.extend((dims.len() as u32).to_le_bytes());
            dims.iter().for_each(|d| out.extend(d.to_le_bytes()));
            out.extend(0u32.to_le_bytes()); // f32
            out.extend(offset.to_le_bytes());
            offset += (dims.iter().product::<u64>() * 4).next_multiple_of(32);
        }
        out.resize(out.len().next_multiple_of(32), 0);
        out.resize(out.len() + offset as usize, 0);
        let path = std::env::temp_dir().join(format!(
            "sluice-model-gguf-config-{tag}-{}.gguf",
            std::process::id()
        ));
        std::fs::write(&path, out).unwrap();
        path
    }

    fn config(
        tag: &str,
        arch: &'static str,
        extra: &[(&str, Meta)],
    ) -> Result<ModelConfig, String> {
        let path = header(tag, arch, extra);
        let config = config_from_gguf(&GgufModel::open_header(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        config
    }

    const EXPERTS: [(&str, Meta); 2] = [
        ("expert_count", Meta::U32(4)),
        ("expert_used_count", Meta::U32(2)),
    ];

    #[test]
    fn an_unknown_architecture_lists_the_supported_ones() {
        assert_eq!(
            config("unknown", "gpt2", &[]).unwrap_err(),
            "unsupported GGUF architecture `gpt2` (supported: gemma3, llama, olmoe, phi3, qwen2, \
             qwen2vl, qwen3, qwen3moe)"
        );
    }

    #[test]
    fn experts_pick_the_architecture_a_name_serves() {
        let llama = config("llama", "llama", &[]).unwrap();
        assert_eq!(
            (llama.architecture.as_str(), llama.moe),
            ("LlamaForCausalLM", None)
        );
        let mixtral = config("mixtral", "llama", &EXPERTS).unwrap();
        assert_eq!(mixtral.architecture, "MixtralForCausalLM");
        assert!(mixtral.moe.unwrap().renormalize);
        let olmoe = config("olmoe", "olmoe", &EXPERTS).unwrap();
        assert_eq!(olmoe.architecture, "OlmoeForCausalLM");
        assert!(!olmoe.moe.unwrap().renormalize);
        assert!(
            config("qwen3moe", "qwen3moe", &EXPERTS)
                .unwrap()
                .moe
                .unwrap()
                .renormalize
        );
        assert_eq!(
            config("dense-olmoe", "olmoe", &[]).unwrap_err(),
            "metadata key `olmoe.expert_count` is missing or 0"
        );
        assert_eq!(
            config("sparse-qwen2", "qwen2", &EXPERTS).unwrap_err(),
            "`qwen2` files with experts are not supported"
        );
    }

    #[test]
    fn windows_follow_the_architecture() {
        let window = [("attention.sliding_window", Meta::U32(4))];
        assert_eq!(
            config("window-llama", "llama", &window)
                .unwrap()
                .sliding_window,
            Some(4)
        );
        assert_eq!(
            config("window-qwen2", "qwen2", &window)
                .unwrap()
                .sliding_window,
            None
        );
        let gemma = config("window-gemma3", "gemma3", &window).unwrap();
        assert_eq!(gemma.hidden_activation, Activation::GeluTanh);
        assert_eq!(gemma.query_pre_attn_scalar, Some(4.0));
        assert_eq!(gemma.rope_local.map(|r| r.theta), Some(10_000.0));
        let types = gemma.layer_types.unwrap();
        assert_eq!(
            (0..12)
                .filter(|&i| types[i] == LayerType::Full)
                .collect::<Vec<_>>(),
            [5, 11]
        );
        let qwen3 = config("plain-qwen3", "qwen3", &window).unwrap();
        assert_eq!(qwen3.hidden_activation, Activation::Silu);
        assert_eq!(
            (qwen3.query_pre_attn_scalar, qwen3.rope_local),
            (None, None)
        );
    }

    #[test]
    fn qwen2vl_files_take_the_three_runs_of_the_padded_sections() {
        // Heads of 4 features: 2 frequency pairs.
        let sections = |values| [("rope.dimension_sections", Meta::I32s(values))];
        let vl = config("qwen2vl", "qwen2vl", &sections(&[1, 1, 0, 0])).unwrap();
        assert_eq!(vl.architecture, "Qwen2_5_VLForConditionalGeneration");
        assert_eq!(vl.rope.mrope_section, Some([1, 1, 0]));
        assert_eq!(
            vl.rope.theta, 10_000.0,
            "the file's base, else llama.cpp's default"
        );
        assert_eq!(vl.sliding_window, None);
        let three = config("qwen2vl-3", "qwen2vl", &sections(&[0, 1, 1])).unwrap();
        assert_eq!(three.rope.mrope_section, Some([0, 1, 1]));
        // llama.cpp requires the key; sluice has no fourth position, and the runs must cover
        // the pairs.
        assert_eq!(
            config("qwen2vl-none", "qwen2vl", &[]).unwrap_err(),
            "metadata key `qwen2vl.rope.dimension_sections` is missing"
        );
        for (tag, bad) in [
            ("fourth", &[1, 0, 0, 1][..]),
            ("short", &[1, 0, 0, 0]),
            ("long", &[1, 1, 1, 0]),
            ("negative", &[-1, 3, 0, 0]),
            ("five", &[1, 1, 0, 0, 0]),
        ] {
            let err = config(&format!("qwen2vl-{tag}"), "qwen2vl", &sections(bad)).unwrap_err();
            assert!(
                err.contains("must be three runs adding up to the 2"),
                "{tag}: {err}"
            );
        }
        // A text model's RoPE takes one position, whatever the file says.
        let qwen2 = config("qwen2-sections", "qwen2", &sections(&[1, 1, 0, 0])).unwrap();
        assert_eq!(qwen2.rope.mrope_section, None);
    }

    #[test]
    fn a_block_count_beyond_the_blocks_in_the_file_is_refused_at_once() {
        // Later keys win (the metadata is a map), so these override the helper's 12 blocks.
        for (count, experts) in [(1u64 << 32, false), (1 << 63, false), (1_000_000, true)] {
            let mut extra = vec![("block_count", Meta::U64(count))];
            if experts {
                extra.extend(EXPERTS);
            }
            let started = std::time::Instant::now();
            let err = config(&format!("blocks-{count}"), "llama", &extra).unwrap_err();
            assert_eq!(
                err,
                format!("llama.block_count is {count}, but the file holds tensors of 12 blocks")
            );
            assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
        }
    }

    #[test]
    fn dimensions_beyond_what_the_file_can_hold_are_refused() {
        for (key, value) in [
            ("embedding_length", 1u64 << 40),
            ("feed_forward_length", 1 << 62),
            ("attention.key_length", 1 << 40),
            ("vocab_size", u64::MAX),
        ] {
            let err =
                config(&format!("dims-{key}"), "llama", &[(key, Meta::U64(value))]).unwrap_err();
            assert!(
                err.contains("more than weight files of") || err.contains("2^64"),
                "{key}: {err}"
            );
        }
        let err = config("dims-zero", "llama", &[("embedding_length", Meta::U32(0))]).unwrap_err();
        assert!(err.contains("non-zero"), "{err}");
    }
}
