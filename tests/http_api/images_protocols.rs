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
