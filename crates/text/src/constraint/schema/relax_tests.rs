//! Relaxed compilation over tool schemas shaped like the ones agents send.

use serde_json::{json, Value};

use super::*;
use crate::constraint::Recognizer;

fn accepts(schema: &Schema, text: &str) -> bool {
    SchemaRecognizer::new(schema)
        .after(schema, text.as_bytes())
        .is_some_and(|s| s.is_complete())
}

/// (name, schema, the paths relaxed mode reports, a conforming document, one it refuses).
fn corpus() -> Vec<(
    &'static str,
    Value,
    Vec<&'static str>,
    &'static str,
    &'static str,
)> {
    vec![
        (
            "codex shell",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "array", "items": {"type": "string"}},
                    "workdir": {"type": "string"},
                    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 600000}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            // The integer bounds are enforced, strictly too.
            vec![],
            r#"{"command":["ls","-la"],"timeout_ms":1000}"#,
            r#"{"command":["ls"],"timeout_ms":600001}"#,
        ),
        (
            "codex apply_patch",
            json!({
                "type": "object",
                "properties": {"input": {"type": "string", "minLength": 1}},
                "required": ["input"]
            }),
            // String lengths are enforced, strictly too.
            vec![],
            r#"{"input":"*** Begin Patch"}"#,
            r#"{"input":""}"#,
        ),
        (
            "pydantic event",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": "Event",
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z]{3}-\\d+$"},
                    "at": {"type": "string", "format": "date-time"},
                    "note": {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}]},
                    "count": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2}
                },
                "required": ["id", "at"],
                "additionalProperties": false
            }),
            vec!["#/properties/count/multipleOf"],
            r#"{"id":"abc-1","at":"2024-01-01T00:00:00Z","note":null}"#,
            r#"{"id":"abc-1","at":"x","extra":1}"#,
        ),
        (
            "claude code Edit",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "absolute path"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean", "default": false}
                },
                "required": ["file_path", "old_string", "new_string"],
                "additionalProperties": false
            }),
            vec![],
            r#"{"file_path":"/a","old_string":"x","new_string":"y","replace_all":true}"#,
            r#"{"file_path":"/a","old_string":"x"}"#,
        ),
        (
            "claude code Read",
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string"},
                    "offset": {"type": "number", "exclusiveMinimum": 0},
                    "limit": {"type": "number", "exclusiveMinimum": 0}
                },
                "required": ["file_path"],
                "additionalProperties": false,
                "$schema": "http://json-schema.org/draft-07/schema#"
            }),
            vec![],
            r#"{"file_path":"/a","limit":20}"#,
            r#"{"file_path":"/a","limit":0}"#,
        ),
        (
            "claude code Bash",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout": {"type": "number", "maximum": 600000},
                    "description": {"type": "string"},
                    "run_in_background": {"type": "boolean"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            vec![],
            r#"{"command":"ls","description":"list","timeout":1500.5}"#,
            r#"{"command":"ls","timeout":600000.5}"#,
        ),
        (
            "claude code TodoWrite",
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                                "id": {"type": "string"}
                            },
                            "required": ["content", "status", "id"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
            vec![],
            r#"{"todos":[{"content":"a","status":"pending","id":"1"}]}"#,
            r#"{"todos":[{"content":"a","status":"done","id":"1"}]}"#,
        ),
        (
            "agents sdk open object",
            json!({
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "patternProperties": {"^x-": {"type": "string"}},
                "propertyNames": {"maxLength": 20},
                "minProperties": 1,
                "additionalProperties": true
            }),
            vec!["#/minProperties", "#/patternProperties", "#/propertyNames"],
            r#"{"query":"q"}"#,
            r#"{"query":1}"#,
        ),
        (
            "conditional and not",
            json!({
                "type": "object",
                "properties": {
                    "mode": {"enum": ["a", "b"]},
                    "data": {"type": "string", "contentEncoding": "base64"},
                    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
                },
                "if": {"properties": {"mode": {"const": "a"}}},
                "then": {"required": ["data"]},
                "not": {"required": ["other"]},
                "dependentRequired": {"data": ["mode"]}
            }),
            vec![
                "#/dependentRequired",
                "#/if",
                "#/not",
                "#/properties/data/contentEncoding",
                "#/properties/tags/uniqueItems",
                "#/then",
            ],
            r#"{"mode":"a","tags":["x","x"]}"#,
            r#"{"mode":"c"}"#,
        ),
        (
            "map of strings and an empty schema",
            json!({
                "type": "object",
                "properties": {
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "anything": {}
                }
            }),
            vec!["#/properties/env/additionalProperties"],
            r#"{"env":{"A":"1","B":2},"anything":[1,{"k":null}]}"#,
            r#"{"env":[]}"#,
        ),
    ]
}

