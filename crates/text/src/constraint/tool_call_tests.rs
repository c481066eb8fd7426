use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::constraint::{TokenMasks, TokenTrie};

fn tools() -> Vec<Tool> {
    let weather = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1}
        },
        "required": ["city"],
        "additionalProperties": false
    });
    let shell = json!({
        "type": "object",
        "properties": {"command": {"type": "array", "items": {"type": "string"}}},
        "required": ["command"]
    });
    vec![
        Tool::compile("get_weather", &weather).unwrap().0,
        Tool::compile("shell", &shell).unwrap().0,
        Tool::compile("noop", &json!({})).unwrap().0,
    ]
}

fn rules(framing: ToolCallFraming, mode: ToolCallMode) -> ToolCallRules {
    ToolCallRules::new(&tools(), &framing, &mode).unwrap()
}

fn forced(tool: Option<&str>) -> ToolCallMode {
    ToolCallMode::Forced {
        tool: tool.map(String::from),
    }
}

/// The state after `text`, byte by byte.
fn after(rules: &ToolCallRules, text: &str) -> Option<ToolCallRecognizer> {
    ToolCallRecognizer::new(rules).after(rules, text.as_bytes())
}

fn complete(rules: &ToolCallRules, text: &str) -> bool {
    after(rules, text).is_some_and(|s| s.is_complete())
}

const WEATHER: &str = r#"{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}"#;

#[test]
fn a_forced_named_call_accepts_exactly_that_tool() {
    let r = rules(ToolCallFraming::hermes(), forced(Some("get_weather")));
    for text in [
        format!("<tool_call>\n{WEATHER}\n</tool_call>"),
        format!("<tool_call>{WEATHER}</tool_call>"),
        format!("<tool_call>\n\n{WEATHER} \n</tool_call>"),
    ] {
        assert!(complete(&r, &text), "refused {text}");
    }
    for text in [
        format!("Sure! <tool_call>\n{WEATHER}\n</tool_call>"),
        format!("<tool_call>\n\n\n{WEATHER}\n</tool_call>"),
        r#"<tool_call>{"name": "shell", "arguments": {"command": []}}</tool_call>"#.into(),
        r#"<tool_call>{"arguments": {"city": "x"}, "name": "get_weather"}</tool_call>"#.into(),
        r#"<tool_call>{"name": "get_weather", "arguments": {"days": 3}}</tool_call>"#.into(),
        r#"<tool_call>{"name": "get_weather", "arguments": {"city": 3}}</tool_call>"#.into(),
        r#"<tool_call>{"name": "get_weather"}</tool_call>"#.into(),
        format!("<tool_call>\n{WEATHER}\n</tool_call>\n"),
    ] {
        assert!(!complete(&r, &text), "accepted {text}");
    }
    assert!(
        !complete(&r, &format!("<tool_call>\n{WEATHER}")),
        "no suffix yet"
    );
}

#[test]
fn a_required_call_takes_any_tool_with_that_tools_arguments() {
    let r = rules(ToolCallFraming::hermes(), forced(None));
    assert!(complete(
        &r,
        &format!("<tool_call>\n{WEATHER}\n</tool_call>")
    ));
    let shell =
        r#"<tool_call>{"name": "shell", "arguments": {"command": ["ls", "-la"]}}</tool_call>"#;
    assert!(complete(&r, shell));
    let noop =
        r#"<tool_call>{"name": "noop", "arguments": {"anything": [1, {"x": null}]}}</tool_call>"#;
    assert!(complete(&r, noop));
    let crossed = r#"<tool_call>{"name": "shell", "arguments": {"city": "Oslo"}}</tool_call>"#;
    assert!(!complete(&r, crossed));
    let unknown = r#"<tool_call>{"name": "rm", "arguments": {}}</tool_call>"#;
    assert!(!complete(&r, unknown));
    let not_object = r#"<tool_call>{"name": "noop", "arguments": []}</tool_call>"#;
    assert!(!complete(&r, not_object));
}

