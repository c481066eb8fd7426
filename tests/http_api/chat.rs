//! `/v1/chat/completions` over HTTP.

use serde_json::{json, Value};

use crate::server::{sse_payloads, start, ServerOptions, MODEL_ID};

fn chat_body(extra: Value) -> Value {
    let mut body = json!({"model": MODEL_ID, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Say something"}]}
    ]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

async fn post(url: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Concatenated content per choice index, and the finish reasons seen per index.
fn stream_choices(payloads: &[String]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut texts = vec![String::new(); 8];
    let mut finishes = vec![Vec::new(); 8];
    for p in payloads.iter().filter(|p| *p != "[DONE]") {
        let chunk: Value = serde_json::from_str(p).unwrap();
        for c in chunk["choices"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            if let Some(t) = c["delta"]["content"].as_str() {
                texts[i].push_str(t);
            }
            if let Some(f) = c["finish_reason"].as_str() {
                finishes[i].push(f.to_string());
            }
        }
    }
    (texts, finishes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completion_has_openai_shape_and_usage_adds_up() {
    let server = start(ServerOptions::default()).await;
    let res = post(
        &server.url("/v1/chat/completions"),
        &chat_body(json!({"max_tokens": 8, "seed": 1, "ignore_eos": true})),
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], MODEL_ID);
    assert!(body["created"].as_u64().unwrap() > 1_600_000_000);
    assert!(body["system_fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("fp_"));
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(choice["message"]["content"].is_string());
    assert!(choice["logprobs"].is_null());
    assert_eq!(choice["finish_reason"], "length");
    let usage = &body["usage"];
    let (p, c, t) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap(),
    );
    assert_eq!(p + c, t);
    assert_eq!(c, 8);
    // The prompt is the chat template's rendering, as /tokenize reports it.
    let tok: Value = post(
        &server.url("/tokenize"),
        &json!({"model": MODEL_ID, "messages": chat_body(json!({}))["messages"]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(tok["count"].as_u64().unwrap(), p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_text_equals_nonstream_text() {
    let server = start(ServerOptions::default()).await;
    let params = json!({"max_tokens": 16, "temperature": 1.0, "seed": 1234, "ignore_eos": true});
    let whole: Value = post(
        &server.url("/v1/chat/completions"),
        &chat_body(params.clone()),
    )
    .await
    .json()
    .await
    .unwrap();
    let mut streamed = params.clone();
    streamed["stream"] = json!(true);
    let res = post(&server.url("/v1/chat/completions"), &chat_body(streamed)).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let payloads = sse_payloads(&res.text().await.unwrap());
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let (texts, finishes) = stream_choices(&payloads);
    assert_eq!(
        texts[0],
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(
        finishes[0],
        vec![whole["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_chunks_share_one_id_role_comes_first_and_finish_comes_last() {
    let server = start(ServerOptions::default()).await;
    let body = chat_body(
        json!({"max_tokens": 6, "stream": true, "stream_options": {"include_usage": true}, "seed": 3}),
    );
    let payloads = sse_payloads(
        &post(&server.url("/v1/chat/completions"), &body)
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(chunks
        .iter()
        .all(|c| c["id"] == id && c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks[1..].iter().all(|c| c["choices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|ch| ch["delta"].get("role").is_none())));
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let finish_at = chunks
        .iter()
        .position(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(
        finish_at,
        chunks.len() - 2,
        "the finish chunk is the choice's last"
    );
    let usage = &usage_chunk["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_three_gives_three_complete_choices() {
    let server = start(ServerOptions::default()).await;
    let body: Value = post(
        &server.url("/v1/chat/completions"),
        &chat_body(json!({"n": 3, "max_tokens": 5, "seed": 9, "ignore_eos": true})),
    )
    .await
    .json()
    .await
    .unwrap();
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["finish_reason"], "length");
    }
    assert_eq!(body["usage"]["completion_tokens"], 15);

    let stream =
        chat_body(json!({"n": 3, "max_tokens": 5, "seed": 9, "ignore_eos": true, "stream": true}));
    let payloads = sse_payloads(
        &post(&server.url("/v1/chat/completions"), &stream)
            .await
            .text()
            .await
            .unwrap(),
    );
    let (texts, finishes) = stream_choices(&payloads);
    for i in 0..3 {
        assert_eq!(finishes[i], vec!["length".to_string()], "choice {i}");
        assert_eq!(
            texts[i],
            choices[i]["message"]["content"].as_str().unwrap(),
            "choice {i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_logprobs_list_each_token_with_alternatives() {
    let server = start(ServerOptions::default()).await;
    let body: Value = post(
        &server.url("/v1/chat/completions"),
        &chat_body(
            json!({"max_tokens": 4, "logprobs": true, "top_logprobs": 3, "ignore_eos": true}),
        ),
    )
    .await
    .json()
    .await
    .unwrap();
    let content = body["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(content.len(), 4);
    for entry in content {
        let token = entry["token"].as_str().unwrap();
        let bytes: Vec<u8> = entry["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect();
        // The token's own bytes: its text, unless it holds part of a character (then the
        // text shows U+FFFD where the bytes are).
        assert_eq!(String::from_utf8_lossy(&bytes), token);
        assert!(entry["logprob"].as_f64().unwrap() <= 0.0);
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        assert!(top[0]["logprob"].as_f64().unwrap() >= top[2]["logprob"].as_f64().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_stop_string_is_not_part_of_the_text() {
    let server = start(ServerOptions::default()).await;
    let greedy = json!({"max_tokens": 24, "temperature": 0, "ignore_eos": true});
    let full: Value = post(
        &server.url("/v1/chat/completions"),
        &chat_body(greedy.clone()),
    )
    .await
    .json()
    .await
    .unwrap();
    let text = full["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let Some(stop) = text
        .chars()
        .nth(5)
        .map(String::from)
        .filter(|s| !s.trim().is_empty() && s != "\u{fffd}")
    else {
        return; // too short a generation to cut
    };
    let mut with_stop = greedy.clone();
    with_stop["stop"] = json!([stop.clone()]);
    let cut: Value = post(&server.url("/v1/chat/completions"), &chat_body(with_stop))
        .await
        .json()
        .await
        .unwrap();
    let cut_text = cut["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(cut_text, &text[..text.find(&stop).unwrap()]);
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");
}
