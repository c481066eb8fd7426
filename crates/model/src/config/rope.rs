//! RoPE and per-layer attention types from `config.json`, in both dialects: 4.x
//! `rope_theta`/`rope_scaling` (Gemma 3's `rope_local_base_freq`, `sliding_window_pattern`),
//! 5.x `rope_parameters` (flat, or one entry per layer type) and `layer_types`.

use serde_json::Value;

use super::{ConfigSpec, LayerType, LongRope, RawConfig, RopeConfig, RopeScaling};

/// Per layer, which attention it runs: 5.x `layer_types`, else (Gemma 3's 4.x configs) every
/// `sliding_window_pattern`-th layer global and the others sliding (the architecture's pattern
/// when not given); `None` when there is neither.
pub(super) fn layer_types(
    raw: &RawConfig,
    spec: &ConfigSpec,
) -> Result<Option<Vec<LayerType>>, String> {
    if let Some(names) = &raw.layer_types {
        if names.len() != raw.num_hidden_layers {
            return Err(format!(
                "{} layer_types for {} layers",
                names.len(),
                raw.num_hidden_layers
            ));
        }
        let parse = |name: &String| match name.as_str() {
            "full_attention" => Ok(LayerType::Full),
            "sliding_attention" => Ok(LayerType::Sliding),
            other => Err(format!("unsupported layer type `{other}`")),
        };
        return names.iter().map(parse).collect::<Result<_, _>>().map(Some);
    }
    let pattern = raw.sliding_window_pattern.or(spec.layer_pattern());
    Ok(pattern.map(|every| {
        (0..raw.num_hidden_layers)
            .map(|i| match (i + 1) % every.max(1) {
                0 => LayerType::Full,
                _ => LayerType::Sliding,
            })
            .collect()
    }))
}

/// Reads the RoPE of (global) layers and, where it differs, of sliding-window layers, from
/// either dialect. 4.x: `rope_theta` and `rope_scaling` at top level (Gemma 3 adds
/// `rope_local_base_freq`); 5.x: `rope_parameters`, flat or (Gemma 3) one entry per layer type.
/// Bases not given are the architecture's (`spec`).
pub(super) fn parse_rope(
    raw: &RawConfig,
    spec: &ConfigSpec,
    head_dim: usize,
) -> Result<(RopeConfig, Option<RopeConfig>), String> {
    let present = |v: &Option<Value>| v.clone().filter(|v| !v.is_null());
    let global_theta = spec.rope_theta;
    let local_theta = spec.local_rope_theta().unwrap_or(10_000.0);
    let parameters = present(&raw.rope_parameters);
    if let Some(per_type) = parameters
        .as_ref()
        .filter(|p| p.get("full_attention").is_some())
    {
        let global = rope_from(per_type.get("full_attention"), None, global_theta, raw)?;
        let local = match per_type.get("sliding_attention") {
            Some(local) => Some(rope_from(Some(local), None, local_theta, raw)?),
            None => None,
        };
        return Ok((global, local));
    }
    // 5.x: everything lives in rope_parameters. 4.x: theta at top level, scaling beside it.
    let params = parameters.or(present(&raw.rope_scaling));
    let mut global = rope_from(params.as_ref(), raw.rope_theta, global_theta, raw)?;
    global.rotary_dim = rotary_dim(params.as_ref(), raw, head_dim)?;
    let pairs = global.rotary_dim.unwrap_or(head_dim) / 2;
    global.mrope_section = mrope_section(params.as_ref(), spec, pairs)?;
    if let RopeScaling::LongRope(long) = &global.scaling {
        let pairs = global.rotary_dim.unwrap_or(head_dim) / 2;
        if long.short_factor.len() != pairs || long.long_factor.len() != pairs {
            return Err(format!(
                "longrope needs {pairs} short and long factors (half the rotated dimensions), \
                 got {} and {}",
                long.short_factor.len(),
                long.long_factor.len()
            ));
        }
    }
    let local = raw.rope_local_base_freq.or(spec.local_rope_theta());
    let local = local.map(|theta| RopeConfig {
        theta,
        scaling: RopeScaling::Default,
        rotary_dim: None,
        mrope_section: None,
    });
    Ok((global, local))
}

