//! Responses events for hand-written turns: order, sequence numbers, indexes, and the folded
//! stream against the one-body answer.

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::assemble::tests::NumberedTokens;
use crate::assemble::{LogprobsShape, ResponseAssembler};
use crate::dialect::turn::build::{call, turn};
use crate::validate::responses::validate_responses;
use crate::validate::ModelLimits;
use crate::wire::responses::ResponsesRequest;

fn request(body: Value) -> ResponsesRequest {
    serde_json::from_value(body).unwrap()
}

/// The same identity for every renderer of a test, as one route's response has.
fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "resp_1".into(),
        created: 1,
        model: "m".into(),
        system_fingerprint: "fp".into(),
    }
}

fn renderer() -> ResponsesRenderer {
    let echo = request(json!({"model": "m", "input": "hi"})).echo();
    ResponsesRenderer::new(meta(), echo)
}

fn reasoning(text: &str) -> TurnUpdate {
    TurnUpdate::Reasoning {
        index: 0,
        text: text.into(),
    }
}

fn content(text: &str) -> TurnUpdate {
    TurnUpdate::Content {
        index: 0,
        text: text.into(),
    }
}

/// The events (as JSON, each checked to carry its `event:` name as `type`) and the body the
/// same updates give.
fn run(make: impl Fn() -> ResponsesRenderer, updates: Vec<TurnUpdate>) -> (Vec<Value>, Value) {
    let assembler = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let ending = || Ending {
        usage: UsageBody::new(5, 7, 2),
        assembler: &assembler,
        tokens: &NumberedTokens,
    };
    let mut streaming = make();
    let mut frames = streaming.open();
    for u in updates.clone() {
        frames.extend(streaming.update(u));
    }
    frames.extend(streaming.close(ending()));
    let mut one_body: Box<dyn TurnRenderer> = Box::new(make());
    for u in updates {
        one_body.update(u);
    }
    let body: Value = serde_json::from_str(&one_body.body(ending())).unwrap();
    let events = frames
        .into_iter()
        .map(|f| {
            let v: Value = serde_json::from_str(&f.data).unwrap();
            assert_eq!(f.event, v["type"].as_str(), "{v}");
            v
        })
        .collect();
    (events, body)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Rebuilds the output items from the stream, as a client would, checking that each item's
/// deltas add up to its `done` text.
fn fold(events: &[Value]) -> Vec<Value> {
    let mut output: Vec<Value> = Vec::new();
    let mut deltas: Vec<String> = Vec::new();
    for e in events {
        let index = e["output_index"].as_u64().map(|i| i as usize);
        match e["type"].as_str().unwrap() {
            "response.output_item.added" => {
                assert_eq!(index, Some(output.len()), "items are added in order");
                output.push(e["item"].clone());
                deltas.push(String::new());
            }
            "response.output_text.delta"
            | "response.reasoning_text.delta"
            | "response.function_call_arguments.delta" => {
                deltas[index.unwrap()].push_str(e["delta"].as_str().unwrap());
            }
            "response.output_text.done" | "response.reasoning_text.done" => {
                assert_eq!(e["text"], deltas[index.unwrap()]);
            }
            "response.function_call_arguments.done" => {
                assert_eq!(e["arguments"], deltas[index.unwrap()]);
            }
            "response.output_item.done" => {
                let i = index.unwrap();
                assert_eq!(e["item"]["id"], output[i]["id"]);
                output[i] = e["item"].clone();
            }
            _ => {}
        }
    }
    output
}

fn check_stream_matches_body(events: &[Value], body: &Value) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    assert_eq!(events[0]["response"]["status"], "in_progress");
    assert_eq!(events[0]["response"]["output"], json!([]));
    assert_eq!(events[1]["type"], "response.in_progress");
    let last = events.last().unwrap();
    assert_eq!(last["response"]["output"], body["output"]);
    assert_eq!(Value::Array(fold(events)), body["output"]);
    assert_eq!(last["response"]["usage"], body["usage"]);
    assert_eq!(last["response"]["status"], body["status"]);
}

#[test]
fn text_only_turn_is_one_message_item() {
    let (events, body) = run(
        renderer,
        turn(vec![content("Hel"), content("lo")], TurnEnd::Stop),
    );
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    check_stream_matches_body(&events, &body);
    assert_eq!(body["object"], "response");
    assert_eq!(body["id"], "resp_1");
    assert!(response_meta("m").id.starts_with("resp_"));
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["role"], "assistant");
    assert_eq!(body["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(body["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 2},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 12})
    );
    assert_eq!(body["store"], true);
    assert_eq!(body["model"], "m");
    assert!(body.get("output_text").is_none());
}

