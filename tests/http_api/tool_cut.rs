//! A forced tool call cut short by the token limit (issue 31 item 4) is still a tool call: what
//! was generated of its arguments, the limit's finish reason, and never the call's framing (the
//! generic envelope `{"tool_calls": [...`, `<tool_call>`) as text; streamed as in one body.
//!
//! Each test generates the whole call once, then the same seeded request cut after every
//! number of tokens below that: the cut output is a prefix of the whole one, so a cut call has
//! the whole call's name and a prefix of its arguments.

use serde_json::{json, Value};

use crate::agents::named_events;
use crate::server::{fixture, post_json, post_stream, sse_payloads, start, MODEL_ID};

fn parameters() -> Value {
    json!({"type": "object", "required": ["query"], "additionalProperties": false,
        "properties": {"query": {"type": "string"}}})
}

/// Enough tokens for the whole call (the fixture's context is 256).
const WHOLE: u32 = 200;

fn chat_body(max_tokens: u32) -> Value {
    json!({"model": MODEL_ID, "seed": 5, "max_tokens": max_tokens, "logit_bias": {"6": 14},
        "tools": [{"type": "function", "function": {"name": "search", "parameters": parameters()}}],
        "tool_choice": "required",
        "messages": [{"role": "user", "content": "Find sluice."}]})
}

/// What a cut call came to: none (cut before its name was whole) or its name and arguments.
#[derive(Debug, PartialEq)]
struct Cut {
    call: Option<(String, String)>,
}

/// Checks a cut call against the whole call's arguments `whole`; true when its arguments are
/// a proper, non-empty part of them.
fn check_cut(cut: &Cut, whole: &str) -> bool {
    let Some((name, arguments)) = &cut.call else {
        return false;
    };
    assert_eq!(name, "search");
    assert!(
        whole.starts_with(arguments.as_str()),
        "{arguments:?} is not a prefix of {whole:?}"
    );
    !arguments.is_empty() && arguments != whole
}

/// The chat answer's one call: name and arguments, with finish reason `tool_calls`, and the
/// number of tokens it took.
async fn whole_chat_call(base: &str) -> (String, u32) {
    let (status, whole) = post_json(base, "/v1/chat/completions", chat_body(WHOLE)).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(
        whole["choices"][0]["finish_reason"], "tool_calls",
        "{whole}"
    );
    let call = &whole["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "search");
    let tokens = whole["usage"]["completion_tokens"].as_u64().unwrap() as u32;
    (call["arguments"].as_str().unwrap().to_string(), tokens)
}

async fn chat_cuts(model: &str) {
    let server = start(fixture(model)).await;
    let (whole, tokens) = whole_chat_call(&server.base).await;
    let mut partial = 0;
    for max_tokens in 1..tokens {
        let body = chat_body(max_tokens);
        let (status, one) = post_json(&server.base, "/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{one}");
        let choice = &one["choices"][0];
        assert_eq!(choice["finish_reason"], "length", "{one}");
        let message = &choice["message"];
        assert_eq!(message["content"].as_str().unwrap_or(""), "", "{one}");
        let call = message["tool_calls"].as_array().map(|calls| {
            assert_eq!(calls.len(), 1, "{one}");
            assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
            assert_eq!(calls[0]["type"], "function");
            let f = &calls[0]["function"];
            let text = |v: &Value| v.as_str().unwrap().to_string();
            (text(&f["name"]), text(&f["arguments"]))
        });
        let cut = Cut { call };
        partial += usize::from(check_cut(&cut, &whole));
        // Streamed: the same call, nothing as content, the same finish.
        let sse = post_stream(&server.base, "/v1/chat/completions", &body).await;
        let (mut content, mut finish) = (String::new(), Value::Null);
        let mut streamed: Option<(String, String)> = None;
        for data in sse_payloads(&sse).iter().filter(|d| *d != "[DONE]") {
            let chunk: Value = serde_json::from_str(data).unwrap();
            let choice = &chunk["choices"][0];
            content += choice["delta"]["content"].as_str().unwrap_or("");
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let (name, arguments) = streamed.get_or_insert_with(Default::default);
                *name += call["function"]["name"].as_str().unwrap_or("");
                *arguments += call["function"]["arguments"].as_str().unwrap_or("");
            }
            if !choice["finish_reason"].is_null() {
                finish = choice["finish_reason"].clone();
            }
        }
        assert_eq!(content, "", "max_tokens {max_tokens}: {sse}");
        assert_eq!(finish, "length");
        assert_eq!(Cut { call: streamed }, cut, "max_tokens {max_tokens}");
    }
    assert!(partial > 0, "no cut fell inside the arguments of {whole:?}");
}

#[tokio::test]
async fn a_cut_forced_call_in_the_generic_envelope_is_a_call_with_finish_reason_length() {
    chat_cuts("llama").await;
}

#[tokio::test]
async fn a_cut_forced_hermes_call_is_a_call_with_finish_reason_length() {
    chat_cuts("llama-tools").await;
}

