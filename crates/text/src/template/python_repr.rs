//! Values printed the way Python prints them, for templates that write `{{ tool }}` or
//! `{{ tools | string }}` and so put Python's `str()` of a dict into the prompt
//! (`{'type': 'function', ...}` with single quotes, `True`, `None`).

use super::python_json::python_float_repr;
use minijinja::value::{Value, ValueKind};
use serde_json::Value as Json;

/// Python's `str(value)` for a template value: strings as they are, containers as `repr`.
/// Returns `None` for values Python would not print differently from minijinja (numbers,
/// strings, undefined) or that have no JSON form, so the caller can fall back to the default.
pub fn python_str(value: &Value) -> Option<String> {
    match value.kind() {
        ValueKind::None => Some("None".to_string()),
        ValueKind::Bool => Some(if value.is_true() { "True" } else { "False" }.to_string()),
        ValueKind::Seq | ValueKind::Map => {
            let json = serde_json::to_value(value).ok()?;
            let mut out = String::new();
            write_repr(&mut out, &json);
            Some(out)
        }
        _ => None,
    }
}

fn write_repr(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("None"),
        Json::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Json::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => out.push_str(&python_float_repr(f)),
            _ => out.push_str(&n.to_string()),
        },
        Json::String(s) => write_string_repr(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Json::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string_repr(out, key);
                out.push_str(": ");
                write_repr(out, item);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`.
fn write_string_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || ('\u{7f}'..='\u{a0}').contains(&c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repr_of(json: Json) -> String {
        python_str(&Value::from_serialize(&json)).unwrap()
    }

    #[test]
    fn dicts_and_lists_print_as_python_repr() {
        let value: Json =
            serde_json::from_str(r#"{"name": "f", "ok": true, "n": null, "xs": [1, 2.5, "a"]}"#)
                .unwrap();
        assert_eq!(
            repr_of(value),
            "{'name': 'f', 'ok': True, 'n': None, 'xs': [1, 2.5, 'a']}"
        );
    }

    #[test]
    fn string_quotes_and_escapes_follow_python() {
        assert_eq!(repr_of(json!(["it's"])), r#"["it's"]"#);
        assert_eq!(repr_of(json!(["say \"hi\" it's"])), r#"['say "hi" it\'s']"#);
        assert_eq!(repr_of(json!(["a\nb\\c\u{1}é"])), r"['a\nb\\c\x01é']");
    }

    #[test]
    fn scalars_other_than_none_and_bool_are_left_to_the_default_formatting() {
        assert_eq!(python_str(&Value::from(())).as_deref(), Some("None"));
        assert_eq!(python_str(&Value::from(false)).as_deref(), Some("False"));
        assert_eq!(python_str(&Value::from("text")), None);
        assert_eq!(python_str(&Value::from(3)), None);
        assert_eq!(python_str(&Value::UNDEFINED), None);
    }
}