#[test]
fn reasoning_then_text_are_two_items() {
    let mut updates = turn(
        vec![reasoning("hm"), reasoning("m"), content("ok")],
        TurnEnd::Stop,
    );
    if let Some(TurnUpdate::Finish {
        reasoning_tokens, ..
    }) = updates.last_mut()
    {
        *reasoning_tokens = 3;
    }
    let (events, body) = run(renderer, updates);
    check_stream_matches_body(&events, &body);
    assert_eq!(
        body["usage"]["output_tokens_details"]["reasoning_tokens"],
        3
    );
    assert_eq!(body["output"][0]["type"], "reasoning");
    assert_eq!(
        body["output"][0]["content"],
        json!([{"type": "reasoning_text", "text": "hmm"}])
    );
    assert_eq!(body["output"][1]["type"], "message");
    let deltas: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "response.reasoning_text.delta")
        .map(|e| (e["output_index"].clone(), e["content_index"].clone()))
        .collect();
    assert_eq!(deltas, [(json!(0), json!(0)), (json!(0), json!(0))]);
    let text = events
        .iter()
        .find(|e| e["type"] == "response.output_text.delta")
        .unwrap();
    assert_eq!(text["output_index"], 1);
    assert_eq!(text["item_id"], body["output"][1]["id"]);
}

/// Codex asks `reasoning.summary` and shows reasoning only through summaries: the summary is
/// the reasoning text, streamed as summary events that add up to the item's summary.
#[test]
fn a_requested_summary_carries_the_reasoning() {
    let summarizing = || {
        let body = json!({"model": "m", "input": "hi",
            "reasoning": {"effort": "medium", "summary": "auto"}});
        ResponsesRenderer::new(meta(), request(body).echo())
    };
    let updates = turn(
        vec![reasoning("hm"), reasoning("m"), content("ok")],
        TurnEnd::Stop,
    );
    let (events, body) = run(summarizing, updates.clone());
    check_stream_matches_body(&events, &body);
    let summary = json!([{"type": "summary_text", "text": "hmm"}]);
    assert_eq!(body["output"][0]["summary"], summary);
    let kinds = types(&events);
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(
        at("response.reasoning_summary_part.added") < at("response.reasoning_summary_text.delta")
    );
    assert!(
        at("response.reasoning_summary_text.done") < at("response.reasoning_summary_part.done")
    );
    assert!(at("response.reasoning_summary_part.done") < at("response.output_item.done"));
    let deltas: String = (events.iter())
        .filter(|e| e["type"] == "response.reasoning_summary_text.delta")
        .map(|e| {
            assert_eq!(e["item_id"], body["output"][0]["id"]);
            assert_eq!(e["summary_index"], 0);
            e["delta"].as_str().unwrap()
        })
        .collect();
    assert_eq!(deltas, "hmm");
    let done = events
        .iter()
        .find(|e| e["type"] == "response.reasoning_summary_text.done");
    assert_eq!(done.unwrap()["text"], "hmm");
    // Not asked for: no summary.
    let (events, body) = run(renderer, updates);
    assert_eq!(body["output"][0]["summary"], json!([]));
    assert!(!types(&events).iter().any(|k| k.contains("summary")));
}