#[tokio::test]
async fn a_cut_forced_call_is_an_incomplete_function_call_item_on_responses() {
    let server = start(fixture("llama")).await;
    let body = |max_tokens: u32| {
        json!({"model": MODEL_ID, "seed": 5, "max_output_tokens": max_tokens,
            "logit_bias": {"6": 14}, "input": "Find sluice.", "tool_choice": "required",
            "tools": [{"type": "function", "name": "search", "parameters": parameters()}]})
    };
    let (_, all) = post_json(&server.base, "/v1/responses", body(WHOLE)).await;
    assert_eq!(all["status"], "completed", "{all}");
    assert_eq!(all["output"][0]["name"], "search", "{all}");
    let whole = all["output"][0]["arguments"].as_str().unwrap().to_string();
    let tokens = all["usage"]["output_tokens"].as_u64().unwrap() as u32;
    let mut partial = 0;
    for max_tokens in 1..tokens {
        let body = body(max_tokens);
        let (status, one) = post_json(&server.base, "/v1/responses", &body).await;
        assert_eq!(status, 200, "{one}");
        assert_eq!(one["status"], "incomplete", "{one}");
        assert_eq!(one["incomplete_details"]["reason"], "max_output_tokens");
        let output = one["output"].as_array().unwrap();
        assert!(
            output.iter().all(|item| item["type"] == "function_call"),
            "no text: {one}"
        );
        let call = output.first().map(|item| {
            assert_eq!(output.len(), 1, "{one}");
            assert_eq!(item["status"], "incomplete", "{one}");
            assert!(item["call_id"].as_str().unwrap().starts_with("call_"));
            let text = |v: &Value| v.as_str().unwrap().to_string();
            (text(&item["name"]), text(&item["arguments"]))
        });
        let cut = Cut { call };
        partial += usize::from(check_cut(&cut, &whole));
        let events = named_events(&post_stream(&server.base, "/v1/responses", &body).await);
        let (last, end) = events.last().unwrap();
        assert_eq!(last, "response.incomplete", "max_tokens {max_tokens}");
        let streamed_output = end["response"]["output"].as_array().unwrap();
        let fields = |items: &[Value]| -> Vec<Value> {
            (items.iter())
                .map(|i| json!([i["type"], i["name"], i["arguments"], i["status"]]))
                .collect()
        };
        assert_eq!(fields(streamed_output), fields(output), "{end}");
        let deltas: String = (events.iter())
            .filter(|(name, _)| name == "response.function_call_arguments.delta")
            .map(|(_, data)| data["delta"].as_str().unwrap().to_string())
            .collect();
        let arguments = cut.call.as_ref().map_or("", |(_, a)| a.as_str());
        assert_eq!(deltas, arguments, "max_tokens {max_tokens}");
        assert!(
            !events.iter().any(|(name, _)| name.contains("output_text")),
            "no text streamed: {events:?}"
        );
    }
    assert!(partial > 0, "no cut fell inside the arguments of {whole:?}");
}

#[tokio::test]
async fn a_cut_forced_call_is_a_tool_use_block_with_stop_reason_max_tokens() {
    let server = start(fixture("llama")).await;
    let body = |max_tokens: u32| {
        json!({"model": MODEL_ID, "seed": 5, "max_tokens": max_tokens,
            "logit_bias": {"6": 14}, "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "Find sluice."}],
            "tools": [{"name": "search", "input_schema": parameters()}]})
    };
    let (_, all) = post_json(&server.base, "/v1/messages", body(WHOLE)).await;
    assert_eq!(all["stop_reason"], "tool_use", "{all}");
    let tokens = all["usage"]["output_tokens"].as_u64().unwrap() as u32;
    let whole: String =
        named_events(&post_stream(&server.base, "/v1/messages", &body(WHOLE)).await)
            .iter()
            .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
            .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap().to_string())
            .collect();
    let mut partial = 0;
    for max_tokens in 1..tokens {
        let body = body(max_tokens);
        let (status, one) = post_json(&server.base, "/v1/messages", &body).await;
        assert_eq!(status, 200, "{one}");
        assert_eq!(one["stop_reason"], "max_tokens", "{one}");
        let blocks = one["content"].as_array().unwrap();
        assert!(
            blocks.iter().all(|block| block["type"] == "tool_use"),
            "no text: {one}"
        );
        assert!(blocks.len() <= 1, "{one}");
        if let Some(block) = blocks.first() {
            assert!(block["id"].as_str().unwrap().starts_with("toolu_"));
            assert_eq!(block["name"], "search");
            assert!(block["input"].is_object(), "{one}");
        }
        let events = named_events(&post_stream(&server.base, "/v1/messages", &body).await);
        let started: Vec<&Value> = (events.iter())
            .filter(|(name, _)| name == "content_block_start")
            .map(|(_, data)| &data["content_block"])
            .collect();
        assert!(
            started.iter().all(|block| block["type"] == "tool_use"),
            "no text streamed: {events:?}"
        );
        assert_eq!(started.len(), blocks.len(), "{events:?}");
        let partial_json: String = (events.iter())
            .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
            .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap().to_string())
            .collect();
        let call = started
            .first()
            .map(|block| (block["name"].as_str().unwrap().to_string(), partial_json));
        partial += usize::from(check_cut(&Cut { call }, &whole));
        let (_, delta) = &events[events.len() - 2];
        assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    }
    assert!(partial > 0, "no cut fell inside the arguments of {whole:?}");
}
