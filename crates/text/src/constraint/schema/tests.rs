use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::constraint::Recognizer;

/// A pydantic-style schema: `$defs` and `$ref`, an enum, an optional (anyOf with null), an
/// integer, a bounded array, a free-form value.
fn people() -> Value {
    json!({
        "$defs": {
            "Pet": {
                "type": "object",
                "title": "Pet",
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"enum": ["cat", "dog", 3]}
                },
                "required": ["name", "kind"],
                "additionalProperties": false
            }
        },
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "full name"},
            "age": {"type": "integer"},
            "height": {"type": "number"},
            "alive": {"type": "boolean"},
            "nick": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            "pets": {"type": "array", "items": {"$ref": "#/$defs/Pet"}, "maxItems": 2},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "extra": {}
        },
        "required": ["name", "age", "pets"],
        "additionalProperties": false
    })
}

fn accepts(schema: &Schema, text: &str) -> bool {
    SchemaRecognizer::new(schema)
        .after(schema, text.as_bytes())
        .is_some_and(|s| s.is_complete())
}

#[test]
fn documents_that_conform_are_recognized() {
    let schema = Schema::compile(&people()).unwrap();
    for text in [
        r#"{"name":"Ann","age":41,"pets":[]}"#,
        r#"{"pets":[{"kind":"dog","name":"Rex"}],"age":-3,"name":""}"#,
        r#"{"name":"B","age":0,"pets":[{"name":"a","kind":3},{"name":"b","kind":"cat"}],"nick":null}"#,
        r#"{"name":"C","age":7,"pets":[],"nick":"cee","height":1.5e2,"alive":false,"tags":["x"]}"#,
        r#"{"name":"D","age":1,"pets":[],"extra":{"any":[1,"two",null,true,{"x":-0.5}]}}"#,
        "{\n  \"name\": \"E\",\n  \"age\": 2,\n  \"pets\": [ ]\n}",
    ] {
        assert!(accepts(&schema, text), "refused {text}");
    }
}

#[test]
fn documents_that_do_not_conform_are_refused() {
    let schema = Schema::compile(&people()).unwrap();
    for text in [
        r#"{"name":"Ann","age":41}"#,                 // a required key missing
        r#"{"name":"Ann","age":41,"pets":[],"x":1}"#, // a key not in properties
        r#"{"name":"Ann","name":"Bo","age":41,"pets":[]}"#, // a key twice
        r#"{"name":"Ann","age":4.5,"pets":[]}"#,      // not an integer
        r#"{"name":"Ann","age":4e1,"pets":[]}"#,      // not an integer either
        r#"{"name":7,"age":4,"pets":[]}"#,            // not a string
        r#"{"name":"A","age":4,"pets":[{"name":"r","kind":"cow"}]}"#, // not in the enum
        r#"{"name":"A","age":4,"pets":[{"name":"r"}]}"#, // the pet's kind missing
        r#"{"name":"A","age":4,"pets":[{"name":"r","kind":3,"k":1}]}"#,
        r#"{"name":"A","age":4,"pets":[{"name":"a","kind":3},{"name":"b","kind":3},{"name":"c","kind":3}]}"#, // maxItems
        r#"{"name":"A","age":4,"pets":[],"tags":[]}"#, // minItems
        r#"{"name":"A","age":4,"pets":[],"alive":"yes"}"#,
        r#"{"name":"A","age":4,"pets":[],"nick":5}"#,
        r#"{"name":"A","age":4,"pets":[]} "#,
    ] {
        assert!(!accepts(&schema, text), "accepted {text}");
    }
}