#[test]
fn agent_tool_schemas_compile_relaxed_and_report_what_is_not_enforced() {
    for (name, schema, expected, good, bad) in corpus() {
        let (compiled, mut ignored) =
            Schema::compile_relaxed(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
        ignored.sort();
        let mut expected: Vec<String> = expected.into_iter().map(String::from).collect();
        expected.sort();
        assert_eq!(ignored, expected, "{name}");
        assert!(accepts(&compiled, good), "{name}: refused {good}");
        assert!(!accepts(&compiled, bad), "{name}: accepted {bad}");
    }
}

#[test]
fn strict_compilation_still_refuses_what_relaxed_mode_leaves_out() {
    for (name, schema, expected, _, _) in corpus() {
        if expected.is_empty() {
            assert!(Schema::compile(&schema).is_ok(), "{name}");
        } else {
            assert!(
                Schema::compile(&schema).is_err(),
                "{name} compiled strictly"
            );
        }
    }
}

#[test]
fn an_empty_or_untyped_root_is_any_object() {
    for schema in [json!({}), json!({"type": "object"}), json!(true)] {
        let (compiled, ignored) = Schema::compile_relaxed(&schema).unwrap();
        assert!(ignored.is_empty());
        assert!(accepts(&compiled, r#"{"a":[1],"b":{}}"#), "{schema}");
        assert!(!accepts(&compiled, "[]"), "{schema}");
    }
}

#[test]
fn broken_schemas_are_still_errors() {
    for schema in [
        json!(3),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
        json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "minItems": 3, "maxItems": 1}}}),
        json!({"type": "string"}),
    ] {
        assert!(Schema::compile_relaxed(&schema).is_err(), "{schema}");
    }
}

#[test]
fn keywords_beside_a_ref_and_unions_it_cannot_tell_apart_are_left_out() {
    let schema = json!({
        "$defs": {"Path": {"type": "string", "pattern": "^/"}},
        "type": "object",
        "properties": {
            "path": {"$ref": "#/$defs/Path", "description": "d", "maxLength": 9},
            "value": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "string"}, {"type": "integer"}]},
            "shape": {"oneOf": [
                {"type": "object", "properties": {"r": {"type": "number"}}},
                {"type": "object", "properties": {"w": {"type": "number"}}}
            ]},
            "gone": false,
            "none": {"type": "array", "items": false}
        },
        "required": ["path", "missing"],
        "additionalProperties": false
    });
    let (compiled, mut ignored) = Schema::compile_relaxed(&schema).unwrap();
    ignored.sort();
    assert_eq!(
        ignored,
        [
            "#/properties/path/maxLength",
            "#/properties/shape/oneOf",
            "#/properties/value/anyOf",
            "#/required/1",
        ]
    );
    assert!(accepts(
        &compiled,
        r#"{"path":"/x","value":"v","shape":{"q":[]}}"#
    ));
    assert!(accepts(&compiled, r#"{"path":"/x","value":3,"none":[]}"#));
    assert!(!accepts(&compiled, r#"{"path":"/x","value":1.5}"#));
    assert!(!accepts(&compiled, r#"{"path":"/x","gone":1}"#));
    assert!(!accepts(&compiled, r#"{"path":"/x","none":[1]}"#));
    assert!(Schema::compile(&schema).is_err());
}
