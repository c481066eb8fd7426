//! Hermes and Qwen XML on outputs shaped like the models' (from their chat templates).

use super::tests::{call, options, parse_every_way, turn};
use super::*;
use serde_json::json;

fn hermes() -> TurnOptions {
    options(Some(ToolCallFormat::Hermes), false)
}

const WEATHER: &str =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>";

#[test]
fn hermes_single_call() {
    let expected = turn(
        "",
        "",
        vec![call(
            "get_weather",
            "{\"city\": \"Paris\", \"unit\": \"celsius\"}",
        )],
        0,
    );
    assert_eq!(parse_every_way(WEATHER, &hermes()), expected);
}

#[test]
fn hermes_text_before_between_and_after_calls() {
    let text = format!(
        "I'll check both cities.\n\n{WEATHER}\n{}\n\nDone.",
        WEATHER.replace("Paris", "Lyon")
    );
    let expected = turn(
        "",
        "I'll check both cities.Done.",
        vec![
            call(
                "get_weather",
                "{\"city\": \"Paris\", \"unit\": \"celsius\"}",
            ),
            call("get_weather", "{\"city\": \"Lyon\", \"unit\": \"celsius\"}"),
        ],
        0,
    );
    assert_eq!(parse_every_way(&text, &hermes()), expected);
}

#[test]
fn hermes_calls_after_reasoning_and_markup_inside_reasoning_is_text() {
    let text = format!(
        "<think>\nMaybe <tool_call>{{\"name\": \"x\"}}</tool_call>? No, call the tool.\n</think>\n\n{WEATHER}"
    );
    let parsed = parse_every_way(&text, &options(Some(ToolCallFormat::Hermes), true));
    assert_eq!(
        parsed.reasoning,
        "Maybe <tool_call>{\"name\": \"x\"}</tool_call>? No, call the tool."
    );
    assert_eq!((parsed.content.as_str(), parsed.tool_calls.len()), ("", 1));
}

#[test]
fn hermes_arguments_keep_the_generated_whitespace_and_nesting() {
    let text = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\n  \"q\": \"a } b\",\n  \"filters\": [{\"k\": null}]\n}}\n</tool_call>";
    let parsed = parse_every_way(text, &hermes());
    assert_eq!(
        parsed.tool_calls,
        vec![call(
            "search",
            "{\n  \"q\": \"a } b\",\n  \"filters\": [{\"k\": null}]\n}"
        )]
    );
}

#[test]
fn hermes_arguments_as_a_string_become_the_object() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>";
    assert_eq!(
        parse_every_way(text, &hermes()),
        turn("", "", vec![call("f", "{\"a\": 1}")], 0)
    );
}

#[test]
fn hermes_call_without_arguments_has_an_empty_object() {
    let text = "<tool_call>\n{\"name\": \"now\"}\n</tool_call>";
    assert_eq!(
        parse_every_way(text, &hermes()),
        turn("", "", vec![call("now", "{}")], 0)
    );
}

#[test]
fn hermes_garbage_markup_is_content_and_counted() {
    let text = "Sure. <tool_call>garbage</tool_call> ok";
    let expected = turn("", "Sure. <tool_call>garbage</tool_call> ok", vec![], 1);
    assert_eq!(parse_every_way(text, &hermes()), expected);
    let nameless = "<tool_call>{\"arguments\": {}}</tool_call>";
    assert_eq!(
        parse_every_way(nameless, &hermes()),
        turn("", nameless, vec![], 1)
    );
}

#[test]
fn hermes_started_call_with_broken_arguments_keeps_them_raw() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1 oops}\n</tool_call>after";
    let expected = turn("", "after", vec![call("f", "{\"a\": 1 oops}\n")], 1);
    assert_eq!(parse_every_way(text, &hermes()), expected);
}

#[test]
fn hermes_unclosed_call_at_the_end() {
    let complete = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}";
    assert_eq!(
        parse_every_way(complete, &hermes()),
        turn("", "", vec![call("f", "{\"a\": 1}")], 0)
    );
    let closing = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_";
    assert_eq!(
        parse_every_way(closing, &hermes()),
        turn("", "", vec![call("f", "{\"a\": 1}")], 0)
    );
    let cut = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1";
    assert_eq!(
        parse_every_way(cut, &hermes()),
        turn("", "", vec![call("f", "{\"a\": 1")], 1)
    );
    for named in [
        "<tool_call>\n{\"name\": \"f\"",
        "<tool_call>\n{\"name\": \"f\", \"arguments\"",
    ] {
        assert_eq!(
            parse_every_way(named, &hermes()),
            turn("", "", vec![call("f", "")], 1),
            "{named:?}"
        );
    }
    let nameless = "Let me check. <tool_call>\n{\"na";
    assert_eq!(
        parse_every_way(nameless, &hermes()),
        turn("", "Let me check.", vec![], 1)
    );
}

