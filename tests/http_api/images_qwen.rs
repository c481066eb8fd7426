//! Qwen2.5-VL images over HTTP, against its fixture (fixtures/models/qwen2_5-vl, served with its
//! own chat template): images of different sizes take different numbers of tokens, and a chat
//! message with one or two `image_url` parts gives transformers' greedy continuation; the next
//! turn finds the image's blocks in the prefix cache; `/tokenize` counts each image's tokens.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::images::base64;
use crate::server::{post_json, start, ServerOptions, MODEL_ID};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/qwen2_5-vl")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture_dir().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn image_part(name: &str) -> Value {
    let bytes = std::fs::read(fixture_dir().join("images").join(name)).unwrap();
    let url = format!("data:image/png;base64,{}", base64(&bytes));
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// The reference prompt `name` as one user message: its images, then its question.
fn message(name: &str, question: &str) -> Value {
    let reference = reference();
    let mut parts: Vec<Value> = (reference[name]["images"].as_array().unwrap().iter())
        .map(|f| image_part(f.as_str().unwrap()))
        .collect();
    parts.push(json!({"type": "text", "text": question}));
    json!({"role": "user", "content": parts})
}

fn reference_text(name: &str) -> String {
    let tokenizer = sluice_text::Tokenizer::from_dir(&fixture_dir()).unwrap();
    let ids: Vec<u32> = (reference()[name]["greedy_tokens"]
        .as_array()
        .unwrap()
        .iter())
    .map(|t| t.as_u64().unwrap() as u32)
    .collect();
    tokenizer.decode(&ids, true).unwrap()
}

#[tokio::test]
async fn qwen_chat_images_give_the_reference_greedy_continuation() {
    let server = start(ServerOptions {
        model_dir: Some(fixture_dir()),
        ..ServerOptions::default()
    })
    .await;
    let reference = reference();
    for (name, question) in [
        ("prompt", "Describe this picture."),
        ("two_images", "Which is brighter?"),
    ] {
        let body = json!({"model": MODEL_ID, "messages": [message(name, question)],
            "max_tokens": 8, "temperature": 0, "ignore_eos": true});
        let (status, answer) = post_json(&server.base, "/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{answer}");
        let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(text, reference_text(name), "{name}");
        let prompt_len = reference[name]["input_ids"].as_array().unwrap().len();
        assert_eq!(answer["usage"]["prompt_tokens"], prompt_len, "{name}");

        let tokenize = json!({"model": MODEL_ID, "messages": [message(name, question)],
            "add_generation_prompt": true});
        let (status, tokens) = post_json(&server.base, "/tokenize", &tokenize).await;
        assert_eq!(status, 200, "{tokens}");
        assert_eq!(tokens["tokens"], reference[name]["input_ids"], "{name}");
    }
    // The next turn: the first exchange, then a question about the same image. Every full
    // block of the first turn's prompt comes from the cache.
    let first = json!({"model": MODEL_ID, "messages": [message("prompt", "Describe this picture.")],
        "max_tokens": 4, "temperature": 0});
    let (_, answer) = post_json(&server.base, "/v1/chat/completions", &first).await;
    let reply = answer["choices"][0]["message"]["content"].as_str().unwrap();
    let second = json!({"model": MODEL_ID, "max_tokens": 4, "temperature": 0, "messages": [
        message("prompt", "Describe this picture."),
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And its colours?"}]});
    let (status, again) = post_json(&server.base, "/v1/chat/completions", &second).await;
    assert_eq!(status, 200, "{again}");
    let cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 32, "the image's blocks are reused: {again}");
}
