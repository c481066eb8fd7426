//! Anthropic content blocks into template messages, tools, thinking and the shared checks.

use serde_json::{json, Value};

use super::*;
use crate::validate::tools::ToolChoice;

const LIMITS: ModelLimits = ModelLimits {
    max_model_len: 4096,
    vocab_size: 100,
    takes_images: false,
};

fn valid(body: Value) -> ValidChatRequest {
    validate_messages(serde_json::from_value(body).unwrap(), LIMITS).expect("request is valid")
}

fn invalid(body: Value) -> ApiError {
    validate_messages(serde_json::from_value(body).unwrap(), LIMITS).expect_err("invalid")
}

fn param(err: &ApiError) -> Option<&str> {
    match err {
        ApiError::InvalidRequest { param, .. } => param.as_deref(),
        _ => None,
    }
}

#[test]
fn system_and_string_content_become_chat_messages() {
    let v = valid(json!({"model": "m", "max_tokens": 10,
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(
        v.messages,
        json!([{"role": "system", "content": "a\nb"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(v.params.max_tokens, Some(10));
    // No `thinking`: Anthropic's default, thinking off.
    assert_eq!(v.template_kwargs, Some(json!({"enable_thinking": false})));
}

#[test]
fn tool_use_and_tool_results_become_calls_and_tool_messages() {
    let v = valid(json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "use the tool", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get", "input": {"city": "Rome"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "cold"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
             "content": [{"type": "text", "text": "timeout"}]},
            {"type": "text", "text": "and tomorrow?"}]}
    ]}));
    let m = v.messages.as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m[1]["content"], "checking");
    assert_eq!(m[1]["reasoning_content"], "use the tool");
    assert_eq!(m[1]["tool_calls"][0]["id"], "toolu_1");
    assert_eq!(
        m[1]["tool_calls"][1]["function"],
        json!({"name": "get", "arguments": {"city": "Rome"}})
    );
    assert_eq!(
        m[2],
        json!({"role": "tool", "content": "cold", "tool_call_id": "toolu_1"})
    );
    assert_eq!(m[3]["content"], "Error: timeout");
    assert_eq!(m[4], json!({"role": "user", "content": "and tomorrow?"}));
}

#[test]
fn unsupported_blocks_and_roles_name_their_field() {
    let cases = [
        (
            json!({"role": "user", "content": [{"type": "image", "source": {}}]}),
            "messages[0].content[0].source.type",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "image", "source": {}}]}),
            "messages[0].content[0].type",
        ),
        (
            // A well-formed image, to a text-only model.
            json!({"role": "user", "content": [{"type": "image", "source": {"type": "base64",
                "media_type": "image/png", "data": "iVBORw=="}}]}),
            "messages[0].content[0].source.data",
        ),
        (
            json!({"role": "user", "content": [{"type": "document", "source": {}}]}),
            "messages[0].content[0].type",
        ),
        (
            json!({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}),
            "messages[0].content[0].type",
        ),
        (
            json!({"role": "user", "content": [{"type": "tool_result"}]}),
            "messages[0].content[0].tool_use_id",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}),
            "messages[0].content[0].id",
        ),
        (
            json!({"role": "system", "content": "x"}),
            "messages[0].role",
        ),
    ];
    for (message, field) in cases {
        let err = invalid(json!({"model": "m", "max_tokens": 5, "messages": [message]}));
        assert_eq!(param(&err), Some(field), "{err}");
    }
    let err = invalid(json!({"model": "m", "max_tokens": 5, "messages": []}));
    assert_eq!(param(&err), Some("messages"));
}

#[test]
fn max_tokens_is_required() {
    let err = invalid(json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}));
    assert_eq!(param(&err), Some("max_tokens"));
    let err = invalid(json!({"model": "m", "max_tokens": 0,
        "messages": [{"role": "user", "content": "x"}]}));
    assert_eq!(param(&err), Some("max_tokens"));
}

