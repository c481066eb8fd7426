//! Messages events for hand-written turns: order, block indexes, and the folded stream
//! against the one-body answer.

use serde_json::{json, Value};

use super::*;
use crate::assemble::tests::NumberedTokens;
use crate::assemble::{LogprobsShape, ResponseAssembler};
use crate::dialect::turn::build::{call, turn};

fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "msg_1".into(),
        created: 1,
        model: "m".into(),
        system_fingerprint: "fp".into(),
    }
}

fn text(kind: &str, text: &str) -> TurnUpdate {
    let text = text.to_string();
    match kind {
        "reasoning" => TurnUpdate::Reasoning { index: 0, text },
        _ => TurnUpdate::Content { index: 0, text },
    }
}

/// The events (each checked to carry its `event:` name as `type`) and the body.
fn run(updates: Vec<TurnUpdate>) -> (Vec<Value>, Value) {
    run_showing(updates, true)
}

/// [`run`] with thinking blocks shown or not.
fn run_showing(updates: Vec<TurnUpdate>, thinking: bool) -> (Vec<Value>, Value) {
    let assembler = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let ending = || Ending {
        usage: UsageBody::new(9, 4, 3),
        assembler: &assembler,
        tokens: &NumberedTokens,
    };
    let mut streaming = MessagesRenderer::new(meta(), 9).showing_thinking(thinking);
    let mut frames = streaming.open();
    for u in updates.clone() {
        frames.extend(streaming.update(u));
    }
    frames.extend(streaming.close(ending()));
    let mut one_body: Box<dyn TurnRenderer> =
        Box::new(MessagesRenderer::new(meta(), 9).showing_thinking(thinking));
    for u in updates {
        one_body.update(u);
    }
    let body = serde_json::from_str(&one_body.body(ending())).unwrap();
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

/// The message a client accumulates from the stream, as Anthropic's SDKs do.
fn fold(events: &[Value]) -> Value {
    let mut message = Value::Null;
    let mut partial_json: Vec<String> = Vec::new();
    for e in events {
        match e["type"].as_str().unwrap() {
            "message_start" => message = e["message"].clone(),
            "content_block_start" => {
                let blocks = message["content"].as_array_mut().unwrap();
                assert_eq!(e["index"], blocks.len(), "blocks start in order");
                blocks.push(e["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let i = e["index"].as_u64().unwrap() as usize;
                let block = &mut message["content"][i];
                let d = &e["delta"];
                let (field, piece) = match d["type"].as_str().unwrap() {
                    "text_delta" => ("text", &d["text"]),
                    "thinking_delta" => ("thinking", &d["thinking"]),
                    "input_json_delta" => {
                        partial_json[i].push_str(d["partial_json"].as_str().unwrap());
                        continue;
                    }
                    other => panic!("unexpected delta {other}"),
                };
                let joined = format!(
                    "{}{}",
                    block[field].as_str().unwrap(),
                    piece.as_str().unwrap()
                );
                block[field] = json!(joined);
            }
            "content_block_stop" => {
                let i = e["index"].as_u64().unwrap() as usize;
                if message["content"][i]["type"] == "tool_use" && !partial_json[i].is_empty() {
                    message["content"][i]["input"] =
                        serde_json::from_str(&partial_json[i]).unwrap();
                }
            }
            "message_delta" => {
                message["stop_reason"] = e["delta"]["stop_reason"].clone();
                message["stop_sequence"] = e["delta"]["stop_sequence"].clone();
                for (k, v) in e["usage"].as_object().unwrap() {
                    message["usage"][k] = v.clone();
                }
            }
            _ => {}
        }
    }
    message
}

#[test]
fn text_only_turn_is_one_text_block() {
    let (events, body) = run(turn(vec![text("c", "Hel"), text("c", "lo")], TurnEnd::Stop));
    assert_eq!(
        types(&events),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(events[0]["message"]["usage"]["input_tokens"], 9);
    assert_eq!(events[0]["message"]["usage"]["output_tokens"], 0);
    assert_eq!(fold(&events), body);
    assert_eq!(body["content"], json!([{"type": "text", "text": "Hello"}]));
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["id"], "msg_1");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 6, "output_tokens": 4, "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 0})
    );
}

#[test]
fn thinking_then_text_are_two_blocks() {
    let (events, body) = run(turn(
        vec![
            text("reasoning", "hm"),
            text("reasoning", "m"),
            text("c", "ok"),
        ],
        TurnEnd::Stop,
    ));
    assert_eq!(fold(&events), body);
    assert_eq!(body["content"][0]["type"], "thinking");
    assert_eq!(body["content"][0]["thinking"], "hmm");
    assert_eq!(body["content"][1]["text"], "ok");
    let indexes: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "content_block_delta")
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [0, 0, 1]);
}

