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
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}
    ]}))
    .unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].content[0].type"
    );
}

fn image_request(url: &str) -> ChatCompletionRequest {
    serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "what is"},
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": "this?"}
        ]}
    ]}))
    .unwrap()
}

#[test]
fn an_image_to_a_text_only_model_is_refused_naming_the_part() {
    let err = validate_chat(image_request("data:image/png;base64,iVBORw=="), LIMITS).unwrap_err();
    assert!(err.to_string().contains("does not take images"), "{err}");
    assert_eq!(
        rejected_param(Err::<(), _>(err)),
        "messages[0].content[1].image_url"
    );
}

#[test]
fn an_image_part_stays_a_part_in_its_place() {
    let limits = ModelLimits {
        takes_images: true,
        ..LIMITS
    };
    let v = validate_chat(image_request("data:image/png;base64,iVBORw=="), limits).unwrap();
    assert_eq!(
        v.messages[0]["content"],
        json!([{"type": "text", "text": "what is"}, {"type": "image"},
               {"type": "text", "text": "this?"}])
    );
    assert_eq!(v.images.len(), 1);
    assert_eq!(v.images[0].part, "messages[0].content[1].image_url");
    assert_eq!(&v.images[0].bytes[..], &[0x89, b'P', b'N', b'G']);
    let remote = validate_chat(image_request("https://example.com/cat.png"), limits);
    assert_eq!(rejected_param(remote), "messages[0].content[1].image_url");
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
