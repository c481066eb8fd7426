//! vLLM's `structured_outputs` and `guided_*`, llama-server's `grammar`: one constraint per
//! request, compiled, errors naming the field with a position.

use serde_json::json;

use super::*;

fn format_of(body: serde_json::Value) -> ResponseFormat {
    chat(body).unwrap().params.sampling.response_format
}

fn pattern_of(format: ResponseFormat) -> String {
    match format {
        ResponseFormat::Regex(regex) => regex.pattern().to_string(),
        other => panic!("expected a regex, got {other:?}"),
    }
}

#[test]
fn every_field_gives_its_constraint() {
    let regex = format_of(json!({"structured_outputs": {"regex": "[0-9]+"}}));
    assert_eq!(pattern_of(regex), "[0-9]+");
    assert_eq!(pattern_of(format_of(json!({"guided_regex": "a|b"}))), "a|b");
    let choice = format_of(json!({"structured_outputs": {"choice": ["a.b", "c"]}}));
    assert_eq!(pattern_of(choice), r"a\.b|c");
    let choice = format_of(json!({"guided_choice": ["x"]}));
    assert_eq!(pattern_of(choice), "x");
    for body in [
        json!({"structured_outputs": {"grammar": "root ::= \"a\""}}),
        json!({"guided_grammar": "root ::= \"a\""}),
        json!({"grammar": "root ::= \"a\""}),
    ] {
        let ResponseFormat::Grammar(grammar) = format_of(body) else {
            panic!("expected a grammar")
        };
        assert_eq!(grammar.text(), "root ::= \"a\"");
    }
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    for body in [
        json!({"structured_outputs": {"json": schema}}),
        json!({"guided_json": schema}),
        json!({"guided_json": schema.to_string()}),
    ] {
        assert!(matches!(format_of(body), ResponseFormat::JsonSchema(_)));
    }
    assert_eq!(
        format_of(json!({"structured_outputs": {"json_object": true}})),
        ResponseFormat::JsonObject
    );
    let on_completions = completion(json!({"guided_regex": "x"})).unwrap();
    assert!(matches!(
        on_completions.params.sampling.response_format,
        ResponseFormat::Regex(_)
    ));
}

#[test]
fn two_constraints_are_a_400_naming_both() {
    let both = chat(json!({"guided_regex": "a", "grammar": "root ::= \"a\""}));
    assert_eq!(rejected_param(both), "grammar");
    let message = message_of(chat(json!({
        "response_format": {"type": "json_object"},
        "structured_outputs": {"choice": ["a"]}
    })));
    assert!(message.contains("response_format"), "{message}");
    assert!(message.contains("structured_outputs.choice"), "{message}");
    // A text response_format is no constraint.
    let text = json!({"response_format": {"type": "text"}, "guided_regex": "a"});
    assert!(matches!(format_of(text), ResponseFormat::Regex(_)));
}

#[test]
fn a_bad_regex_or_grammar_names_its_field_and_position() {
    let bad = chat(json!({"structured_outputs": {"regex": "[0-9]{3}-[a-z"}}));
    let message = message_of(bad);
    assert!(
        message.starts_with("structured_outputs.regex: "),
        "{message}"
    );
    assert!(
        message.contains("at byte 9 (line 1, column 10)"),
        "{message}"
    );
    assert_eq!(
        rejected_param(chat(json!({"guided_regex": "("}))),
        "guided_regex"
    );
    let message = message_of(chat(json!({"grammar": "root ::= \"a\"\nx ::= y"})));
    assert!(message.starts_with("grammar: "), "{message}");
    assert!(message.contains("line 2, column 7"), "{message}");
    assert!(message.contains("`y` is not defined"), "{message}");
    assert_eq!(
        rejected_param(chat(json!({"guided_choice": []}))),
        "guided_choice"
    );
    assert_eq!(
        rejected_param(chat(json!({"guided_json": "{not json"}))),
        "guided_json"
    );
}