#[test]
fn client_tools_are_read_and_server_tools_skipped() {
    let v = valid(json!({"model": "m", "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "get", "description": "d",
                   "input_schema": {"type": "object", "properties": {"c": {"type": "string"}}}},
                  {"type": "bash_20250124", "name": "bash"},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true}}));
    assert_eq!(v.tools.tools.len(), 1);
    assert_eq!(
        v.tools.tools[0].parameters["properties"]["c"]["type"],
        "string"
    );
    assert_eq!(v.tools.choice, ToolChoice::Required);
    assert!(!v.tools.parallel);
    let tools = json!([{"name": "get", "input_schema": {"type": "object"}}]);
    for tool in [
        json!({"name": "get"}),
        json!({"name": "get", "input_schema": []}),
        json!({"name": "get", "input_schema": {}, "description": 7}),
    ] {
        let err = invalid(json!({"model": "m", "max_tokens": 5, "tools": [tool],
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(param(&err).unwrap().starts_with("tools[0]."), "{err:?}");
    }
    let choice = |c: Value| {
        valid(
            json!({"model": "m", "max_tokens": 5, "tools": tools, "tool_choice": c,
            "messages": [{"role": "user", "content": "x"}]}),
        )
        .tools
    };
    assert_eq!(choice(json!({"type": "auto"})).choice, ToolChoice::Auto);
    assert!(choice(json!({"type": "auto"})).parallel);
    assert_eq!(choice(json!({"type": "none"})).choice, ToolChoice::None);
    assert_eq!(
        choice(json!({"type": "tool", "name": "get"})).choice,
        ToolChoice::Named("get".into())
    );
    let err = invalid(json!({"model": "m", "max_tokens": 5, "tools": tools,
        "tool_choice": {"type": "tool", "name": "other"},
        "messages": [{"role": "user", "content": "x"}]}));
    assert_eq!(param(&err), Some("tool_choice"));
    for flag in [json!({}), json!("yes"), json!(1)] {
        let err = invalid(json!({"model": "m", "max_tokens": 5, "tools": tools,
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": flag},
            "messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(param(&err), Some("tool_choice"), "{flag}");
    }
    // `"model": null` names no model, as an absent one.
    assert_eq!(
        valid(json!({"model": null, "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}]}))
        .model,
        ""
    );
}

#[test]
fn thinking_switches_the_template_and_sampling_fields_are_checked() {
    let v = valid(
        json!({"model": "m", "max_tokens": 50, "thinking": {"type": "disabled"},
        "messages": [{"role": "user", "content": "x"}], "stop_sequences": ["END"],
        "temperature": 0.3, "top_k": 4, "stream": true, "metadata": {"user_id": "u"}}),
    );
    assert_eq!(v.template_kwargs, Some(json!({"enable_thinking": false})));
    assert_eq!(v.params.sampling.top_k, Some(4));
    assert!(v.params.stream.is_some());
    assert_eq!(v.params.user.as_deref(), Some("u"));
    let v = valid(json!({"model": "m", "max_tokens": 50,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "x"}]}));
    assert_eq!(v.template_kwargs, Some(json!({"enable_thinking": true})));
    let err = invalid(
        json!({"model": "m", "max_tokens": 5, "stop_sequences": [""],
        "messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(param(&err), Some("stop_sequences"));
}

#[test]
fn count_tokens_needs_no_max_tokens() {
    let req: CountTokensRequest = serde_json::from_value(json!({"model": "m",
        "system": "s", "messages": [{"role": "user", "content": "x"}]}))
    .unwrap();
    let v = validate_count_tokens(req, LIMITS).unwrap();
    assert_eq!(v.messages.as_array().unwrap().len(), 2);
}

#[test]
fn structured_outputs_become_a_json_schema_constraint_from_either_field() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let base =
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let format = json!({"type": "json_schema", "schema": schema});
    for body in [
        with(json!({"output_config": {"format": format}})),
        with(json!({"output_format": format})),
    ] {
        let v = valid(body);
        assert!(matches!(
            v.params.sampling.response_format,
            sluice_engine::ResponseFormat::JsonSchema(_)
        ));
    }
    for (extra, field) in [
        (
            json!({"output_config": {"format": format}, "output_format": format}),
            "output_format",
        ),
        (
            json!({"output_config": {"format": {"type": "text"}}}),
            "output_config.format",
        ),
        (
            json!({"output_format": {"type": "json_schema"}}),
            "output_format",
        ),
        (
            json!({"output_format": {"type": "json_schema",
                   "schema": {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}}}),
            "output_format",
        ),
    ] {
        let err = invalid(with(extra.clone()));
        assert_eq!(param(&err), Some(field), "{extra}: {err:?}");
    }
}

/// Claude Code sends its environment as a `system` message after the first user turn, as
/// Anthropic's API allows; it is rendered in place. Anywhere else it is a 400.
#[test]
fn a_system_message_after_a_user_turn_stays_in_place() {
    let v = valid(json!({"model": "m", "max_tokens": 10, "system": "top",
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
                     {"role": "assistant", "content": "ok"},
                     {"role": "user", "content": "go"}]}));
    assert_eq!(
        v.messages,
        json!([{"role": "system", "content": "top"}, {"role": "user", "content": "hi"},
               {"role": "system", "content": "# Environment"},
               {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}])
    );
    for messages in [
        json!([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]),
        json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
               {"role": "system", "content": "x"}]),
    ] {
        let err = invalid(json!({"model": "m", "max_tokens": 10, "messages": messages}));
        assert!(param(&err).is_some_and(|p| p.ends_with(".role")), "{err:?}");
    }
}
