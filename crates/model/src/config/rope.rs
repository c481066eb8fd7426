//! RoPE and per-layer attention types from `config.json`, in both dialects: 4.x
//! `rope_theta`/`rope_scaling` (Gemma 3's `rope_local_base_freq`, `sliding_window_pattern`),
//! 5.x `rope_parameters` (flat, or one entry per layer type) and `layer_types`.

use serde_json::Value;

use super::{LayerType, RawConfig, RopeConfig, RopeScaling};

/// Per layer, which attention it runs: 5.x `layer_types`, else (Gemma 3's 4.x configs) every
/// `sliding_window_pattern`-th layer global and the others sliding; `None` when neither is given.
pub(super) fn layer_types(raw: &RawConfig, gemma3: bool) -> Result<Option<Vec<LayerType>>, String> {
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
    let pattern = raw.sliding_window_pattern.or(gemma3.then_some(6));
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
pub(super) fn parse_rope(
    raw: &RawConfig,
    gemma3: bool,
) -> Result<(RopeConfig, Option<RopeConfig>), String> {
    let present = |v: &Option<Value>| v.clone().filter(|v| !v.is_null());
    let (global_theta, local_theta) = if gemma3 {
        (1_000_000.0, 10_000.0)
    } else {
        (10_000.0, 10_000.0)
    };
    let parameters = present(&raw.rope_parameters);
    if let Some(per_type) = parameters
        .as_ref()
        .filter(|p| p.get("full_attention").is_some())
    {
        let global = rope_from(per_type.get("full_attention"), None, global_theta)?;
        let local = match per_type.get("sliding_attention") {
            Some(local) => Some(rope_from(Some(local), None, local_theta)?),
            None => None,
        };
        return Ok((global, local));
    }
    // 5.x: everything lives in rope_parameters. 4.x: theta at top level, scaling beside it.
    let params = parameters.or(present(&raw.rope_scaling));
    let global = rope_from(params.as_ref(), raw.rope_theta, global_theta)?;
    let local = match (raw.rope_local_base_freq, gemma3) {
        (Some(theta), _) => Some(theta),
        (None, true) => Some(local_theta),
        (None, false) => None,
    };
    let local = local.map(|theta| RopeConfig {
        theta,
        scaling: RopeScaling::Default,
    });
    Ok((global, local))
}

/// One RoPE from its parameters (`rope_theta` in them, else `theta`, else `default_theta`).
fn rope_from(
    params: Option<&Value>,
    theta: Option<f64>,
    default_theta: f64,
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
        other => return Err(format!("unsupported rope_type `{other}`")),
    };
    Ok(RopeConfig { theta, scaling })
}
