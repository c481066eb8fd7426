//! Relaxed compilation (tool parameters): a pass over the schema value that drops what the
//! strict compiler cannot enforce, noting each dropped keyword's path, so that the strict
//! compiler can take the rest. What is dropped only ever widens the set of accepted documents,
//! with two exceptions that narrow it and are not reported, since every output is still valid:
//! `additionalProperties: true` or a schema beside `properties` (only the listed keys are
//! generated), and `nullable` left out (null is not generated).
//!
//! Dropped and reported: assertions on values (a `pattern` the regex engine cannot take,
//! a bound too large to enforce, `multipleOf`, `uniqueItems`, `minProperties`, ...), applicators beyond the subset (`not`,
//! `if`/`then`/`else`, `patternProperties`, `propertyNames`, `dependentSchemas`, tuple
//! `items`, `prefixItems`, ...), keywords beside `$ref`, combinators beside a `type` or object
//! or array keyword, an `allOf` of several schemas, `additionalProperties` with a schema on an
//! object without `properties`, `required` keys that no property describes, and objects with
//! more than [`MAX_PROPERTIES`] properties (then any object). `false` subschemas forbid what
//! they describe: a property that is `false` is never generated, `items: false` allows only
//! `[]`.

use serde_json::{Map, Value};

use super::rules::*;
use super::vocabulary::{has_type, ANNOTATIONS, KEYWORDS, TYPED};

/// `schema` with what cannot be enforced dropped, each dropped keyword's path pushed to
/// `ignored`. The root becomes an object when it says nothing about its kind.
pub(super) fn relax_root(schema: &Value, ignored: &mut Vec<String>) -> Result<Value, SchemaError> {
    let mut relaxed = match schema {
        Value::Bool(true) => Value::Object(Map::new()),
        _ => relax(schema, "#", ignored)?,
    };
    if let Value::Object(map) = &mut relaxed {
        let decided = ["type", "const", "enum", "anyOf", "oneOf", "allOf", "$ref"];
        let inferred = ["properties", "required", "additionalProperties"];
        if !decided
            .iter()
            .chain(&inferred)
            .any(|k| map.contains_key(*k))
        {
            map.insert("type".into(), "object".into());
        }
    }
    Ok(relaxed)
}

fn relax(schema: &Value, path: &str, ignored: &mut Vec<String>) -> Result<Value, SchemaError> {
    let map = match schema {
        Value::Bool(_) => return Ok(schema.clone()),
        Value::Object(map) => map,
        _ => {
            return Err(SchemaError::at(
                path,
                "a schema must be an object or a boolean",
            ))
        }
    };
    let mut out = Map::new();
    let skip = |key: &str, ignored: &mut Vec<String>| ignored.push(format!("{path}/{key}"));
    let has = |key: &str| map.contains_key(key);
    let deciding = if has("$ref") {
        Some("$ref")
    } else if has("const") {
        Some("const")
    } else if has("enum") {
        Some("enum")
    } else if TYPED.iter().any(|k| has(k)) {
        None
    } else {
        ["anyOf", "oneOf", "allOf"].into_iter().find(|k| has(k))
    };
    for (key, value) in map {
        let key = key.as_str();
        let at = format!("{path}/{key}");
        if ANNOTATIONS.contains(&key) {
            let kept = match key {
                "$defs" | "definitions" => relax_each(value, &at, ignored)?,
                _ => value.clone(),
            };
            out.insert(key.into(), kept);
            continue;
        }
        let beside_deciding =
            deciding.is_some_and(|d| d != key && !(key == "type" && matches!(d, "const" | "enum")));
        let combinator = matches!(key, "anyOf" | "oneOf" | "allOf");
        if !(KEYWORDS.contains(&key) || key == "$ref")
            || beside_deciding
            || (combinator && deciding != Some(key))
        {
            skip(key, ignored);
            continue;
        }
        let kept = match key {
            "properties" => match relax_properties(value, &at, ignored)? {
                Some(kept) => kept,
                None => {
                    skip(key, ignored);
                    out.entry("type").or_insert_with(|| "object".into());
                    continue;
                }
            },
            "additionalProperties" if has("properties") => continue,
            "additionalProperties" if !value.is_boolean() => {
                skip(key, ignored);
                continue;
            }
            "required" => match relax_required(map, value, &at, ignored) {
                Some(kept) => kept,
                None => {
                    skip(key, ignored);
                    continue;
                }
            },
            "items" => match value {
                Value::Bool(false) => {
                    out.insert("maxItems".into(), 0.into());
                    continue;
                }
                Value::Array(_) => {
                    skip(key, ignored);
                    continue;
                }
                _ => relax(value, &at, ignored)?,
            },
            "maxItems" if map.get("items") == Some(&Value::Bool(false)) => continue,
            "allOf" if value.as_array().is_some_and(|all| all.len() != 1) => {
                skip(key, ignored);
                continue;
            }
            "anyOf" | "oneOf" | "allOf" => relax_alternatives(value, &at, ignored)?,
            "type" if deciding.is_some_and(|d| matches!(d, "const" | "enum")) => {
                let values: Vec<&Value> = match (map.get("const"), map.get("enum")) {
                    (Some(c), _) => vec![c],
                    (None, Some(Value::Array(e))) => e.iter().collect(),
                    _ => Vec::new(),
                };
                if values.iter().any(|v| !has_type(v, value)) {
                    skip(key, ignored);
                    continue;
                }
                value.clone()
            }
            _ => value.clone(),
        };
        out.insert(key.into(), kept);
    }
    Ok(Value::Object(out))
}