#[test]
fn text_then_two_calls_are_tool_use_blocks_with_parsed_input() {
    let mut middle = vec![text("c", "Let me check.")];
    middle.extend(call(0, "toolu_a", "get", &["{\"city\":", "\"Oslo\"}"]));
    middle.extend(call(1, "toolu_b", "get", &["{\"city\":\"Rome\"}"]));
    let (events, body) = run(turn(middle, TurnEnd::ToolCalls));
    assert_eq!(fold(&events), body);
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["content"][1],
        json!({"type": "tool_use", "id": "toolu_a", "name": "get", "input": {"city": "Oslo"}})
    );
    assert_eq!(body["content"][2]["input"], json!({"city": "Rome"}));
    let starts: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "content_block_start")
        .map(|e| (e["index"].clone(), e["content_block"]["input"].clone()))
        .collect();
    assert_eq!(
        starts,
        [
            (json!(0), Value::Null),
            (json!(1), json!({})),
            (json!(2), json!({}))
        ]
    );
}

#[test]
fn length_ending_is_max_tokens_and_a_cut_call_has_empty_input() {
    let (events, body) = run(turn(vec![text("c", "cut")], TurnEnd::Length));
    assert_eq!(fold(&events), body);
    assert_eq!(body["stop_reason"], "max_tokens");
    let (_, body) = run(turn(call(0, "toolu_a", "get", &["{\"ci"]), TurnEnd::Length));
    assert_eq!(body["content"][0]["input"], json!({}));
    assert_eq!(body["stop_reason"], "max_tokens");
}

/// The one-body answer as text, for what a `Value` would lose.
fn body_text(updates: Vec<TurnUpdate>) -> String {
    let assembler = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let mut renderer: Box<dyn TurnRenderer> = Box::new(MessagesRenderer::new(meta(), 9));
    for u in updates {
        renderer.update(u);
    }
    renderer.body(Ending {
        usage: UsageBody::new(9, 4, 3),
        assembler: &assembler,
        tokens: &NumberedTokens,
    })
}

#[test]
fn a_calls_input_in_the_one_body_answer_keeps_every_digit_the_model_wrote() {
    let big = "1".repeat(73);
    let args = format!("{{\"n\": {big}, \"x\": 0.10000000000000000001}}");
    let (head, tail) = args.split_at(9);
    let updates = turn(call(0, "toolu_a", "get", &[head, tail]), TurnEnd::ToolCalls);
    let text = body_text(updates.clone());
    let expected = format!(r#"{{"type":"tool_use","id":"toolu_a","name":"get","input":{args}}}"#);
    assert!(text.contains(&expected), "{text}");
    // Still one JSON document, the same as the stream folds into (up to f64 precision).
    let (events, body) = run(updates);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);
    assert_eq!(fold(&events)["content"], body["content"]);
    // Whitespace around the object goes; arguments not an object are `{}`.
    let padded = body_text(turn(
        call(0, "toolu_a", "get", &["  {\"a\": 1}\n"]),
        TurnEnd::ToolCalls,
    ));
    assert!(padded.contains(r#""input":{"a": 1}}"#), "{padded}");
    for not_an_object in ["[1, 2]", "7", "{\"a\": 1} x"] {
        let text = body_text(turn(
            call(0, "toolu_a", "get", &[not_an_object]),
            TurnEnd::ToolCalls,
        ));
        assert!(text.contains(r#""input":{}"#), "{not_an_object}: {text}");
    }
}

#[test]
fn a_stop_sequence_ending_names_the_sequence() {
    let mut updates = turn(vec![text("c", "one, two")], TurnEnd::Stop);
    let Some(TurnUpdate::Finish { stop_string, .. }) = updates.last_mut() else {
        panic!("a turn ends with Finish");
    };
    *stop_string = Some(", three".into());
    let (events, body) = run(updates);
    assert_eq!(fold(&events), body);
    assert_eq!(body["stop_reason"], "stop_sequence");
    assert_eq!(body["stop_sequence"], ", three");
    // Any other ending leaves it null.
    let (events, body) = run(turn(vec![text("c", "one")], TurnEnd::Stop));
    assert_eq!(fold(&events), body);
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
}

#[test]
fn error_is_one_anthropic_error_event() {
    let mut r = MessagesRenderer::new(meta(), 1);
    let frames = r.error(&ApiError::Overloaded {
        retry_after_secs: 1,
    });
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].event, Some("error"));
    let v: Value = serde_json::from_str(&frames[0].data).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "overloaded_error");
    assert!(message_meta("m").id.starts_with("msg_"));
}

#[test]
fn reasoning_is_left_out_when_the_request_did_not_turn_thinking_on() {
    let updates = turn(
        vec![
            text("reasoning", "hmm"),
            text("content", "Hi"),
            text("reasoning", "more"),
            text("content", "!"),
        ],
        TurnEnd::Stop,
    );
    let (events, body) = run_showing(updates, false);
    assert!(
        events
            .iter()
            .all(|e| e["content_block"]["type"] != "thinking"
                && e["delta"]["type"] != "thinking_delta"),
        "{events:?}"
    );
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Hi!"}]),
        "{body}"
    );
    assert_eq!(fold(&events)["content"], body["content"]);
}
