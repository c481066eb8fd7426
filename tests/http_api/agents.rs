//! Tool calls, reasoning and the agent protocols end to end, on the fixture model with real
//! templates: `llama-tools` (Qwen2.5's, Hermes `<tool_call>` markup) and `llama-think`
//! (DeepSeek-R1-Distill's, whose prompt opens `<think>` when `enable_thinking` is set).
//! Random weights never choose a tool, so calls are forced (`tool_choice` required or named);
//! the quote token's bias (`NUDGE`) lets a random model close its strings.

use serde_json::{json, Value};

use crate::server::{fixture, post_json, post_stream, sse_payloads, start, MODEL_ID};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "required": ["city", "unit"], "additionalProperties": false,
            "properties": {"city": {"type": "string", "pattern": "^[A-Z]", "maxLength": 12},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}},
        {"type": "function", "function": {"name": "search", "parameters": {
            "type": "object", "required": ["query"],
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}}}}
    ])
}

fn chat_body(seed: u64, extra: Value) -> Value {
    let mut body = json!({"model": MODEL_ID, "seed": seed, "max_tokens": 600,
        "logit_bias": {"6": 14}, "tools": tools(), "tool_choice": "required",
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// A call's arguments are a JSON object valid for its tool.
fn check_call(call: &Value) {
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("arguments {call}: {e}"));
    match call["function"]["name"].as_str().unwrap() {
        "get_weather" => {
            let city = args["city"].as_str().unwrap();
            assert!(city.starts_with(|c: char| c.is_ascii_uppercase()), "{args}");
            assert!(["celsius", "fahrenheit"].contains(&args["unit"].as_str().unwrap()));
            assert_eq!(args.as_object().unwrap().len(), 2);
        }
        "search" => {
            assert!(args["query"].is_string(), "{args}");
            assert!(args.get("limit").is_none_or(Value::is_i64));
        }
        other => panic!("a call of an unlisted tool {other}"),
    }
}

#[tokio::test]
async fn forced_calls_are_valid_and_the_same_alone_or_among_concurrent_requests() {
    let server = start(fixture("llama-tools")).await;
    let (status, alone) = post_json(
        &server.base,
        "/v1/chat/completions",
        chat_body(3, json!({})),
    )
    .await;
    assert_eq!(status, 200, "{alone}");
    let choice = &alone["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{alone}");
    assert!(
        choice["message"]["content"].is_null(),
        "no markup leaks: {alone}"
    );
    check_call(&choice["message"]["tool_calls"][0]);
    // The same seeded request among eight others (different seeds, n = 2) gives the same call.
    let others = (10..18).map(|seed| {
        post_json(
            &server.base,
            "/v1/chat/completions",
            chat_body(seed, json!({"n": 2})),
        )
    });
    let (under_load, others) = tokio::join!(
        post_json(
            &server.base,
            "/v1/chat/completions",
            chat_body(3, json!({}))
        ),
        futures_util::future::join_all(others)
    );
    assert_eq!(
        under_load.1["choices"][0]["message"]["tool_calls"][0]["function"],
        choice["message"]["tool_calls"][0]["function"]
    );
    for (status, body) in others {
        assert_eq!(status, 200);
        for choice in body["choices"].as_array().unwrap() {
            if choice["finish_reason"] == "tool_calls" {
                check_call(&choice["message"]["tool_calls"][0]);
            }
        }
    }
    server
        .wait_until_idle(std::time::Duration::from_secs(10))
        .await;
}

#[tokio::test]
async fn a_streamed_forced_call_folds_to_the_one_body() {
    let server = start(fixture("llama-tools")).await;
    let body = chat_body(
        5,
        json!({"tool_choice": {"type": "function", "function": {"name": "search"}}}),
    );
    let (_, whole) = post_json(&server.base, "/v1/chat/completions", &body).await;
    let text = post_stream(&server.base, "/v1/chat/completions", &body).await;
    let (mut name, mut arguments, mut finish) = (String::new(), String::new(), Value::Null);
    for data in sse_payloads(&text).iter().filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(data).unwrap();
        let choice = &chunk["choices"][0];
        assert!(
            choice["delta"]["content"].as_str().unwrap_or("").is_empty(),
            "{chunk}"
        );
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            name += call["function"]["name"].as_str().unwrap_or("");
            arguments += call["function"]["arguments"].as_str().unwrap_or("");
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    let call = &whole["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(name, "search");
    assert_eq!(call["function"]["name"], "search");
    assert_eq!(arguments, call["function"]["arguments"].as_str().unwrap());
    assert_eq!(finish, whole["choices"][0]["finish_reason"]);
}

#[tokio::test]
async fn thinking_from_the_prompt_is_reasoning_content_and_kwargs_turn_it_off() {
    let server = start(fixture("llama-think")).await;
    let ask = |kwargs: Value| {
        // Token 203 is a newline, which this random model otherwise repeats (and reasoning is
        // trimmed of whitespace).
        json!({"model": MODEL_ID, "seed": 9, "max_tokens": 12,
            "logit_bias": {"203": -100},
            "chat_template_kwargs": kwargs,
            "messages": [{"role": "user", "content": "Think first."}]})
    };
    // The template opens `<think>` only when enable_thinking is true: all output is reasoning.
    let (_, thinking) = post_json(
        &server.base,
        "/v1/chat/completions",
        ask(json!({"enable_thinking": true})),
    )
    .await;
    let message = &thinking["choices"][0]["message"];
    assert!(
        !message["reasoning_content"].as_str().unwrap().is_empty(),
        "{thinking}"
    );
    assert_eq!(message["content"], "", "{thinking}");
    // Every generated token was reasoning, and usage says so.
    let usage = &thinking["usage"];
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"], usage["completion_tokens"],
        "{thinking}"
    );
    let text = post_stream(
        &server.base,
        "/v1/chat/completions",
        &ask(json!({"enable_thinking": true})),
    )
    .await;
    let reasoning: String = sse_payloads(&text)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["reasoning_content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(reasoning, message["reasoning_content"].as_str().unwrap());
    // Otherwise the prompt closes it, and the output is content.
    let (_, plain) = post_json(&server.base, "/v1/chat/completions", ask(json!({}))).await;
    assert!(
        plain["choices"][0]["message"]
            .get("reasoning_content")
            .is_none(),
        "{plain}"
    );
    assert!(
        plain["usage"].get("completion_tokens_details").is_none(),
        "{plain}"
    );
}

/// `event:` names and `data:` payloads of an SSE body with named events.
pub(crate) fn named_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            let field = |name: &str| {
                event
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
                    .unwrap_or("")
                    .to_string()
            };
            (
                field("event:"),
                serde_json::from_str(&field("data:")).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn responses_stream_in_order_and_fold_to_the_stored_response() {
    let server = start(fixture("llama-tools")).await;
    let body = json!({"model": MODEL_ID, "input": "Weather in Paris?", "seed": 4,
        "logit_bias": {"6": 14}, "max_output_tokens": 600, "tool_choice": "required",
        "tools": [{"type": "function", "name": "get_weather", "parameters": tools()[0]["function"]["parameters"]},
                  {"type": "web_search_preview"}]});
    let text = post_stream(&server.base, "/v1/responses", &body).await;
    let events = named_events(&text);
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], i, "{name}");
        assert_eq!(data["type"], name.as_str());
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    assert_eq!(*names.last().unwrap(), "response.completed", "{names:?}");
    let arguments: String = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_string())
        .collect();
    let done = &events
        .iter()
        .find(|(n, _)| n == "response.function_call_arguments.done")
        .unwrap()
        .1;
    assert_eq!(done["arguments"], arguments.as_str());
    let completed = &events.last().unwrap().1["response"];
    let call = &completed["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["arguments"], arguments.as_str());
    check_call(&json!({"function": call}));
    // Stored: retrievable as it completed; a second turn continues from it; deleted, it is gone.
    let client = reqwest::Client::new();
    let id = completed["id"].as_str().unwrap();
    let fetched: Value = client
        .get(server.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["output"], completed["output"]);
    let (status, second) = post_json(
        &server.base,
        "/v1/responses",
        json!({"model": MODEL_ID,
        "previous_response_id": id, "max_output_tokens": 5,
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}]}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let deleted = client
        .delete(server.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let gone = client
        .get(server.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    let (status, _) = post_json(
        &server.base,
        "/v1/responses",
        json!({"model": MODEL_ID,
        "previous_response_id": id, "input": "again"}),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn messages_stream_folds_to_the_one_body_with_a_forced_tool_use() {
    let server = start(fixture("llama-tools")).await;
    let body = json!({"model": MODEL_ID, "max_tokens": 600, "seed": 6, "logit_bias": {"6": 14},
        "system": [{"type": "text", "text": "Use tools."}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"name": "get_weather", "input_schema": tools()[0]["function"]["parameters"]}],
        "tool_choice": {"type": "tool", "name": "get_weather"}});
    let (status, whole) = post_json(&server.base, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["stop_reason"], "tool_use", "{whole}");
    let block = whole["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));
    check_call(
        &json!({"function": {"name": block["name"], "arguments": block["input"].to_string()}}),
    );
    let text = post_stream(&server.base, "/v1/messages", &body).await;
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let partial: String = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        block["input"]
    );
    assert_eq!(
        events[events.len() - 2].1["delta"]["stop_reason"],
        "tool_use"
    );
    // count_tokens: the same prompt the generation counted.
    let (_, count) = post_json(
        &server.base,
        "/v1/messages/count_tokens",
        json!({"model": MODEL_ID,
        "system": body["system"], "messages": body["messages"], "tools": body["tools"]}),
    )
    .await;
    assert_eq!(
        count["input_tokens"],
        whole["usage"]["input_tokens"].as_u64().unwrap()
            + whole["usage"]["cache_read_input_tokens"]
                .as_u64()
                .unwrap_or(0)
    );
    // Errors are Anthropic's.
    let (status, err) = post_json(
        &server.base,
        "/v1/messages",
        json!({"model": MODEL_ID,
        "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "invalid_request_error");
}
