//! Chat messages: roles, content parts, tool-call turns.

use serde_json::json;

use super::*;

#[test]
fn empty_messages_are_rejected() {
    let req: ChatCompletionRequest =
        serde_json::from_value(json!({"model": "m", "messages": []})).unwrap();
    assert_eq!(rejected_param(validate_chat(req, LIMITS)), "messages");
}

#[test]
fn unknown_role_is_rejected_and_developer_is_system() {
    let req: ChatCompletionRequest = serde_json::from_value(
        json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
    )
    .unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].role"
    );
    let req: ChatCompletionRequest = serde_json::from_value(
        json!({"model": "m", "messages": [{"role": "developer", "content": "x"}]}),
    )
    .unwrap();
    assert_eq!(
        validate_chat(req, LIMITS).unwrap().messages[0]["role"],
        "system"
    );
}

#[test]
fn text_parts_are_joined_and_other_parts_rejected() {
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "content": "42", "tool_call_id": "c1"}
    ]}))
    .unwrap();
    let v = validate_chat(req, LIMITS).unwrap();
    assert_eq!(v.messages[1]["content"], "a\nb");
    assert_eq!(v.messages[3]["tool_call_id"], "c1");
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    ]}))
    .unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].content[0].type"
    );
}

#[test]
fn message_without_content_is_rejected_unless_it_carries_tool_calls() {
    let req: ChatCompletionRequest =
        serde_json::from_value(json!({"model": "m", "messages": [{"role": "user"}]})).unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].content"
    );
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "assistant", "tool_calls": [{"id": "c1"}]}
    ]}))
    .unwrap();
    assert_eq!(
        validate_chat(req, LIMITS).unwrap().messages[0]["content"],
        ""
    );
}
