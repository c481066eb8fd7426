//! `/v1/completions` over HTTP.

use serde_json::{json, Value};

use crate::server::{sse_payloads, start, ServerOptions, MODEL_ID};

async fn complete(base: &str, body: Value) -> (u16, Value) {
    let res = reqwest::Client::new()
        .post(format!("{base}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_has_openai_shape() {
    let server = start(ServerOptions::default()).await;
    let (status, body) = complete(
        &server.base,
        json!({"model": MODEL_ID, "prompt": "In the beginning", "max_tokens": 5, "seed": 2}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(body["object"], "text_completion");
    assert!(body["system_fingerprint"].is_string());
    assert!(body["choices"][0]["text"].is_string());
    assert!(body["choices"][0]["logprobs"].is_null());
    let usage = &body["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_text_equals_nonstream_text_for_completions() {
    let server = start(ServerOptions::default()).await;
    let params = json!({"model": MODEL_ID, "prompt": "And God said", "max_tokens": 12, "temperature": 0.8, "seed": 77, "ignore_eos": true});
    let (_, whole) = complete(&server.base, params.clone()).await;
    let mut streamed = params;
    streamed["stream"] = json!(true);
    let res = reqwest::Client::new()
        .post(server.url("/v1/completions"))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    let payloads = sse_payloads(&res.text().await.unwrap());
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let mut text = String::new();
    let mut finishes = Vec::new();
    for p in &payloads[..payloads.len() - 1] {
        let chunk: Value = serde_json::from_str(p).unwrap();
        assert_eq!(chunk["object"], "text_completion");
        text.push_str(chunk["choices"][0]["text"].as_str().unwrap());
        if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
            finishes.push(f.to_string());
        }
    }
    assert_eq!(text, whole["choices"][0]["text"].as_str().unwrap());
    assert_eq!(finishes, vec!["length"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_prompts_index_choices_by_prompt_then_choice() {
    let server = start(ServerOptions::default()).await;
    let (status, body) = complete(
        &server.base,
        json!({"model": MODEL_ID, "prompt": ["first", "second prompt"], "n": 2, "max_tokens": 3, "ignore_eos": true, "seed": 5}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 4);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["finish_reason"], "length");
    }
    assert_eq!(body["usage"]["completion_tokens"], 12);
    // Prompt tokens count each prompt once.
    let mut prompt_tokens = 0;
    for p in ["first", "second prompt"] {
        let tok: Value = reqwest::Client::new()
            .post(server.url("/tokenize"))
            .json(&json!({"model": MODEL_ID, "prompt": p}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        prompt_tokens += tok["count"].as_u64().unwrap();
    }
    assert_eq!(
        body["usage"]["prompt_tokens"].as_u64().unwrap(),
        prompt_tokens
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_id_prompts_and_echo_work() {
    let server = start(ServerOptions::default()).await;
    let tok: Value = reqwest::Client::new()
        .post(server.url("/tokenize"))
        .json(&json!({"model": MODEL_ID, "prompt": "Let there be light"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids = tok["tokens"].clone();
    let greedy = |prompt: Value| json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": true});
    let (_, by_text) = complete(&server.base, greedy(json!("Let there be light"))).await;
    let (_, by_ids) = complete(&server.base, greedy(ids.clone())).await;
    let (_, by_id_lists) = complete(&server.base, greedy(json!([ids]))).await;
    assert_eq!(by_text["choices"][0]["text"], by_ids["choices"][0]["text"]);
    assert_eq!(
        by_ids["choices"][0]["text"],
        by_id_lists["choices"][0]["text"]
    );
    let mut echo = greedy(json!("Let there be light"));
    echo["echo"] = json!(true);
    let (_, echoed) = complete(&server.base, echo).await;
    let generated = by_text["choices"][0]["text"].as_str().unwrap();
    assert_eq!(
        echoed["choices"][0]["text"].as_str().unwrap(),
        format!("Let there be light{generated}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_logprobs_are_parallel_lists() {
    let server = start(ServerOptions::default()).await;
    let (status, body) = complete(&server.base, json!({"model": MODEL_ID, "prompt": "light", "max_tokens": 5, "logprobs": 2, "ignore_eos": true})).await;
    assert_eq!(status, 200, "{body}");
    let lp = &body["choices"][0]["logprobs"];
    let tokens = lp["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 5);
    assert_eq!(lp["token_logprobs"].as_array().unwrap().len(), 5);
    assert_eq!(lp["text_offset"].as_array().unwrap().len(), 5);
    assert_eq!(lp["text_offset"][0], 0);
    for top in lp["top_logprobs"].as_array().unwrap() {
        let top = top.as_object().unwrap();
        assert!(!top.is_empty() && top.len() <= 2);
    }
}
