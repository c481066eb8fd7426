use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;
use crate::constraint::MAX_INDENT;

fn complete(text: &[u8]) -> bool {
    JsonRecognizer::new()
        .after(text)
        .is_some_and(|s| s.is_complete())
}

/// Every proper prefix is accepted and incomplete; the whole is accepted and complete.
fn assert_recognized(text: &[u8]) {
    let mut state = JsonRecognizer::new();
    for (i, &b) in text.iter().enumerate() {
        assert!(!state.is_complete(), "complete before byte {i} of {text:?}");
        assert!(
            state.advance(b),
            "refused byte {i} ({:?}) of {:?}",
            b as char,
            String::from_utf8_lossy(text)
        );
    }
    assert!(
        state.is_complete(),
        "not complete: {:?}",
        String::from_utf8_lossy(text)
    );
}

#[test]
fn accepts_objects_of_every_kind_of_value() {
    for text in [
        r#"{}"#,
        r#"{"a":1}"#,
        r#"{ "a" : [ 1 , -2.5e+3 , 0 , 0.25 , 1E9 , -0 ] , "b" : { } }"#,
        "{\n\t\"a\": [\n\t\t1\n\t]\n}",
        r#"{"t":true,"f":false,"n":null,"s":"x\"y\\z\/\b\f\n\r\tA\u00e9\uD83D\ude00\uFFFF"}"#,
        "{\"ü\":\"日本 😀\"}",
        "{\n  \"nested\": [[], [{}], [[1]]]\n}",
        r#"{"a":[true,false,null,"",{"b":[]}]}"#,
    ] {
        assert_recognized(text.as_bytes());
    }
}

#[test]
fn refuses_what_no_object_continues_with() {
    for text in [
        "[1]",
        "1",
        "\"s\"",
        "{a:1}",
        "{'a':1}",
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":-}"#,
        r#"{"a":1e}"#,
        r#"{"a":.5}"#,
        r#"{"a":+1}"#,
        r#"{"a":tru}"#,
        r#"{"a":True}"#,
        r#"{"a":1,}"#,
        r#"{"a":[1,]}"#,
        r#"{"a" 1}"#,
        r#"{"a":1]"#,
        r#"{"a":[1}"#,
        "{\"a\":\"\u{1}\"}",
        "{\"a\":\"tab\there\"}",
        r#"{"a":"\x"}"#,
        r#"{"a":"\u12G4"}"#,
        r#"{"a":"\udc00"}"#, // a low surrogate alone
        r#"{"a":"\ud83d"}"#, // a high surrogate alone
        r#"{"a":"\ud83dx"}"#,
        r#"{"a":"\ud83d\u0041"}"#, // followed by something else than a low half
        r#"{"a":"\ud83d\ud83d"}"#,
        "{} ",
        " {}",
        "{  }",
        "{\n\n}",
        "{ \n}",
        "{\r\n}",
        "{}{}",
        r#"{"a":1}}"#,
    ] {
        assert!(!complete(text.as_bytes()), "accepted {text:?}");
        assert!(
            JsonRecognizer::new().after(text.as_bytes()).is_none(),
            "no byte of {text:?} was refused"
        );
    }
}

