//! A call of a `custom` tool (`validate/custom_tools.rs`) as the Responses API shows it: a
//! `custom_tool_call` item whose `input` is the text the model wrote as the `input` argument,
//! with `response.custom_tool_call_input.delta` / `.done` events in a stream.

use serde_json::Value;

/// The `input` text of a custom call's arguments as generated so far: the whole JSON object's
/// `input` when it parses; for arguments cut short by the token limit, the string written so
/// far (its escapes decoded); empty when not even that much came.
pub(super) fn custom_input(arguments: &str) -> String {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) {
        return map
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    // Cut short: the constraint wrote `{"input": "` first (keys in schema order), so close
    // the string and the object after the longest prefix that still parses.
    let Some(start) = arguments.find('"').and_then(|key| {
        let after_key = arguments[key..].find(':')? + key + 1;
        Some(after_key + arguments[after_key..].find('"')?)
    }) else {
        return String::new();
    };
    let text = &arguments[start..];
    // Drop a dangling escape or partial `\uXXXX` at the cut, one byte at a time.
    for end in (1..=text.len()).rev() {
        if !text.is_char_boundary(end) {
            continue;
        }
        if let Ok(Value::String(s)) = serde_json::from_str::<Value>(&format!("{}\"", &text[..end]))
        {
            return s;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_and_cut_arguments() {
        let whole = r#"{"input":"*** Begin Patch\n*** End Patch"}"#;
        assert_eq!(custom_input(whole), "*** Begin Patch\n*** End Patch");
        assert_eq!(custom_input(r#"{"input": "ab\n"#), "ab\n");
        assert_eq!(custom_input(r#"{"input": "ab\"#), "ab");
        assert_eq!(custom_input(r#"{"input": "ab\u00"#), "ab");
        assert_eq!(custom_input(r#"{"input": "#), "");
        assert_eq!(custom_input(r#"{"inp"#), "");
        assert_eq!(custom_input(""), "");
    }
}
