//! Llama 3 JSON, both Mistral spellings and the generic JSON envelope on outputs shaped like
//! the models' (from their chat templates).

use super::tests::{call, options, parse_every_way, turn};
use super::*;

fn llama() -> TurnOptions {
    options(Some(ToolCallFormat::Llama3Json), false)
}

#[test]
fn llama3_whole_message_call_with_parameters() {
    let text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
    let expected = turn(
        "",
        "",
        vec![call("get_weather", "{\"city\": \"Paris\"}")],
        0,
    );
    assert_eq!(parse_every_way(text, &llama()), expected);
}

#[test]
fn llama3_python_tag_and_several_calls() {
    let text = "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"arguments\": {}}";
    let expected = turn("", "", vec![call("a", "{\"x\": 1}"), call("b", "{}")], 0);
    assert_eq!(parse_every_way(text, &llama()), expected);
}

#[test]
fn llama3_text_answers_stay_content() {
    for text in [
        "The capital of France is Paris.",
        "{\"city\": \"Paris\"}",
        "{\"name\": \"Bob\", \"age\": 3}",
        "  {",
        "<|python",
        "a < b",
    ] {
        assert_eq!(
            parse_every_way(text, &llama()),
            turn("", text, vec![], 0),
            "{text:?}"
        );
    }
}

#[test]
fn llama3_calls_after_reasoning_and_text_after_calls() {
    let text =
        "<think>\nUse the tool.\n</think>\n\n{\"name\": \"f\", \"parameters\": {}}\nThat is all.";
    let expected = turn("Use the tool.", "That is all.", vec![call("f", "{}")], 0);
    assert_eq!(
        parse_every_way(text, &options(Some(ToolCallFormat::Llama3Json), true)),
        expected
    );
}

#[test]
fn llama3_malformed_calls() {
    for tagged in [
        "<|python_tag|>brave_search.call(query=\"x\")",
        "<|python_tag|>{\"a\": 1}",
    ] {
        assert_eq!(
            parse_every_way(tagged, &llama()),
            turn("", tagged, vec![], 1)
        );
    }
    let broken = "{\"name\": \"f\", \"parameters\": {\"a\": ]}";
    assert_eq!(
        parse_every_way(broken, &llama()),
        turn("", "", vec![call("f", "{\"a\": ]}")], 1)
    );
}

fn mistral() -> TurnOptions {
    options(Some(ToolCallFormat::MistralArgs), false)
}

#[test]
fn mistral_args_calls_repeated_after_text() {
    let text = "Let me look.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}";
    let expected = turn(
        "",
        "Let me look.",
        vec![
            call("get_weather", "{\"city\": \"Paris\"}"),
            call("get_time", "{}"),
        ],
        0,
    );
    assert_eq!(parse_every_way(text, &mistral()), expected);
}

#[test]
fn mistral_list_calls_and_text_after() {
    let text = "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}, {\"name\": \"b\", \"arguments\": {}}] ok";
    let expected = turn(
        "",
        "ok",
        vec![call("a", "{\"q\": \"x\"}"), call("b", "{}")],
        0,
    );
    let list = options(Some(ToolCallFormat::MistralList), false);
    assert_eq!(parse_every_way(text, &list), expected);
    assert_eq!(parse_every_way(text, &mistral()), expected);
}

#[test]
fn mistral_calls_after_reasoning() {
    let mut opts = mistral();
    opts.reasoning = Some(ReasoningSyntax {
        open: "[THINK]".to_string(),
        close: "[/THINK]".to_string(),
    });
    let text = "[THINK]Need weather; [TOOL_CALLS]x[ARGS]{} is text here.[/THINK][TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}";
    let expected = turn(
        "Need weather; [TOOL_CALLS]x[ARGS]{} is text here.",
        "",
        vec![call("get_weather", "{\"city\": \"Oslo\"}")],
        0,
    );
    assert_eq!(parse_every_way(text, &opts), expected);
}

#[test]
fn mistral_malformed_and_partial_markers() {
    let nameless = "[TOOL_CALLS] hello there";
    assert_eq!(
        parse_every_way(nameless, &mistral()),
        turn("", nameless, vec![], 1)
    );
    let broken = "[TOOL_CALLS]f[ARGS]{\"a\": 1 x}[TOOL_CALLS]g[ARGS]{}";
    let expected = turn("", "", vec![call("f", "{\"a\": 1 x}"), call("g", "{}")], 1);
    assert_eq!(parse_every_way(broken, &mistral()), expected);
    for text in ["a [b]", "list [TOOL_CA", "[TOOL_CALLS]f[AR"] {
        let malformed = u32::from(text.contains("[TOOL_CALLS]"));
        assert_eq!(
            parse_every_way(text, &mistral()),
            turn("", text, vec![], malformed),
            "{text:?}"
        );
    }
}

fn generic() -> TurnOptions {
    options(Some(ToolCallFormat::GenericJson), false)
}

#[test]
fn generic_envelope_tool_calls() {
    let text = "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]}";
    let expected = turn("", "", vec![call("f", "{\"a\": 1}"), call("g", "{}")], 0);
    assert_eq!(parse_every_way(text, &generic()), expected);
}

#[test]
fn generic_envelope_response_streams_decoded_text() {
    let text = "{\"response\": \"Caf\\u00e9 \\ud83d\\ude00 \\\"ok\\\"\\nbye\"}";
    let expected = turn("", "Café 😀 \"ok\"\nbye", vec![], 0);
    assert_eq!(parse_every_way(text, &generic()), expected);
}

#[test]
fn generic_envelope_after_reasoning_and_other_text_is_content() {
    let text = "<think>\nhm\n</think>\n{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}";
    let expected = turn("hm", "", vec![call("f", "{}")], 0);
    assert_eq!(
        parse_every_way(text, &options(Some(ToolCallFormat::GenericJson), true)),
        expected
    );
    for text in [
        "Plain answer.",
        "{\"answer\": 42}",
        "{\"tool_calls\": 5}",
        "a < b",
    ] {
        assert_eq!(
            parse_every_way(text, &generic()),
            turn("", text, vec![], 0),
            "{text:?}"
        );
    }
    let bad = "{\"tool_calls\": [garbage]}";
    assert_eq!(parse_every_way(bad, &generic()), turn("", bad, vec![], 1));
}

#[test]
fn generic_envelope_cut_by_the_token_limit_is_a_call_or_nothing_never_text() {
    let f = |arguments: &str| call("f", arguments);
    for (text, calls) in [
        (
            "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1",
            vec![f("{\"a\": 1")],
        ),
        (
            "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": ",
            vec![f("")],
        ),
        ("{\"tool_calls\": [{\"name\": \"f\", \"argu", vec![f("")]),
        ("{\"tool_calls\": [{\"name\": \"f\"", vec![f("")]),
        ("{\"tool_calls\": [{\"name\": \"f", vec![]),
        ("{\"tool_calls\": [{\"na", vec![]),
        ("{\"tool_calls\": [ ", vec![]),
        ("{\"tool_calls\":", vec![]),
        ("{\"tool", vec![]),
        ("{", vec![]),
        (
            "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"na",
            vec![f("{}")],
        ),
    ] {
        assert_eq!(
            parse_every_way(text, &generic()),
            turn("", "", calls, 1),
            "{text:?}"
        );
    }
}