#[test]
fn the_same_position_is_the_same_state_whatever_was_closed_before() {
    let after = |text: &str| JsonRecognizer::new().after(text.as_bytes()).unwrap();
    assert_eq!(after(r#"{"a":{}"#), after(r#"{"a":[]"#));
    assert_eq!(after(r#"{"a":[{}],"b":"#), after(r#"{"a":[[]],"b":"#));
}

#[test]
fn refuses_invalid_utf8_in_strings() {
    for bytes in [
        &b"{\"\xc0\xaf\":1}"[..],    // overlong '/'
        b"{\"\xe0\x80\xaf\":1}",     // overlong
        b"{\"\xed\xa0\x80\":1}",     // surrogate
        b"{\"\xf4\x90\x80\x80\":1}", // above U+10FFFF
        b"{\"\x80\":1}",             // lone continuation
        b"{\"\xe6\x97\":1}",         // cut short
        b"{\"\xff\":1}",
    ] {
        assert!(JsonRecognizer::new().after(bytes).is_none(), "{bytes:?}");
    }
}

#[test]
fn indentation_and_depth_are_bounded() {
    use super::super::lex::INDENT_PER_LEVEL;
    // Inside one object: up to one level's indent after a newline.
    let indent = |n: usize| format!("{{\n{}}}", " ".repeat(n));
    assert!(complete(indent(INDENT_PER_LEVEL as usize).as_bytes()));
    assert!(!complete(indent(INDENT_PER_LEVEL as usize + 1).as_bytes()));
    // Deeper, a level more each; never past MAX_INDENT.
    let deep = |levels: usize, n: usize| {
        let open = "{\"a\":".repeat(levels - 1);
        format!("{open}{{\n{}}}{}", " ".repeat(n), "}".repeat(levels - 1))
    };
    assert!(complete(deep(3, 12).as_bytes()));
    assert!(!complete(deep(3, 13).as_bytes()));
    assert!(complete(deep(8, MAX_INDENT as usize).as_bytes()));
    assert!(!complete(deep(8, MAX_INDENT as usize + 1).as_bytes()));
    // Conventionally indented documents pass at every depth: 2 and 4 spaces a level, tabs.
    let doc = serde_json::json!({"a": {"b": [1, {"c": [true, null]}], "d": "x"}, "e": []});
    let two = serde_json::to_string_pretty(&doc).unwrap();
    assert!(complete(two.as_bytes()), "{two}");
    let four = two.replace("  ", "    ");
    assert!(complete(four.as_bytes()), "{four}");
    let tabs = two.replace("  ", "\t");
    assert!(complete(tabs.as_bytes()), "{tabs}");
    let nest = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n - 1), "]".repeat(n - 1));
    assert!(complete(nest(MAX_DEPTH as usize).as_bytes()));
    assert!(!complete(nest(MAX_DEPTH as usize + 1).as_bytes()));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::vec((any::<String>(), json_value()), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().collect()))
}

proptest! {
    /// Anything serde_json writes, compact or pretty, is recognized byte by byte.
    #[test]
    fn recognizes_what_serde_json_writes(object in json_object()) {
        assert_recognized(serde_json::to_string(&object).unwrap().as_bytes());
        assert_recognized(serde_json::to_string_pretty(&object).unwrap().as_bytes());
    }

    /// Sound: whatever the recognizer calls a complete document is a JSON object to serde_json.
    /// Mutations of valid documents probe the boundary from both sides.
    #[test]
    fn what_it_completes_parses_as_an_object(
        object in json_object(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut bytes = serde_json::to_vec(&object).unwrap();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = byte,
                _ => {}
            }
        }
        let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
        // The JSON grammar allows numbers past f64's range (`1e999`); serde_json refuses them.
        // (Lone surrogate escapes, which it also refuses, are refused here too.)
        let beyond_serde = parsed.as_ref().is_err_and(|e| {
            let e = e.to_string();
            e.contains("out of range")
        });
        if complete(&bytes) && !beyond_serde {
            prop_assert!(
                matches!(parsed, Ok(Value::Object(_))),
                "recognized {:?} but serde_json says {:?}", String::from_utf8_lossy(&bytes), parsed
            );
        }
        // And complete: serde_json's objects, unless they hold whitespace we limit (outside
        // strings; for simplicity any) or end in whitespace after the `}`.
        let whitespace = bytes.iter().any(|b| b.is_ascii_whitespace());
        if matches!(parsed, Ok(Value::Object(_))) && bytes.last() == Some(&b'}') && !whitespace {
            prop_assert!(complete(&bytes), "refused {:?}", String::from_utf8_lossy(&bytes));
        }
    }
}
