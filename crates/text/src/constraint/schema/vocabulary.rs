//! The JSON Schema keywords the subset reads: those it enforces, the annotations it ignores,
//! and what a `type` admits. The strict compiler and the relaxed pass share them.

use serde_json::Value;

/// The keywords the strict compiler enforces (besides `$ref`, read first, and the annotations);
/// the relaxed compile (`relax.rs`) keeps the same set. Those saying what kind of value it is
/// come first ([`TYPED`]).
pub(super) const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
];

/// Keywords that say what kind of value it is, for which a combinator beside them is dropped:
/// the first fourteen of [`KEYWORDS`].
pub(super) const TYPED: &[&str] = KEYWORDS.split_at(14).0;

/// Keywords that describe and never constrain.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
    "strict",
    "discriminator",
];

/// Whether `value` has one of the JSON Schema `types` (a string or a list of them).
pub(super) fn has_type(value: &Value, types: &Value) -> bool {
    let matches = |t: &str| match (t, value) {
        ("object", Value::Object(_)) | ("array", Value::Array(_)) => true,
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    match types {
        Value::String(t) => matches(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(matches),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_keywords_end_where_values_and_combinators_begin() {
        assert_eq!(TYPED.last(), Some(&"pattern"));
        assert_eq!(KEYWORDS[TYPED.len()], "enum");
    }
}