#[test]
fn a_forced_hermes_call_cut_inside_its_opening_marker_shows_nothing() {
    let forced = TurnOptions {
        forced_opening: Some("<tool_call>".to_string()),
        ..hermes()
    };
    for text in ["<", " <tool_ca", "<tool_call>", "<tool_call>\n{\"na"] {
        assert_eq!(
            parse_every_way(text, &forced),
            turn("", "", vec![], 1),
            "{text:?}"
        );
    }
    // Not forced, a text that ends in what could have become a marker is the model's text.
    assert_eq!(
        parse_every_way("<tool_ca", &hermes()),
        turn("", "<tool_ca", vec![], 0)
    );
}

#[test]
fn hermes_partial_markers_that_are_not_markers_are_released() {
    for text in ["a < b", "x <tool", "if a <tool_cal b", "done </tool_call>"] {
        assert_eq!(
            parse_every_way(text, &hermes()),
            turn("", text, vec![], 0),
            "{text:?}"
        );
    }
}

#[test]
fn hermes_list_inside_one_tag_is_several_calls() {
    let text = "<tool_call>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"x\": 2}}]</tool_call>";
    let expected = turn("", "", vec![call("a", "{}"), call("b", "{\"x\": 2}")], 0);
    assert_eq!(parse_every_way(text, &hermes()), expected);
}

#[test]
fn hermes_close_tag_inside_an_argument_string_is_text() {
    let text =
        "<tool_call>{\"name\": \"echo\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>";
    let expected = turn("", "", vec![call("echo", "{\"s\": \"</tool_call>\"}")], 0);
    assert_eq!(parse_every_way(text, &hermes()), expected);
}

fn qwen_xml() -> TurnOptions {
    let mut opts = options(Some(ToolCallFormat::QwenXml), true);
    opts.tool_schemas.insert(
        "get_weather".to_string(),
        json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "zip": {"type": "string"}, "opts": {"type": "object"}
        }}),
    );
    opts
}

const QWEN_CALL: &str = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n</tool_call>";

#[test]
fn qwen_xml_parameters_are_typed_by_the_schema() {
    let expected = turn(
        "",
        "",
        vec![call(
            "get_weather",
            "{\"city\": \"Paris\", \"days\": 3, \"zip\": \"75001\"}",
        )],
        0,
    );
    assert_eq!(parse_every_way(QWEN_CALL, &qwen_xml()), expected);
}

#[test]
fn qwen_xml_unknown_parameters_are_json_when_they_parse() {
    let text = "<tool_call>\n<function=run>\n<parameter=n>\n7\n</parameter>\n<parameter=code>\nprint(\"hi\")\n\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n</function>\n</tool_call>";
    let expected = turn(
        "",
        "",
        vec![call(
            "run",
            "{\"n\": 7, \"code\": \"print(\\\"hi\\\")\\n\", \"opts\": {\"a\":[1]}}",
        )],
        0,
    );
    assert_eq!(parse_every_way(text, &qwen_xml()), expected);
}

#[test]
fn qwen_xml_after_reasoning_with_text_and_two_calls() {
    let text = format!(
        "<think>\nTwo lookups; <tool_call> here is just text.\n</think>\n\nChecking.\n{QWEN_CALL}\n{}",
        QWEN_CALL.replace("Paris", "Rome")
    );
    let parsed = parse_every_way(&text, &qwen_xml());
    assert_eq!(
        parsed.reasoning,
        "Two lookups; <tool_call> here is just text."
    );
    assert_eq!(parsed.content, "Checking.");
    assert_eq!(parsed.tool_calls.len(), 2);
    assert!(parsed.tool_calls[1].arguments.contains("Rome"));
}

#[test]
fn qwen_xml_accepts_a_hermes_json_call() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let expected = turn("", "", vec![call("get_weather", "{\"city\": \"Oslo\"}")], 0);
    assert_eq!(parse_every_way(text, &qwen_xml()), expected);
}

#[test]
fn qwen_xml_malformed_and_unfinished() {
    let garbage = "<tool_call>\n<function get_weather>\n</tool_call>";
    assert_eq!(
        parse_every_way(garbage, &qwen_xml()),
        turn("", garbage, vec![], 1)
    );
    let cut = "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar";
    let expected = turn("", "", vec![call("get_weather", "{\"city\": \"Par\"}")], 0);
    assert_eq!(parse_every_way(cut, &qwen_xml()), expected);
    for text in ["a <b", "x <tool_call"] {
        assert_eq!(
            parse_every_way(text, &qwen_xml()),
            turn("", text, vec![], 0),
            "{text:?}"
        );
    }
    // Cut off before the function's name: dropped, never shown.
    let nameless = "ok <tool_call>\n<func";
    assert_eq!(
        parse_every_way(nameless, &qwen_xml()),
        turn("", "ok", vec![], 1)
    );
}