#[test]
fn text_then_two_calls_are_three_items_with_full_arguments() {
    let mut middle = vec![content("Let me check.")];
    middle.extend(call(0, "call_a", "get", &["{\"city\":", "\"Oslo\"}"]));
    middle.extend(call(1, "call_b", "get", &["{\"city\":\"Rome\"}"]));
    let (events, body) = run(renderer, turn(middle, TurnEnd::ToolCalls));
    check_stream_matches_body(&events, &body);
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 3);
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(output[1]["call_id"], "call_a");
    assert_eq!(output[1]["arguments"], "{\"city\":\"Oslo\"}");
    assert!(output[1]["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(output[2]["call_id"], "call_b");
    assert_eq!(output[2]["status"], "completed");
    let added: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.added")
        .map(|e| (e["output_index"].clone(), e["item"]["arguments"].clone()))
        .collect();
    assert_eq!(
        added,
        [
            (json!(0), Value::Null),
            (json!(1), json!("")),
            (json!(2), json!(""))
        ]
    );
    assert_eq!(body["status"], "completed");
}

#[test]
fn length_ending_is_incomplete_with_the_reason() {
    let (events, body) = run(renderer, turn(vec![content("cut")], TurnEnd::Length));
    check_stream_matches_body(&events, &body);
    assert_eq!(events.last().unwrap()["type"], "response.incomplete");
    assert_eq!(body["status"], "incomplete");
    assert_eq!(
        body["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(body["output"][0]["status"], "incomplete");
}

#[test]
fn a_call_cut_off_by_the_limit_is_incomplete() {
    // The parser ends a cut-off call (`ToolCallEnd`) before the turn's `Finish`.
    let calls = [
        call(0, "call_a", "f", &["{}"]),
        call(1, "call_b", "g", &["{\"x\""]),
    ];
    let (events, body) = run(renderer, turn(calls.concat(), TurnEnd::Length));
    check_stream_matches_body(&events, &body);
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["output"][0]["status"], "completed");
    assert_eq!(body["output"][1]["status"], "incomplete");
}

#[test]
fn error_is_an_error_event_then_response_failed() {
    let mut r = renderer();
    let mut frames = r.open();
    frames.extend(r.update(content("a")));
    frames.extend(r.error(&ApiError::Internal("engine died".into())));
    let n = frames.len();
    assert_eq!(frames[n - 2].event, Some("error"));
    assert_eq!(frames[n - 1].event, Some("response.failed"));
    let error: Value = serde_json::from_str(&frames[n - 2].data).unwrap();
    let failed: Value = serde_json::from_str(&frames[n - 1].data).unwrap();
    assert_eq!(error["message"], "engine died");
    assert_eq!(error["sequence_number"], n - 2);
    assert_eq!(failed["sequence_number"], n - 1);
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(failed["response"]["error"]["code"], "server_error");
}

#[test]
fn a_stored_response_continues_into_the_next_request() {
    let store = Arc::new(ResponseStore::new(8, Duration::from_secs(60)));
    let first = request(json!({"model": "m", "input": "weather in Oslo?",
        "tools": [{"type": "function", "name": "get"}]}));
    let limits = ModelLimits {
        max_model_len: 4096,
        vocab_size: 10,
        takes_images: false,
    };
    let valid = validate_responses(first, limits, None).unwrap();
    let meta = response_meta("m");
    let id = meta.id.clone();
    let make = || {
        ResponsesRenderer::new(meta.clone(), valid.echo.clone()).storing(
            store.clone(),
            valid.conversation.clone(),
            valid.input_start,
            None,
        )
    };
    let mut middle = vec![reasoning("need the tool")];
    middle.extend(call(0, "call_a", "get", &["{\"city\":\"Oslo\"}"]));
    let (_, body) = run(make, turn(middle, TurnEnd::ToolCalls));
    let stored = store.get(&id, None).expect("the response was stored");
    assert_eq!(stored.body, body);
    assert_eq!(stored.output, body["output"]);

    let next = request(json!({"model": "m", "previous_response_id": id,
        "input": [{"type": "function_call_output", "call_id": "call_a", "output": "-3C"}]}));
    let valid = validate_responses(next, limits, Some(&stored)).unwrap();
    let messages = valid.chat.messages.as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["reasoning_content"], "need the tool");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        json!({"city": "Oslo"})
    );
    assert_eq!(messages[2]["tool_call_id"], "call_a");
    assert_eq!(
        valid.input_start, 2,
        "the new input follows the first turn and its output"
    );
}

#[test]
fn a_response_too_large_to_store_is_answered_with_store_false() {
    let echo = request(json!({"model": "m", "input": "hi"})).echo();
    assert!(echo.store);
    let renderer = |store: &Arc<ResponseStore>| {
        ResponsesRenderer::new(meta(), echo.clone()).storing(
            store.clone(),
            json!([{"role": "user", "content": "hi"}]),
            0,
            Some(0),
        )
    };
    // What a short answer takes; the budget leaves room for it, not for a long one.
    let roomy = Arc::new(ResponseStore::new(8, Duration::from_secs(60)));
    let (_, body) = run(
        || renderer(&roomy),
        turn(vec![content("ok")], TurnEnd::Stop),
    );
    assert_eq!(body["store"], true);
    let short = roomy.usage().bytes;
    let store = Arc::new(
        ResponseStore::new(8, Duration::from_secs(60)).with_byte_budgets(1 << 20, short + 1000),
    );
    let long = "word ".repeat(2000);
    let (events, body) = run(
        || renderer(&store),
        turn(vec![content(&long)], TurnEnd::Stop),
    );
    assert_eq!(body["store"], false, "the answer says it was not kept");
    assert_eq!(body["output"][0]["content"][0]["text"], long.as_str());
    let completed = &events.last().unwrap()["response"];
    assert_eq!(completed["store"], false);
    assert_eq!(events[0]["response"]["store"], true, "it was asked for");
    assert!(store.is_empty());
    assert_eq!(store.usage().refused, 2, "the stream and the one body");
    let (_, body) = run(
        || renderer(&store),
        turn(vec![content("ok")], TurnEnd::Stop),
    );
    assert_eq!(body["store"], true);
    assert!(store.get("resp_1", Some(0)).is_some());
}
