//! The JSON pieces of Responses output items and usage.

use serde_json::{json, Value};

use crate::wire::UsageBody;

pub(super) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

pub(super) fn reasoning_part(text: &str) -> Value {
    json!({"type": "reasoning_text", "text": text})
}

/// `a`'s fields with `b`'s added.
pub(super) fn merge(a: &Value, b: Value) -> Value {
    let mut out = a.clone();
    if let (Value::Object(out), Value::Object(b)) = (&mut out, b) {
        out.extend(b);
    }
    out
}

/// Responses' `usage`, `reasoning_tokens` of its output tokens in reasoning; hidden cached
/// tokens read as 0 (the field is not optional).
pub(super) fn usage_object(usage: &UsageBody, reasoning_tokens: u32) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": usage.total_tokens,
    })
}

/// A reasoning summary part holding `text`.
pub(super) fn summary_part(text: &str) -> Value {
    json!({"type": "summary_text", "text": text})
}
