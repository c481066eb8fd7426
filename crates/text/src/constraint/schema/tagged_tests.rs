//! Unions of objects told apart by a discriminator key.

use serde_json::{json, Value};

use super::*;
use crate::constraint::Recognizer;

fn accepts(schema: &Schema, text: &str) -> bool {
    SchemaRecognizer::new(schema)
        .after(schema, text.as_bytes())
        .is_some_and(|s| s.is_complete())
}

/// Two tool calls, the second through `$defs` with a one-value `enum`, as pydantic writes a
/// discriminated union.
fn calls() -> Value {
    json!({
        "$defs": {
            "Search": {
                "type": "object",
                "properties": {
                    "name": {"enum": ["search"]},
                    "query": {"type": "string"},
                    "limit": {"type": "integer"}
                },
                "required": ["name", "query"],
                "additionalProperties": false
            }
        },
        "type": "object",
        "properties": {
            "call": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "name": {"const": "get_weather"},
                            "city": {"type": "string"},
                            "days": {"type": "integer"}
                        },
                        "required": ["name", "city"],
                        "additionalProperties": false
                    },
                    {"$ref": "#/$defs/Search"}
                ],
                "discriminator": {"propertyName": "name"}
            }
        },
        "required": ["call"],
        "additionalProperties": false
    })
}

#[test]
fn only_the_discriminator_can_open_the_object() {
    let schema = Schema::compile(&calls()).unwrap();
    let open = SchemaRecognizer::new(&schema)
        .after(&schema, br#"{"call":{"#)
        .unwrap();
    assert!(open.after(&schema, br#""name""#).is_some());
    for key in ["city", "query", "limit", "days"] {
        assert!(
            open.after(&schema, format!("\"{key}\"").as_bytes())
                .is_none(),
            "{key}"
        );
    }
    assert!(
        open.after(&schema, b"}").is_none(),
        "the object needs its name"
    );
    assert!(open.after(&schema, br#""name":"other""#).is_none());
}

#[test]
fn after_the_discriminator_only_the_chosen_alternative_follows() {
    let schema = Schema::compile(&calls()).unwrap();
    let weather = SchemaRecognizer::new(&schema)
        .after(&schema, br#"{"call":{"name": "get_weather","#)
        .unwrap();
    assert!(weather.after(&schema, br#""city""#).is_some());
    assert!(weather.after(&schema, br#""query""#).is_none());
    assert!(
        weather.after(&schema, br#""name""#).is_none(),
        "written already"
    );
    let search = SchemaRecognizer::new(&schema)
        .after(&schema, br#"{"call":{"name":"search""#)
        .unwrap();
    assert!(search.after(&schema, b"}").is_none(), "query is required");
    assert!(search.after(&schema, br#","city""#).is_none());
}

#[test]
fn conforming_documents_are_accepted_and_others_refused() {
    let schema = Schema::compile(&calls()).unwrap();
    let names = ["get_weather", "search"];
    let fields = [
        (r#""city":"Oslo""#, 0),
        (r#""days":3"#, 0),
        (r#""query":"rust""#, 1),
        (r#""limit":10"#, 1),
    ];
    // Every subset of the fields, in both orders, under both names.
    for (n, name) in names.iter().enumerate() {
        for subset in 0u32..16 {
            let chosen: Vec<&(&str, usize)> = (0..4)
                .filter(|i| subset & (1 << i) != 0)
                .map(|i| &fields[i])
                .collect();
            for reversed in [false, true] {
                let mut parts: Vec<&str> = chosen.iter().map(|(f, _)| *f).collect();
                if reversed {
                    parts.reverse();
                }
                let mut body = format!(r#""name":"{name}""#);
                for part in &parts {
                    body.push(',');
                    body.push_str(part);
                }
                let text = format!(r#"{{"call":{{{body}}}}}"#);
                let own = chosen.iter().all(|(_, owner)| *owner == n);
                let required = if n == 0 { r#""city""# } else { r#""query""# };
                let valid = own && parts.iter().any(|p| p.starts_with(required));
                let parsed: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(parsed["call"]["name"], *name);
                assert_eq!(accepts(&schema, &text), valid, "{text}");
            }
        }
    }
    // The discriminator after another key is refused, though the document conforms.
    assert!(!accepts(
        &schema,
        r#"{"call":{"city":"Oslo","name":"get_weather"}}"#
    ));
}

#[test]
fn unions_of_objects_without_a_discriminator_are_refused_strictly_and_any_object_relaxed() {
    for alternatives in [
        // No const property.
        json!([{"type": "object", "properties": {"a": {"type": "string"}}},
               {"type": "object", "properties": {"b": {"type": "string"}}}]),
        // The same const in both.
        json!([{"type": "object", "properties": {"k": {"const": 1}}},
               {"type": "object", "properties": {"k": {"const": 1}, "b": {}}}]),
    ] {
        let schema = json!({"type": "object", "properties": {"u": {"anyOf": alternatives}}});
        let error = Schema::compile(&schema).unwrap_err();
        assert_eq!(error.path, "#/properties/u");
        let (relaxed, ignored) = Schema::compile_relaxed(&schema).unwrap();
        assert_eq!(ignored, ["#/properties/u/anyOf"]);
        assert!(accepts(&relaxed, r#"{"u":{"z":[1]}}"#));
        assert!(!accepts(&relaxed, r#"{"u":[1]}"#));
    }
}

#[test]
fn a_discriminated_union_beside_other_kinds_keeps_them() {
    let schema = Schema::compile(&json!({
        "type": "object",
        "properties": {"shape": {"anyOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}},
            {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}},
            {"type": "null"}
        ]}}
    }))
    .unwrap();
    assert!(accepts(&schema, r#"{"shape":null}"#));
    assert!(accepts(&schema, r#"{"shape":{"kind":"circle","r":1}}"#));
    assert!(accepts(&schema, r#"{"shape":{"kind":"square"}}"#));
    assert!(!accepts(&schema, r#"{"shape":{"kind":"square","r":1}}"#));
    assert!(!accepts(&schema, r#"{"shape":{}}"#));
}
