//! What the schema's keyword tests share: a schema of one required property `n`, and how the
//! recognizer takes a text written as that property's value.

use serde_json::{json, Value};

use super::{Schema, SchemaRecognizer};
use crate::constraint::Recognizer;

/// `{"type": "object", "properties": {"n": <n>}, "required": ["n"]}`, compiled.
pub(super) fn object_with(n: Value) -> Schema {
    Schema::compile(&json!({"type": "object", "properties": {"n": n}, "required": ["n"]})).unwrap()
}

/// Whether `{"n":<text>` is a prefix the recognizer takes, and whether it completes with `}`.
pub(super) fn prefix_and_whole(schema: &Schema, text: &str) -> (bool, bool) {
    let prefix = SchemaRecognizer::new(schema).after(schema, format!("{{\"n\":{text}").as_bytes());
    let whole = prefix
        .and_then(|r| r.after(schema, b"}"))
        .is_some_and(|r| r.is_complete());
    (prefix.is_some(), whole)
}