#[test]
fn llama3_and_envelope_framings() {
    let llama = rules(ToolCallFraming::llama3_json(), forced(None));
    assert!(complete(
        &llama,
        r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#
    ));
    assert!(!complete(&llama, WEATHER), "llama 3 writes \"parameters\"");
    let envelope = rules(ToolCallFraming::envelope(), forced(Some("shell")));
    assert!(complete(
        &envelope,
        r#"{"tool_calls": [{"name": "shell", "arguments": {"command": ["pwd"]}}]}"#
    ));
    assert!(complete(
        &envelope,
        "{\"tool_calls\": [\n{\"name\": \"shell\", \"arguments\": {\"command\": []}}\n]}"
    ));
    assert!(!complete(
        &envelope,
        r#"{"tool_calls":[{"name": "shell", "arguments": {"command": []}}]}"#
    ));
    // No trigger: auto output is free.
    let auto = rules(ToolCallFraming::llama3_json(), ToolCallMode::Auto);
    let text = after(&auto, "{\"name\": \"nothing\"} and prose").unwrap();
    assert!(!text.in_call() && !text.is_complete());
}

#[test]
fn auto_mode_is_text_then_a_call_then_text() {
    let r = rules(ToolCallFraming::hermes(), ToolCallMode::Auto);
    let start = ToolCallRecognizer::new(&r);
    assert!(!start.in_call() && start.after_byteless(&r).is_some());
    let text = "Let me check <tool the weather. <tool_call>";
    let state = after(&r, text).unwrap();
    assert!(state.in_call(), "the trigger opens a call");
    assert!(state.after_byteless(&r).is_none(), "no EOS inside a call");
    assert!(
        state.after(&r, b"hello").is_none(),
        "only the call may follow"
    );
    let state = state
        .after(&r, format!("\n{WEATHER}\n").as_bytes())
        .unwrap();
    assert!(state.in_call() && state.after_byteless(&r).is_none());
    let state = state.after(&r, b"</tool_call>").unwrap();
    assert!(!state.in_call() && !state.is_complete());
    assert!(state.after_byteless(&r).is_some(), "EOS after the call");
    let state = state
        .after(&r, b"\nAnd a second one: <tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call> done")
        .unwrap();
    assert!(!state.in_call());
    let broken = after(&r, r#"<tool_call>{"name": "rm"#);
    assert!(broken.is_none(), "a call to an unknown tool is refused");
}

#[test]
fn a_partial_trigger_falls_back_like_text() {
    let r = rules(ToolCallFraming::hermes(), ToolCallMode::Auto);
    // Overlapping starts: `<tool_` then `<tool_call>`; `<<tool_call>`.
    for text in ["<tool_<tool_call>", "<<tool_call>", "<tool_call<tool_call>"] {
        assert!(after(&r, text).unwrap().in_call(), "{text}");
    }
    for text in ["<tool_cal>", "<tool call>", "tool_call>"] {
        assert!(!after(&r, text).unwrap().in_call(), "{text}");
    }
    // A token with no bytes breaks a partial trigger.
    let partial = after(&r, "<tool_").unwrap();
    let broken = partial.after_byteless(&r).unwrap();
    assert!(!broken.after(&r, b"call>").unwrap().in_call());
    assert!(partial.after(&r, b"call>").unwrap().in_call());
}

fn vocab() -> Vec<Option<Vec<u8>>> {
    let words: &[&str] = &[
        "<",
        "tool",
        "_call",
        ">",
        "<tool_call>",
        ">\n{\"",
        "\n",
        "{\"",
        "name",
        "\":",
        " \"",
        "get_weather",
        "\",",
        " \"arguments",
        "\": {",
        "city",
        "Oslo",
        "\"}}",
        "\n</",
        "</",
        "}",
        "\"",
        " ",
        "shell",
        "noop",
        "Hello",
        " world",
        "{",
        "]}",
        "[",
        "\"]",
        "command",
        "ls",
        "_weather",
        "get",
        "}}\n</tool_call>",
    ];
    let mut v: Vec<Option<Vec<u8>>> = words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
    v.push(None); // end-of-sequence
    v
}

/// In many states of each mode, the trie walk's mask is exactly the tokens a brute-force try
/// accepts (end-of-sequence included where a token with no bytes may come).
#[test]
fn masks_equal_trying_every_token() {
    let tokens = vocab();
    let trie = Arc::new(TokenTrie::new(tokens.clone(), tokens.len() + 3));
    let cases: [(ToolCallFraming, ToolCallMode, &[&str]); 3] = [
        (
            ToolCallFraming::hermes(),
            ToolCallMode::Auto,
            &[
                "",
                "Hello <tool",
                "<tool_call>",
                "<tool_call>\n{\"name\": \"get",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
                "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>",
            ],
        ),
        (
            ToolCallFraming::hermes(),
            forced(Some("get_weather")),
            &[
                "",
                "<tool_call>",
                "<tool_call>\n{\"",
                "<tool_call>\n{\"name\": \"",
            ],
        ),
        (
            ToolCallFraming::envelope(),
            forced(None),
            &[
                "",
                "{\"tool_calls\": [",
                "{\"tool_calls\": [{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}",
            ],
        ),
    ];
    for (framing, mode, prefixes) in cases {
        let masks = TokenMasks::new(Arc::clone(&trie), Arc::new(rules(framing, mode)));
        for prefix in prefixes {
            let state = after(masks.rules(), prefix).unwrap_or_else(|| panic!("{prefix}"));
            let set = masks.allowed(&state);
            for (id, bytes) in tokens.iter().enumerate() {
                let expected = match bytes {
                    Some(b) => state.after(masks.rules(), b).is_some(),
                    None => state.after_byteless(masks.rules()).is_some(),
                };
                assert_eq!(set.contains(id as u32), expected, "{prefix:?} token {id}");
                assert_eq!(masks.after_token(state, id as u32).is_some(), expected);
            }
            assert!(
                !set.contains(tokens.len() as u32 + 1),
                "past the vocabulary"
            );
            assert!(!set.is_empty(), "{prefix:?}: a dead end");
        }
    }
}

#[test]
fn a_token_may_finish_the_trigger_and_go_on_into_the_call() {
    let tokens = vocab();
    let trie = Arc::new(TokenTrie::new(tokens.clone(), tokens.len()));
    let masks = TokenMasks::new(
        trie,
        Arc::new(rules(ToolCallFraming::hermes(), ToolCallMode::Auto)),
    );
    let id = |w: &str| {
        tokens
            .iter()
            .position(|t| t.as_deref() == Some(w.as_bytes()))
            .unwrap() as u32
    };
    let mut state = ToolCallRecognizer::new(masks.rules());
    for word in [
        "Hello", "<", "tool", "_call", ">\n{\"", "name", "\":", " \"", "get", "_weather",
    ] {
        state = masks
            .after_token(state, id(word))
            .unwrap_or_else(|| panic!("{word}"));
    }
    assert!(state.in_call());
    let eos = tokens.len() as u32 - 1;
    assert!(!masks.allowed(&state).contains(eos));
    for word in [
        "\",",
        " \"arguments",
        "\": {",
        "\"",
        "city",
        "\":",
        " \"",
        "Oslo",
        "\"}}",
        "\n</",
        "tool",
        "_call",
        ">",
    ] {
        state = masks
            .after_token(state, id(word))
            .unwrap_or_else(|| panic!("{word}"));
    }
    assert!(!state.in_call());
    assert!(masks.allowed(&state).contains(eos));
    assert!(masks.after_token(state, eos).is_some());
}

#[test]
fn rules_refuse_unknown_tools_and_bad_framings() {
    let unknown = ToolCallRules::new(&tools(), &ToolCallFraming::hermes(), &forced(Some("rm")));
    assert_eq!(
        unknown.unwrap_err(),
        ToolCallError::UnknownTool("rm".into())
    );
    let mut empty_trigger = ToolCallFraming::hermes();
    empty_trigger.trigger = Some(Vec::new());
    assert!(ToolCallRules::new(&tools(), &empty_trigger, &ToolCallMode::Auto).is_err());
    let mut twice = tools();
    twice.push(twice[0].clone());
    assert!(ToolCallRules::new(&twice, &ToolCallFraming::hermes(), &ToolCallMode::Auto).is_err());
    assert!(ToolCallRules::new(&[], &ToolCallFraming::hermes(), &forced(None)).is_err());
    let (_, ignored) =
        Tool::compile("t", &json!({"properties": {"a": {"multipleOf": 2}}})).unwrap();
    assert_eq!(ignored, ["#/properties/a/multipleOf"]);
    // A pattern the regex engine cannot take (look-ahead) is left out and reported.
    let (_, ignored) =
        Tool::compile("t", &json!({"properties": {"a": {"pattern": "(?=x)"}}})).unwrap();
    assert_eq!(ignored, ["#/properties/a/pattern"]);
}
