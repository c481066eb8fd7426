//! The Responses API's `custom` tools, as Codex sends `apply_patch`: a forced call comes back
//! as a `custom_tool_call` item whose `input` is a sentence of the tool's Lark grammar (checked
//! with the grammar's own recognizer, not the expression the server derived from it), streamed
//! as `response.custom_tool_call_input.*` events that fold to the same item; the call and its
//! output go back in as input items.

use std::sync::Arc;

use serde_json::{json, Value};
use sluice_text::constraint::{Grammar, GrammarRecognizer, GrammarStates, Recognizer};

use crate::agents::named_events;
use crate::server::{fixture, post_json, post_stream, start, MODEL_ID};

/// Codex's `apply_patch` grammar.
const APPLY_PATCH: &str = include_str!("../../fixtures/grammars/codex_apply_patch.lark");

/// A bounded grammar: every forced call finishes within the budget.
const MOVES: &str = "start: move (\", \" move){0,2}\nmove: DIR \" \" DIGIT DIGIT?\nDIR: \"north\" | \"south\" | \"east\"\n%import common.DIGIT";

fn body(seed: u64, grammar: &str) -> Value {
    json!({
        "model": MODEL_ID, "input": "Fix the bug.", "seed": seed, "temperature": 1.0,
        "max_output_tokens": 400,
        // The random-weight model repeats ` do` forever; steer it off that.
        "logit_bias": {"326": -100, "308": -100}, "frequency_penalty": 2.0,
        "tool_choice": {"type": "custom", "name": "apply_patch"},
        "tools": [
            {"type": "custom", "name": "apply_patch", "description": "Edit files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": grammar}},
            {"type": "function", "name": "shell", "parameters": {"type": "object",
             "properties": {"command": {"type": "string"}}}}
        ]
    })
}

/// Whether `input` is a whole sentence, and whether it is at least a prefix of one.
fn sentence(grammar: &GrammarStates, input: &str) -> (bool, bool) {
    let prefix = GrammarRecognizer::start(grammar).after(grammar, input.as_bytes());
    (grammar.is_match(input.as_bytes()), prefix.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_custom_call_is_a_sentence_of_its_grammar_streamed_or_not() {
    let server = start(fixture("llama-tools")).await;
    // apply_patch's free-text lines can outrun any budget on random weights: every input must
    // be a patch or the start of one. The bounded grammar must finish every time.
    for (text, must_finish) in [(APPLY_PATCH, false), (MOVES, true)] {
        let grammar = GrammarStates::new(Arc::new(Grammar::compile(text).unwrap()));
        for seed in 0..4 {
            let (status, answer) =
                post_json(&server.base, "/v1/responses", &body(seed, text)).await;
            assert_eq!(status, 200, "{answer}");
            let call = &answer["output"][0];
            assert_eq!(call["type"], "custom_tool_call", "{answer}");
            assert_eq!(call["name"], "apply_patch");
            assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
            assert!(call.get("arguments").is_none());
            let input = call["input"].as_str().unwrap();
            let (complete, prefix) = sentence(&grammar, input);
            assert!(prefix, "seed {seed}: {input:?}");
            if must_finish {
                assert_eq!(answer["status"], "completed", "{answer}");
            }
            if answer["status"] == "completed" {
                assert!(complete, "seed {seed}: {input:?}");
                assert_eq!(call["status"], "completed");
            }

            // The stream folds to the same item; the input comes in its own events.
            let mut streamed = body(seed, text);
            streamed["stream"] = json!(true);
            let events = named_events(&post_stream(&server.base, "/v1/responses", &streamed).await);
            let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
            assert!(
                !names.contains(&"response.function_call_arguments.delta"),
                "{names:?}"
            );
            let delta: String = (events.iter())
                .filter(|(n, _)| n == "response.custom_tool_call_input.delta")
                .map(|(_, d)| d["delta"].as_str().unwrap())
                .collect();
            let done = &events
                .iter()
                .find(|(n, _)| n == "response.custom_tool_call_input.done")
                .unwrap()
                .1;
            assert_eq!(done["input"], input);
            assert_eq!(delta, input);
            let last = &events.last().unwrap().1["response"];
            assert_eq!(last["output"][0]["input"], input);
            assert_eq!(last["output"][0]["type"], "custom_tool_call");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_calls_and_outputs_go_back_as_input_and_bad_formats_are_400s() {
    let server = start(fixture("llama-tools")).await;
    let mut next = body(1, APPLY_PATCH);
    next["tool_choice"] = json!("auto");
    next["max_output_tokens"] = json!(8);
    next["input"] = json!([
        {"role": "user", "content": "Fix the bug."},
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch",
         "input": "*** Begin Patch\n*** Delete File: a\n*** End Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"}
    ]);
    let (status, answer) = post_json(&server.base, "/v1/responses", &next).await;
    assert_eq!(status, 200, "{answer}");

    let mut bad = body(1, APPLY_PATCH);
    bad["tools"][0]["format"]["definition"] = json!("start: \"a\" (");
    let (status, answer) = post_json(&server.base, "/v1/responses", &bad).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "tools[0].format.definition");
    bad["tools"][0]["format"] = json!({"type": "grammar", "syntax": "ebnf", "definition": "x"});
    let (status, answer) = post_json(&server.base, "/v1/responses", &bad).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "tools[0].format.syntax");
}