/// One RoPE from its parameters (`rope_theta` in them, else `theta`, else `default_theta`).
/// `raw` supplies what `longrope` may read from the top level (Phi-3's
/// `original_max_position_embeddings`, `max_position_embeddings`).
fn rope_from(
    params: Option<&Value>,
    theta: Option<f64>,
    default_theta: f64,
    raw: &RawConfig,
) -> Result<RopeConfig, String> {
    let theta = params
        .and_then(|p| p.get("rope_theta"))
        .and_then(Value::as_f64)
        .or(theta)
        .unwrap_or(default_theta);
    let Some(params) = params else {
        return Ok(RopeConfig {
            theta,
            scaling: RopeScaling::Default,
            rotary_dim: None,
            mrope_section: None,
        });
    };
    let rope_type = params
        .get("rope_type")
        .or_else(|| params.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let field = |name: &str| -> Result<f64, String> {
        params
            .get(name)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("rope scaling `{rope_type}` needs `{name}`"))
    };
    let scaling = match rope_type {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear {
            factor: field("factor")?,
        },
        "llama3" => RopeScaling::Llama3 {
            factor: field("factor")?,
            low_freq_factor: field("low_freq_factor")?,
            high_freq_factor: field("high_freq_factor")?,
            original_max_position_embeddings: field("original_max_position_embeddings")?,
        },
        // Phi-3's 4.x configs call it `su`; transformers reads both as `longrope`.
        "longrope" | "su" => RopeScaling::LongRope(longrope(params, raw)?),
        // Qwen2-VL's 4.x configs name their multimodal RoPE `mrope`: default frequencies, with
        // the `mrope_section` split read beside them.
        "mrope" => RopeScaling::Default,
        other => return Err(format!("unsupported rope_type `{other}`")),
    };
    Ok(RopeConfig {
        theta,
        scaling,
        rotary_dim: None,
        mrope_section: None,
    })
}

/// LongRoPE's factors, original length and cos/sin scale, as transformers 5.x reads them: the
/// top-level `original_max_position_embeddings` wins over the one in the parameters (Phi-3
/// keeps it there), `factor` defaults to `max_position_embeddings / original` and
/// `attention_factor` to `√(1 + ln factor / ln original)` (1 when `factor <= 1`).
fn longrope(params: &Value, raw: &RawConfig) -> Result<LongRope, String> {
    let factors = |name: &str| -> Result<Vec<f32>, String> {
        let values = params
            .get(name)
            .and_then(Value::as_array)
            .ok_or_else(|| format!("longrope needs `{name}`"))?;
        (values.iter())
            .map(|v| v.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("longrope `{name}` must be numbers"))
    };
    let original = raw
        .original_max_position_embeddings
        .or_else(|| {
            let v = params.get("original_max_position_embeddings")?.as_u64()?;
            usize::try_from(v).ok()
        })
        .or(raw.max_position_embeddings)
        .filter(|&n| n > 1)
        .ok_or("longrope needs original_max_position_embeddings above 1")?;
    let factor = match params.get("factor").and_then(Value::as_f64) {
        Some(factor) => factor,
        None => raw.max_position_embeddings.unwrap_or(original) as f64 / original as f64,
    };
    let attention_factor = match params.get("attention_factor").and_then(Value::as_f64) {
        Some(given) => given,
        None if factor <= 1.0 => 1.0,
        None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
    };
    Ok(LongRope {
        short_factor: factors("short_factor")?,
        long_factor: factors("long_factor")?,
        original_max_position_embeddings: original,
        attention_factor: attention_factor as f32,
    })
}

/// Multimodal RoPE's split of the `pairs` frequency pairs into temporal, height and width runs:
/// `mrope_section` of the RoPE parameters (4.x `rope_scaling`, 5.x `rope_parameters`), else the
/// architecture's default. The runs must cover the pairs exactly, as transformers' split of the
/// frequencies requires.
fn mrope_section(
    params: Option<&Value>,
    spec: &ConfigSpec,
    pairs: usize,
) -> Result<Option<[usize; 3]>, String> {
    let section = match params.and_then(|p| p.get("mrope_section")) {
        None | Some(Value::Null) => spec.mrope_section,
        Some(given) => {
            let runs: Option<Vec<usize>> = (given.as_array().into_iter().flatten())
                .map(|v| v.as_u64().and_then(|n| usize::try_from(n).ok()))
                .collect();
            match runs.as_deref() {
                Some(&[t, h, w]) => Some([t, h, w]),
                _ => return Err(format!("mrope_section {given} must be three counts")),
            }
        }
    };
    match section {
        Some(runs) if runs.iter().try_fold(0usize, |a, &r| a.checked_add(r)) != Some(pairs) => {
            Err(format!(
                "mrope_section {runs:?} must add up to the {pairs} rotary frequency pairs \
                 (half the rotated features of a head)"
            ))
        }
        section => Ok(section),
    }
}

/// The rotated features of each head when `partial_rotary_factor` (in the RoPE parameters, or
/// at top level) leaves some unrotated: `int(head_dim · factor)`, as transformers computes it.
fn rotary_dim(
    params: Option<&Value>,
    raw: &RawConfig,
    head_dim: usize,
) -> Result<Option<usize>, String> {
    let factor = params
        .and_then(|p| p.get("partial_rotary_factor"))
        .and_then(Value::as_f64)
        .or(raw.partial_rotary_factor);
    let Some(factor) = factor.filter(|&f| f != 1.0) else {
        return Ok(None);
    };
    let dim = (head_dim as f64 * factor) as usize;
    if !(0.0..=1.0).contains(&factor) || dim == 0 || !dim.is_multiple_of(2) {
        return Err(format!(
            "partial_rotary_factor {factor} of head_dim {head_dim} gives {dim} rotated features \
             (must be even, non-zero, at most head_dim)"
        ));
    }
    Ok(Some(dim))
}
