//! `metadata` (Responses, chat completions): OpenAI's "set of 16 key-value pairs", with keys
//! of at most 64 characters and string values of at most 512, refused as OpenAI refuses them
//! (its messages, `param` and `code`). Lengths are in characters (Unicode scalar values), as
//! OpenAI counts them. Without these bounds a request could attach megabytes that every
//! stored response then keeps.

use serde_json::Value;

use crate::error::ApiError;

/// Most pairs.
pub const MAX_METADATA_PAIRS: usize = 16;
/// Longest key, in characters.
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// Longest value, in characters.
pub const MAX_METADATA_VALUE_CHARS: usize = 512;

/// A key as an error repeats it: whole unless it is very long.
fn shown(key: &str) -> String {
    const SHOWN: usize = 100;
    match key.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}...", &key[..cut]),
        None => key.to_string(),
    }
}

/// A JSON value's type as OpenAI's type errors name it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid(param: String, message: String, code: &'static str) -> ApiError {
    ApiError::InvalidRequest {
        message,
        param: Some(param),
        code: Some(code),
    }
}

/// Checks a request's `metadata` (absent and `null` are fine). Types are checked before the
/// count, as OpenAI does, then each key and value in the order sent.
pub fn validate_metadata(metadata: Option<&Value>) -> Result<(), ApiError> {
    let map = match metadata {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(invalid(
                "metadata".into(),
                format!(
                    "Invalid type for 'metadata': expected an object, but got {} instead.",
                    type_name(other)
                ),
                "invalid_type",
            ))
        }
    };
    for (key, value) in map {
        if !value.is_string() {
            let param = format!("metadata.{}", shown(key));
            return Err(invalid(
                param.clone(),
                format!(
                    "Invalid type for '{param}': expected a string, but got {} instead.",
                    type_name(value)
                ),
                "invalid_type",
            ));
        }
    }
    if map.len() > MAX_METADATA_PAIRS {
        return Err(invalid(
            "metadata".into(),
            format!(
                "Invalid 'metadata': too many properties. Expected an object with at most \
                 {MAX_METADATA_PAIRS} properties, but got an object with {} properties instead.",
                map.len()
            ),
            "object_above_max_properties",
        ));
    }
    for (key, value) in map {
        let param = format!("metadata.{}", shown(key));
        let chars = key.chars().count();
        if chars > MAX_METADATA_KEY_CHARS {
            return Err(invalid(
                param,
                format!(
                    "Invalid property name in 'metadata': '{}' is too long. Expected a string \
                     with maximum length {MAX_METADATA_KEY_CHARS}, but got a string with \
                     length {chars} instead.",
                    shown(key)
                ),
                "string_above_max_length",
            ));
        }
        let chars = value.as_str().map_or(0, |v| v.chars().count());
        if chars > MAX_METADATA_VALUE_CHARS {
            return Err(invalid(
                param.clone(),
                format!(
                    "Invalid '{param}': string too long. Expected a string with maximum length \
                     {MAX_METADATA_VALUE_CHARS}, but got a string with length {chars} instead."
                ),
                "string_above_max_length",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map};

    use super::*;

    fn pairs(n: usize) -> Value {
        Value::Object(
            (0..n)
                .map(|i| (format!("k{i}"), json!("v")))
                .collect::<Map<_, _>>(),
        )
    }

    fn refused(metadata: Value) -> (String, String, &'static str) {
        match validate_metadata(Some(&metadata)).unwrap_err() {
            ApiError::InvalidRequest {
                message,
                param,
                code,
            } => (message, param.unwrap(), code.unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn openais_limits_hold_to_the_character() {
        for ok in [
            Value::Null,
            json!({}),
            pairs(16),
            json!({"k".repeat(64): "v"}),
            json!({"k": "v".repeat(512)}),
            json!({"k": "雪".repeat(512)}),
        ] {
            validate_metadata(Some(&ok)).unwrap();
        }
        validate_metadata(None).unwrap();
        assert_eq!(
            refused(pairs(17)),
            (
                "Invalid 'metadata': too many properties. Expected an object with at most 16 \
                 properties, but got an object with 17 properties instead."
                    .into(),
                "metadata".into(),
                "object_above_max_properties"
            )
        );
        let key = "k".repeat(65);
        let (message, param, code) = refused(json!({key.clone(): "v"}));
        assert_eq!(param, format!("metadata.{key}"));
        assert_eq!(code, "string_above_max_length");
        assert!(message.contains("maximum length 64, but got a string with length 65"));
        let (message, param, _) = refused(json!({"k": "雪".repeat(513)}));
        assert_eq!(param, "metadata.k");
        assert_eq!(
            message,
            "Invalid 'metadata.k': string too long. Expected a string with maximum length 512, \
             but got a string with length 513 instead."
        );
    }

    #[test]
    fn values_are_strings_and_types_come_before_the_count() {
        let (message, param, code) = refused(json!({"k": 1}));
        assert_eq!(
            (message.as_str(), param.as_str(), code),
            (
                "Invalid type for 'metadata.k': expected a string, but got an integer instead.",
                "metadata.k",
                "invalid_type"
            )
        );
        assert!(refused(json!({"k": 1.5})).0.contains("got a number"));
        assert!(refused(json!({"k": null})).0.contains("got null"));
        assert!(refused(json!({"k": {"x": "y"}}))
            .0
            .contains("got an object"));
        assert!(refused(json!("text"))
            .0
            .contains("'metadata': expected an object"));
        let mut many = pairs(17);
        many["k16"] = json!(2);
        assert_eq!(refused(many).1, "metadata.k16");
    }

    #[test]
    fn a_huge_key_is_not_repeated_whole() {
        let key = "k".repeat(1 << 20);
        let (message, param, _) = refused(json!({key: "v"}));
        assert!(message.len() < 400 && param.len() < 120, "{param}");
        assert!(message.ends_with(&format!("length {} instead.", 1 << 20)));
    }
}
