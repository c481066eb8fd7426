//! JSON written the way Python's `json.dumps` writes it, for the `tojson` template filter.
//!
//! Chat templates are written against transformers, whose `tojson` is
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`. The prompt a
//! model sees must match what it was trained on byte for byte, so the spaces after `,` and `:`,
//! the indentation and the escaping follow Python, not `serde_json` (which writes `{"a":1}` where
//! Python writes `{"a": 1}`).

use serde_json::Value as Json;
use std::fmt::Write;

/// How to lay out JSON text; the fields mirror `json.dumps`' keyword arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonJsonStyle {
    /// Indentation per level; `None` writes everything on one line.
    pub indent: Option<String>,
    /// Escape every non-ASCII character as `\uXXXX`.
    pub ensure_ascii: bool,
    /// Separator between items; Python's default is `", "` without indent and `","` with it.
    pub item_separator: String,
    /// Separator between a key and its value; Python's default is `": "`.
    pub key_separator: String,
    /// Write object keys in sorted order instead of insertion order.
    pub sort_keys: bool,
}

impl PythonJsonStyle {
    /// Python's defaults for the given indentation (`separators=None`, `sort_keys=False`).
    pub fn new(indent: Option<String>, ensure_ascii: bool) -> PythonJsonStyle {
        let item_separator = if indent.is_some() { "," } else { ", " };
        PythonJsonStyle {
            indent,
            ensure_ascii,
            item_separator: item_separator.to_string(),
            key_separator: ": ".to_string(),
            sort_keys: false,
        }
    }
}

/// Writes `value` as `json.dumps` would with the given style.
pub fn to_python_json(value: &Json, style: &PythonJsonStyle) -> String {
    let mut out = String::new();
    write_value(&mut out, value, style, 0);
    out
}

fn write_value(out: &mut String, value: &Json, style: &PythonJsonStyle, depth: usize) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => write!(out, "{i}").expect("writing to a String cannot fail"),
            (None, Some(u), _) => write!(out, "{u}").expect("writing to a String cannot fail"),
            (None, None, Some(f)) => out.push_str(&python_float_repr(f)),
            (None, None, None) => out.push_str(&n.to_string()),
        },
        Json::String(s) => write_string(out, s, style.ensure_ascii),
        Json::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_separator);
                }
                write_newline_indent(out, style, depth + 1);
                write_value(out, item, style, depth + 1);
            }
            write_newline_indent(out, style, depth);
            out.push(']');
        }
        Json::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<(&String, &Json)> = map.iter().collect();
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_separator);
                }
                write_newline_indent(out, style, depth + 1);
                write_string(out, key, style.ensure_ascii);
                out.push_str(&style.key_separator);
                write_value(out, item, style, depth + 1);
            }
            write_newline_indent(out, style, depth);
            out.push('}');
        }
    }
}

fn write_newline_indent(out: &mut String, style: &PythonJsonStyle, depth: usize) {
    if let Some(indent) = &style.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

fn write_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => write_unicode_escape(out, c as u32),
            // Python's ensure_ascii escapes everything outside ' '..='~', DEL included.
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write_unicode_escape(out, u32::from(*unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_unicode_escape(out: &mut String, unit: u32) {
    write!(out, "\\u{unit:04x}").expect("writing to a String cannot fail");
}

/// Python's `repr(float)`: shortest round-trip digits, `1.0` not `1`, exponent form (`1e+16`,
/// `1e-05`) outside `1e-4 <= |f| < 1e16`, and `NaN`/`Infinity` as `json.dumps` writes them.
pub(crate) fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let magnitude = f.abs();
    if f == 0.0 || (1e-4..1e16).contains(&magnitude) {
        let plain = format!("{f:?}");
        return if plain.contains('.') || plain.contains('e') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    // `{:e}` gives the shortest round-trip mantissa, e.g. "1e16" or "1.5e-7".
    let exp_form = format!("{f:e}");
    let (mantissa, exponent) = exp_form
        .split_once('e')
        .expect("`{:e}` formatting always contains an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compact_style_puts_spaces_after_commas_and_colons_like_python() {
        let value = json!({"name": "get_weather", "args": [1, 2.5, true, null]});
        let text = to_python_json(&value, &PythonJsonStyle::new(None, false));
        assert_eq!(
            text,
            r#"{"name": "get_weather", "args": [1, 2.5, true, null]}"#
        );
    }

    #[test]
    fn indented_style_matches_python_indent_4() {
        let value = json!({"a": [1, {}], "b": {"c": []}});
        let text = to_python_json(&value, &PythonJsonStyle::new(Some("    ".into()), false));
        let expected = "{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": []\n    }\n}";
        assert_eq!(text, expected);
    }

    #[test]
    fn object_keys_keep_insertion_order_unless_sorted() {
        let value: Json = serde_json::from_str(r#"{"z": 1, "a": 2}"#).unwrap();
        let mut style = PythonJsonStyle::new(None, false);
        assert_eq!(to_python_json(&value, &style), r#"{"z": 1, "a": 2}"#);
        style.sort_keys = true;
        assert_eq!(to_python_json(&value, &style), r#"{"a": 2, "z": 1}"#);
    }

    #[test]
    fn ensure_ascii_escapes_non_ascii_with_surrogate_pairs() {
        let value = json!("é日🙂\u{7f}<&>'");
        assert_eq!(
            to_python_json(&value, &PythonJsonStyle::new(None, true)),
            r#""\u00e9\u65e5\ud83d\ude42\u007f<&>'""#
        );
        assert_eq!(
            to_python_json(&value, &PythonJsonStyle::new(None, false)),
            "\"é日🙂\u{7f}<&>'\""
        );
    }

    #[test]
    fn control_characters_are_escaped_like_python() {
        let value = json!("a\"b\\c\nd\te\u{1}");
        assert_eq!(
            to_python_json(&value, &PythonJsonStyle::new(None, false)),
            r#""a\"b\\c\nd\te\u0001""#
        );
    }

    #[test]
    fn floats_are_written_as_python_repr() {
        assert_eq!(python_float_repr(1.0), "1.0");
        assert_eq!(python_float_repr(-0.5), "-0.5");
        assert_eq!(python_float_repr(0.1), "0.1");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1.5e-7), "1.5e-07");
        assert_eq!(python_float_repr(0.0001), "0.0001");
        assert_eq!(python_float_repr(123456789.125), "123456789.125");
        assert_eq!(python_float_repr(f64::NAN), "NaN");
    }
}