/// Every member of an object of schemas (`$defs`, `properties`) relaxed.
fn relax_each(value: &Value, path: &str, ignored: &mut Vec<String>) -> Result<Value, SchemaError> {
    let Value::Object(members) = value else {
        return Ok(value.clone());
    };
    let mut out = Map::new();
    for (name, schema) in members {
        out.insert(
            name.clone(),
            relax(schema, &format!("{path}/{name}"), ignored)?,
        );
    }
    Ok(Value::Object(out))
}

/// `properties` relaxed, `false` members left out (never generated); `None` past
/// [`MAX_PROPERTIES`] members (the object is then any object).
fn relax_properties(
    value: &Value,
    path: &str,
    ignored: &mut Vec<String>,
) -> Result<Option<Value>, SchemaError> {
    let relaxed = relax_each(value, path, ignored)?;
    let Value::Object(mut members) = relaxed else {
        return Ok(Some(relaxed));
    };
    members.retain(|_, schema| *schema != Value::Bool(false));
    Ok((members.len() <= MAX_PROPERTIES).then_some(Value::Object(members)))
}

/// `required` keeping only keys that `properties` describes (each other one reported);
/// `None` when no key is left.
fn relax_required(
    map: &Map<String, Value>,
    value: &Value,
    path: &str,
    ignored: &mut Vec<String>,
) -> Option<Value> {
    let properties = map.get("properties").and_then(Value::as_object);
    let too_many = properties
        .is_some_and(|p| p.values().filter(|s| **s != Value::Bool(false)).count() > MAX_PROPERTIES);
    let names = value.as_array()?;
    let mut kept = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let described = name.as_str().is_some_and(|n| {
            properties.is_some_and(|p| p.get(n).is_some_and(|s| *s != Value::Bool(false)))
        });
        if described && !too_many {
            kept.push(name.clone());
        } else if properties.is_some() && !too_many {
            ignored.push(format!("{path}/{i}"));
        }
    }
    (!kept.is_empty()).then_some(Value::Array(kept))
}

/// The alternatives of `anyOf` / `oneOf` / `allOf` relaxed; `false` ones left out.
fn relax_alternatives(
    value: &Value,
    path: &str,
    ignored: &mut Vec<String>,
) -> Result<Value, SchemaError> {
    let Value::Array(options) = value else {
        return Ok(value.clone());
    };
    let mut out = Vec::new();
    for (i, option) in options.iter().enumerate() {
        if *option != Value::Bool(false) {
            out.push(relax(option, &format!("{path}/{i}"), ignored)?);
        }
    }
    Ok(Value::Array(out))
}
