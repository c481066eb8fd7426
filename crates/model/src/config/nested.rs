//! The text model's settings of a multimodal `config.json`. transformers writes them nested
//! under `text_config` (the hub's Gemma 3 checkpoints stating only what differs from the text
//! config class's defaults); some conversions keep them at the top level. Either reads as one
//! flat object for the parser.

use serde_json::{Map, Value};

/// `text` as one flat object: without a `text_config` object, as it is; with one, its fields,
/// then the top level's (the architecture name, token ids the text config leaves out), then
/// `defaults` (a JSON object: the text config class's defaults, for the fields neither states).
pub(super) fn flatten_text_config(text: &str, defaults: Option<&str>) -> Result<String, String> {
    let top: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Some(Value::Object(nested)) = top.get("text_config") else {
        return Ok(text.to_owned());
    };
    let mut flat: Map<String, Value> = nested.clone();
    let outer = top.as_object().into_iter().flatten();
    for (key, value) in
        outer.filter(|(k, _)| !matches!(k.as_str(), "text_config" | "vision_config"))
    {
        flat.entry(key.clone()).or_insert_with(|| value.clone());
    }
    if let Some(defaults) = defaults {
        let defaults: Map<String, Value> =
            serde_json::from_str(defaults).map_err(|e| format!("text config defaults: {e}"))?;
        for (key, value) in defaults {
            flat.entry(key).or_insert(value);
        }
    }
    Ok(Value::Object(flat).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_win_then_the_top_level_then_the_defaults() {
        let text = r#"{"architectures": ["X"], "eos_token_id": [1, 106], "hidden_size": 1,
            "vision_config": {"hidden_size": 7},
            "text_config": {"hidden_size": 64, "vocab_size": 10}}"#;
        let defaults = r#"{"vocab_size": 99, "head_dim": 256}"#;
        let flat: Value =
            serde_json::from_str(&flatten_text_config(text, Some(defaults)).unwrap()).unwrap();
        let expected = serde_json::json!({"architectures": ["X"], "eos_token_id": [1, 106],
            "hidden_size": 64, "vocab_size": 10, "head_dim": 256});
        assert_eq!(flat, expected);
    }

    #[test]
    fn a_flat_config_reads_as_it_is() {
        let text = r#"{"architectures": ["X"], "hidden_size": 8}"#;
        assert_eq!(flatten_text_config(text, Some("{}")).unwrap(), text);
    }
}
