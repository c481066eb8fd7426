//! Images through Anthropic Messages `image` blocks: the same prompt as chat's `image_url`
//! gives the same continuation, and bad blocks are 400s naming the block.

use serde_json::{json, Value};

use crate::images::{base64, fixture_dir, reference_text, serve, vision_model};
use crate::server::{post_json, start, MODEL_ID};

fn image_block(name: &str) -> Value {
    let bytes = std::fs::read(fixture_dir().join("images").join(name)).unwrap();
    json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                       "data": base64(&bytes)}})
}

fn messages(blocks: Vec<Value>) -> Value {
    json!({"model": MODEL_ID, "max_tokens": 8, "temperature": 0,
           "messages": [{"role": "user", "content": blocks}]})
}

#[tokio::test]
async fn an_anthropic_image_block_gives_the_reference_greedy_continuation() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let body = messages(vec![
        json!({"type": "text", "text": "The quick brown fox "}),
        image_block("rgb_48x20.png"),
        json!({"type": "text", "text": " looks at the lazy dog."}),
    ]);
    let (status, answer) = post_json(&server.base, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["content"][0]["text"], reference_text("prompt"));
    assert_eq!(answer["usage"]["input_tokens"], 38);
}

#[tokio::test]
async fn bad_anthropic_image_blocks_are_400s_naming_the_block() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let cases = [
        (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                               "data": base64(b"not an image")}}),
            "messages[0].content[1].source.data",
        ),
        (
            json!({"type": "image", "source": {"type": "url",
                                               "url": "https://example.com/a.png"}}),
            "messages[0].content[1].source.url",
        ),
        (json!({"type": "image"}), "messages[0].content[1].source"),
    ];
    for (block, param) in cases {
        let body = messages(vec![json!({"type": "text", "text": "a"}), block]);
        let (status, answer) = post_json(&server.base, "/v1/messages", &body).await;
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(param), "{param}: {answer}");
    }
}

fn input_image(name: &str) -> Value {
    let bytes = std::fs::read(fixture_dir().join("images").join(name)).unwrap();
    json!({"type": "input_image", "image_url": format!("data:image/png;base64,{}", base64(&bytes))})
}

/// The text of a Responses answer's message item.
fn output_text(answer: &Value) -> &str {
    let message = (answer["output"].as_array().unwrap().iter())
        .find(|item| item["type"] == "message")
        .unwrap_or_else(|| panic!("no message in {answer}"));
    message["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn a_responses_input_image_gives_the_reference_continuation_and_the_next_turn_keeps_it() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let body = json!({"model": MODEL_ID, "max_output_tokens": 8, "temperature": 0,
        "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "The quick brown fox "},
            input_image("rgb_48x20.png"),
            {"type": "input_text", "text": " looks at the lazy dog."}]}]});
    let (status, answer) = post_json(&server.base, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(output_text(&answer), reference_text("prompt"));
    assert_eq!(answer["usage"]["input_tokens"], 38);
    // The next turn renders the stored image again: its blocks come from the prefix cache.
    let next = json!({"model": MODEL_ID, "max_output_tokens": 2, "temperature": 0,
        "previous_response_id": answer["id"], "input": "and then?"});
    let (status, again) = post_json(&server.base, "/v1/responses", &next).await;
    assert_eq!(status, 200, "{again}");
    let cached = again["usage"]["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 32, "{again}");
    // The stored input lists the image where it was sent.
    let path = format!(
        "/v1/responses/{}/input_items?order=asc",
        answer["id"].as_str().unwrap()
    );
    let items: Value = reqwest::get(server.url(&path))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parts = &items["data"][0]["content"];
    assert_eq!(parts[0]["text"], "The quick brown fox ");
    assert_eq!(parts[1]["type"], "input_image");
    assert_eq!(
        parts[1]["image_url"],
        body["input"][0]["content"][1]["image_url"]
    );
    // A file id names nothing here.
    let by_file = json!({"model": MODEL_ID, "input": [{"role": "user", "content": [
        {"type": "input_image", "file_id": "file-1"}]}]});
    let (status, answer) = post_json(&server.base, "/v1/responses", &by_file).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "input[0].content[0].image_url");
}
