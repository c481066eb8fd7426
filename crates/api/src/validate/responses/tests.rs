//! Responses input items into template messages, previous responses, and the shared checks.

use std::time::Instant;

use serde_json::{json, Value};
use sluice_engine::ResponseFormat;

use super::*;
use crate::validate::tools::ToolChoice;

const LIMITS: ModelLimits = ModelLimits {
    max_model_len: 4096,
    vocab_size: 100,
    takes_images: false,
};

fn request(body: Value) -> ResponsesRequest {
    serde_json::from_value(body).expect("request parses")
}

fn valid(body: Value) -> ValidResponsesRequest {
    validate_responses(request(body), LIMITS, None).expect("request is valid")
}

fn invalid(body: Value) -> ApiError {
    validate_responses(request(body), LIMITS, None).expect_err("request is invalid")
}

fn param(err: &ApiError) -> Option<&str> {
    match err {
        ApiError::InvalidRequest { param, .. } => param.as_deref(),
        _ => None,
    }
}

#[test]
fn string_input_is_one_user_message_after_the_instructions() {
    let v = valid(json!({"model": "m", "input": "hi", "instructions": "be brief"}));
    assert_eq!(
        v.chat.messages,
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(
        v.conversation,
        json!([{"role": "user", "content": "hi"}]),
        "instructions are not part of the stored conversation"
    );
}

#[test]
fn message_items_take_text_parts_and_roleless_type() {
    let v = valid(json!({"model": "m", "input": [
        {"role": "developer", "content": "sys"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c"}]}
    ]}));
    assert_eq!(
        v.chat.messages,
        json!([{"role": "system", "content": "sys"}, {"role": "user", "content": "a\nb"},
               {"role": "assistant", "content": "c"}])
    );
}

#[test]
fn function_calls_join_the_assistant_message_and_outputs_become_tool_messages() {
    let v = valid(json!({"model": "m", "input": [
        {"role": "user", "content": "weather?"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]},
        {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "function_call", "call_id": "c2", "name": "get", "arguments": "{\"city\":\"Rome\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "cold"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "warm"}]}
    ]}));
    let m = v.chat.messages.as_array().unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(m[1]["content"], "checking");
    assert_eq!(m[1]["reasoning_content"], "think");
    assert_eq!(m[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        m[1]["tool_calls"][1]["function"],
        json!({"name": "get", "arguments": {"city": "Rome"}}),
        "arguments reach the template as an object"
    );
    assert_eq!(
        m[2],
        json!({"role": "tool", "content": "cold", "tool_call_id": "c1"})
    );
    assert_eq!(m[3]["content"], "warm");
}

#[test]
fn a_call_after_reasoning_starts_its_own_assistant_message() {
    let v = valid(json!({"model": "m", "input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    ]}));
    let m = &v.chat.messages[1];
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["content"], "");
    assert_eq!(m["reasoning_content"], "plan");
    assert_eq!(m["tool_calls"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_items_name_their_field() {
    let cases = [
        (
            json!([{"type": "function_call", "name": "f"}]),
            "input[0].call_id",
        ),
        (
            json!([{"type": "function_call_output", "call_id": "c"}]),
            "input[0].output",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]),
            "input[0].content[0].image_url",
        ),
        (
            // A well-formed image, to a text-only model.
            json!([{"role": "user", "content": [{"type": "input_image",
                "image_url": "data:image/png;base64,iVBORw=="}]}]),
            "input[0].content[0].image_url",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "image_url": "x"},
                {"type": "input_file"}]}]),
            "input[0].content[0].image_url",
        ),
        (
            json!([{"role": "assistant", "content": [{"type": "input_image",
                "image_url": "data:image/png;base64,iVBORw=="}]}]),
            "input[0].content[0].type",
        ),
        (json!([{"role": "tool", "content": "x"}]), "input[0].role"),
        (
            json!([{"type": "item_reference", "id": "x"}]),
            "input[0].type",
        ),
        (json!([{"content": "x"}]), "input[0].type"),
        (json!([]), "input"),
    ];
    for (input, field) in cases {
        let err = invalid(json!({"model": "m", "input": input}));
        assert_eq!(param(&err), Some(field), "{err}");
    }
}

#[test]
fn previous_response_comes_before_the_new_input() {
    let stored = StoredResponse {
        input: json!([{"role": "user", "content": "weather?"}]),
        input_start: 0,
        output: json!([
            {"type": "reasoning", "id": "rs_1", "summary": [],
             "content": [{"type": "reasoning_text", "text": "need a tool"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get",
             "arguments": "{}", "status": "completed"}
        ]),
        body: json!({}),
        created: Instant::now(),
        owner: None,
    };
    let req = request(json!({"model": "m", "previous_response_id": "resp_1",
        "instructions": "new rules",
        "input": [{"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}));
    let v = validate_responses(req, LIMITS, Some(&stored)).unwrap();
    let m = v.chat.messages.as_array().unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(m[0], json!({"role": "system", "content": "new rules"}));
    assert_eq!(m[2]["reasoning_content"], "need a tool");
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], json!({}));
    assert_eq!(m[3]["tool_call_id"], "c1");
    assert_eq!(v.conversation.as_array().unwrap().len(), 3);
    assert_eq!(v.echo.previous_response_id.as_deref(), Some("resp_1"));

    let missing = invalid(json!({"model": "m", "input": "x", "previous_response_id": "resp_9"}));
    assert_eq!(param(&missing), Some("previous_response_id"));
}

#[test]
fn tools_choice_and_reasoning_effort_are_read() {
    let v = valid(json!({"model": "m", "input": "x",
        "tools": [{"type": "function", "name": "f", "description": "d",
                   "parameters": {"type": "object"}, "strict": true},
                  {"type": "web_search_preview"}],
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": false,
        "reasoning": {"effort": "none"}}));
    assert_eq!(v.chat.tools.tools.len(), 1);
    assert_eq!(v.chat.tools.tools[0].description.as_deref(), Some("d"));
    assert_eq!(v.chat.tools.choice, ToolChoice::Named("f".into()));
    assert!(!v.chat.tools.parallel);
    assert_eq!(
        v.chat.template_kwargs,
        Some(json!({"reasoning_effort": "none", "enable_thinking": false}))
    );
    let err = invalid(json!({"model": "m", "input": "x", "tool_choice": "required"}));
    assert_eq!(param(&err), Some("tool_choice"));
    let err = invalid(json!({"model": "m", "input": "x", "reasoning": {"effort": "max"}}));
    assert_eq!(param(&err), Some("reasoning.effort"));
}

#[test]
fn sampling_fields_go_through_the_shared_checks() {
    let v = valid(json!({"model": "m", "input": "x", "max_output_tokens": 7,
        "temperature": 0.5, "top_p": 0.9, "top_k": 5, "seed": 3, "stream": true, "user": "u"}));
    let p = &v.chat.params;
    assert_eq!(p.max_tokens, Some(7));
    assert_eq!(p.sampling.temperature, 0.5);
    assert_eq!(p.sampling.top_k, Some(5));
    assert_eq!(p.sampling.seed, Some(3));
    assert!(p.stream.is_some());
    assert_eq!(p.user.as_deref(), Some("u"));
    assert_eq!(p.n, 1);
    let err = invalid(json!({"model": "m", "input": "x", "max_output_tokens": 0}));
    assert_eq!(param(&err), Some("max_output_tokens"));
    let err = invalid(json!({"model": "m", "input": "x", "temperature": 3}));
    assert_eq!(param(&err), Some("temperature"));
}

#[test]
fn text_format_becomes_the_response_format() {
    let v = valid(
        json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema",
        "name": "n", "strict": true,
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    );
    assert!(matches!(
        v.chat.params.sampling.response_format,
        ResponseFormat::JsonSchema(_)
    ));
    let v = valid(json!({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}}));
    assert_eq!(
        v.chat.params.sampling.response_format,
        ResponseFormat::JsonObject
    );
    let err =
        invalid(json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}}));
    assert_eq!(param(&err), Some("text.format.schema"));
    let err = invalid(json!({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}));
    assert_eq!(param(&err), Some("text.format"));
}

#[test]
fn background_and_unknown_truncation_are_refused() {
    let err = invalid(json!({"model": "m", "input": "x", "background": true}));
    assert_eq!(param(&err), Some("background"));
    let err = invalid(json!({"model": "m", "input": "x", "truncation": "sometimes"}));
    assert_eq!(param(&err), Some("truncation"));
    valid(
        json!({"model": "m", "input": "x", "truncation": "auto", "store": false,
        "include": ["reasoning.encrypted_content"], "metadata": {"k": "v"}}),
    );
}