#[test]
fn keywords_say_the_type_when_type_is_absent_and_types_merge() {
    let schema = Schema::compile(&json!({
        "properties": {
            "o": {"properties": {"k": {"type": "string"}}, "required": ["k"]},
            "a": {"items": {"type": "string"}, "minItems": 2},
            "n": {"type": ["integer", "number", "number"]}
        }
    }))
    .unwrap();
    assert!(accepts(&schema, r#"{"o":{"k":"v"},"a":["x","y"],"n":1.5}"#));
    assert!(!accepts(&schema, r#"{"o":{}}"#));
    assert!(!accepts(&schema, r#"{"a":["x"]}"#));
    assert!(!accepts(&schema, r#"{"a":[1,2]}"#));
    let closed =
        Schema::compile(&json!({"type": "object", "additionalProperties": false})).unwrap();
    assert!(accepts(&closed, "{}"));
    assert!(!accepts(&closed, r#"{"a":1}"#));
}

#[test]
fn at_the_depth_limit_only_values_that_fit_may_start() {
    let tree = Schema::compile(&json!({
        "type": "object",
        "properties": {"c": {"$ref": "#"}, "s": {"type": "string"}}
    }))
    .unwrap();
    let deep = r#"{"c":"#.repeat(MAX_SCHEMA_DEPTH - 1) + "{";
    let state = SchemaRecognizer::new(&tree)
        .after(&tree, deep.as_bytes())
        .unwrap();
    // Key "c" would need one more level: only "s" (or closing) is left.
    assert!(state.after(&tree, br#""c""#).is_none());
    assert!(state.after(&tree, br#""s":"x"}"#).is_some());
    assert!(state.after(&tree, b"}").is_some());
}

#[test]
fn numbers_in_an_enum_end_where_the_number_ends() {
    let schema = Schema::compile(&json!({
        "type": "object",
        "properties": {"n": {"enum": [1, 12, 120]}},
        "required": ["n"],
        "additionalProperties": false
    }))
    .unwrap();
    for ok in [r#"{"n":1}"#, r#"{"n":12}"#, r#"{"n":120}"#, r#"{"n":12 }"#] {
        assert!(accepts(&schema, ok), "{ok}");
    }
    for bad in [r#"{"n":2}"#, r#"{"n":121}"#, r#"{"n":1.0}"#] {
        assert!(!accepts(&schema, bad), "{bad}");
    }
}

#[test]
fn recursive_references_and_optional_recursion_compile() {
    let tree = json!({
        "$defs": {"Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            },
            "required": ["value"],
            "additionalProperties": false
        }},
        "$ref": "#/$defs/Node"
    });
    let schema = Schema::compile(&tree).unwrap();
    assert!(accepts(
        &schema,
        r#"{"value":1,"next":{"value":2,"next":null},"children":[{"value":3}]}"#
    ));
    assert!(!accepts(&schema, r#"{"value":1,"next":{"next":null}}"#));
}

#[test]
fn unsupported_schemas_are_refused_with_their_path() {
    let cases = [
        (json!({"type": "string"}), "#", "must describe an object"),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}),
            "#/properties/a",
            "\"multipleOf\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            "#",
            "additionalProperties",
        ),
        (
            json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"enum": ["x"]}]}}}),
            "#/properties/a",
            "different JSON types",
        ),
        (json!({"$ref": "#/$defs/Missing"}), "#", "does not point"),
        (
            json!({"$defs": {"A": {"$ref": "#/$defs/A"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}),
            "#",
            "refers to itself",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", 1]}}}),
            "#/properties/a",
            "does not have the schema's type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"const": "x", "enum": ["y"]}}}),
            "#/properties/a",
            "beside \"const\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "required": ["k"], "anyOf": [{"type": "object"}]}}}),
            "#/properties/a",
            "beside \"anyOf\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "required": ["k"]}}}),
            "#/properties/a",
            "required keys need properties",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": "a"}),
            "#",
            "required must be a list",
        ),
        (
            json!({"$defs": {"L": {"type": "object", "properties": {"next": {"$ref": "#/$defs/L"}}, "required": ["next"]}}, "$ref": "#/$defs/L"}),
            "#",
            "nests deeper",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "#",
            "required \"b\"",
        ),
    ];
    for (schema, path, message) in cases {
        let error = Schema::compile(&schema).unwrap_err();
        assert_eq!(error.path, path, "{schema}");
        assert!(error.message.contains(message), "{error}");
    }
}

/// A validator for the same subset, written separately from the recognizer: the random walks
/// below check the recognizer's complete documents against it.
fn conforms(value: &Value, schema: &Value, root: &Value) -> bool {
    if schema == &json!(true) {
        return true;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return conforms(value, root.pointer(&r[1..]).unwrap(), root);
    }
    if let Some(c) = schema.get("const") {
        return value == c;
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return e.contains(value);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options.iter().any(|o| conforms(value, o, root));
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        return all.iter().all(|o| conforms(value, o, root));
    }
    let types: Vec<&str> = match schema.get("type") {
        None => return true,
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => unreachable!(),
    };
    types.iter().any(|t| match (*t, value) {
        ("object", Value::Object(map)) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let required = schema.get("required").and_then(Value::as_array);
            required
                .into_iter()
                .flatten()
                .all(|k| map.contains_key(k.as_str().unwrap()))
                && map.iter().all(|(k, v)| match props {
                    None => true,
                    Some(p) => p.get(k).is_some_and(|s| conforms(v, s, root)),
                })
        }
        ("array", Value::Array(items)) => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let max = schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let item = schema.get("items").cloned().unwrap_or(json!(true));
            (min..=max).contains(&(items.len() as u64))
                && items.iter().all(|v| conforms(v, &item, root))
        }
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    })
}

fn schemas() -> Vec<Value> {
    vec![
        people(),
        // An optional tree as deep as the model likes: the depth limit must not dead-end it.
        json!({"type": "object", "properties": {"c": {"$ref": "#"}, "l": {"type": "array", "items": {"$ref": "#"}}}}),
        json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 2, "maxItems": 3}, "b": {"const": {"k": [1, 2]}}}, "required": ["xs"], "additionalProperties": false}),
        json!({"type": "object"}),
    ]
}

proptest! {
    /// Random walks through the bytes each state accepts, leaning on structural bytes so that
    /// documents finish: the walk never reaches a state that accepts nothing (a dead end would
    /// leave the sampler no token), and every finished document conforms.
    #[test]
    fn random_walks_never_dead_end_and_finish_in_conforming_documents(
        which in 0..4usize,
        choices in prop::collection::vec(any::<u32>(), 1..600),
    ) {
        let raw = &schemas()[which];
        let schema = Schema::compile(raw).unwrap();
        let mut state = SchemaRecognizer::new(&schema);
        let mut text = Vec::new();
        for choice in choices {
            if state.is_complete() {
                break;
            }
            let accepted: Vec<u8> = (0..=255u8)
                .filter(|&b| state.after(&schema, &[b]).is_some())
                .collect();
            prop_assert!(!accepted.is_empty(), "dead end after {:?}", String::from_utf8_lossy(&text));
            let structural: Vec<u8> = accepted
                .iter()
                .copied()
                .filter(|b| b"\"{}[],:0123456789tfn-".contains(b))
                .collect();
            let pool = if choice % 4 != 0 && !structural.is_empty() { &structural } else { &accepted };
            let byte = pool[(choice / 4) as usize % pool.len()];
            state = state.after(&schema, &[byte]).unwrap();
            text.push(byte);
        }
        if state.is_complete() {
            match serde_json::from_slice::<Value>(&text) {
                Ok(value) => prop_assert!(conforms(&value, raw, raw), "{} does not conform", value),
                // JSON allows numbers past f64's range; serde_json refuses them.
                Err(e) if e.to_string().contains("out of range") => {}
                Err(e) => prop_assert!(false, "{e} in {:?}", String::from_utf8_lossy(&text)),
            }
        }
    }
}
