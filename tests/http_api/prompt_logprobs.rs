//! vLLM's `prompt_logprobs` on `/v1/completions` and `/v1/chat/completions`, and streamed
//! `echo` with `logprobs`: each equal to the echoed prompt logprobs of one body, which
//! `scoring.rs` checks against transformers.

use serde_json::{json, Value};

use crate::server::post_json as post;
use crate::server::{model_dir, sse_payloads, start, ServerOptions, MODEL_ID};

/// Every position's entries of a `prompt_logprobs` list: `(token id, logprob, rank, text)`.
fn entries(position: &Value) -> Vec<(u32, f64, u64, String)> {
    (position.as_object().unwrap().iter())
        .map(|(id, e)| {
            (
                id.parse().unwrap(),
                e["logprob"].as_f64().unwrap(),
                e["rank"].as_u64().unwrap(),
                e["decoded_token"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_logprobs_equal_the_echoed_prompt_logprobs() {
    let server = start(ServerOptions::default()).await;
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(model_dir().join("scoring_reference.json")).unwrap(),
    )
    .unwrap();
    let ids: Vec<u32> = serde_json::from_value(reference["prompt_ids"].clone()).unwrap();
    let echo =
        json!({"model": MODEL_ID, "prompt": ids, "echo": true, "logprobs": 3, "max_tokens": 0});
    let (status, echoed) = post(&server.base, "/v1/completions", &echo).await;
    assert_eq!(status, 200, "{echoed}");
    let echo_lp = &echoed["choices"][0]["logprobs"];
    assert!(echoed["choices"][0].get("prompt_logprobs").is_none());
    // Two choices of one prompt: each carries the prompt's list.
    let body =
        json!({"model": MODEL_ID, "prompt": ids, "prompt_logprobs": 2, "max_tokens": 1, "n": 2});
    let (status, scored) = post(&server.base, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{scored}");
    for choice in scored["choices"].as_array().unwrap() {
        let list = choice["prompt_logprobs"].as_array().unwrap();
        assert_eq!(list.len(), ids.len(), "one entry per prompt token");
        assert!(list[0].is_null(), "the first token has no context");
        for (p, position) in list.iter().enumerate().skip(1) {
            let entries = entries(position);
            let own = entries
                .iter()
                .find(|e| e.0 == ids[p])
                .expect("the prompt token");
            let want = echo_lp["token_logprobs"][p].as_f64().unwrap();
            assert_eq!(
                own.1, want,
                "position {p}: the same scoring pass as the echo"
            );
            assert_eq!(own.3, echo_lp["tokens"][p].as_str().unwrap());
            assert!(own.2 >= 1);
            // The top 2 (ranks 1 and 2) plus the prompt token when it is not among them.
            assert!(entries.len() == 2 || entries.len() == 3, "{position}");
            if own.2 > 2 {
                assert_eq!(entries.len(), 3);
            }
            let best = entries.iter().find(|e| e.2 == 1).expect("a rank-1 entry");
            assert!(entries.iter().all(|e| e.1 <= best.1), "{position}");
            // The echo names alternatives by text (tokens of equal text share one key).
            let echo_top = echo_lp["top_logprobs"][p].as_object().unwrap();
            assert!(echo_top.contains_key(&best.3), "{position} vs {echo_top:?}");
        }
        assert_eq!(choice["finish_reason"], "length");
    }
    assert_eq!(
        scored["choices"][0]["prompt_logprobs"],
        scored["choices"][1]["prompt_logprobs"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prompt_logprobs_cover_the_rendered_conversation() {
    let server = start(ServerOptions::default()).await;
    let body = json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "Let there be light"}],
        "prompt_logprobs": 0, "max_tokens": 1});
    let (status, chat) = post(&server.base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{chat}");
    let list = chat["prompt_logprobs"].as_array().unwrap();
    assert_eq!(
        list.len() as u64,
        chat["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert!(list[0].is_null());
    for position in &list[1..] {
        // k = 0: the prompt token alone.
        assert_eq!(position.as_object().unwrap().len(), 1, "{position}");
    }
    // The same tokens through /v1/completions score the same.
    let tokens: Value = reqwest::Client::new()
        .post(server.url("/tokenize"))
        .json(&json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "Let there be light"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let body = json!({"model": MODEL_ID, "prompt": tokens["tokens"], "prompt_logprobs": 0, "max_tokens": 1});
    let (_, completion) = post(&server.base, "/v1/completions", &body).await;
    assert_eq!(
        completion["choices"][0]["prompt_logprobs"],
        chat["prompt_logprobs"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_logprobs_are_refused_out_of_range_or_streamed() {
    let server = start(ServerOptions::default()).await;
    for (extra, param) in [
        (json!({"prompt_logprobs": 21}), "prompt_logprobs"),
        (json!({"prompt_logprobs": -1}), "prompt_logprobs"),
        (
            json!({"prompt_logprobs": 1, "stream": true}),
            "prompt_logprobs",
        ),
    ] {
        let mut body = json!({"model": MODEL_ID, "prompt": "hi", "max_tokens": 1});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, error) = post(&server.base, "/v1/completions", &body).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert_eq!(error["error"]["param"], param);
    }
}

/// The streamed choices of a completion, folded: text and logprobs lists per index.
fn fold_stream(body: &str) -> Vec<Value> {
    let mut choices: Vec<Value> = Vec::new();
    for payload in sse_payloads(body) {
        if payload == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(&payload).unwrap();
        for c in chunk["choices"].as_array().unwrap() {
            let index = c["index"].as_u64().unwrap() as usize;
            if choices.len() <= index {
                choices.resize(
                    index + 1,
                    json!({"text": "", "logprobs": {
                    "tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}}),
                );
            }
            let folded = &mut choices[index];
            let text = folded["text"].as_str().unwrap().to_string() + c["text"].as_str().unwrap();
            folded["text"] = json!(text);
            if let Some(lp) = c["logprobs"].as_object() {
                for key in ["tokens", "token_logprobs", "top_logprobs", "text_offset"] {
                    let list = folded["logprobs"][key].as_array_mut().unwrap();
                    list.extend(lp[key].as_array().unwrap().iter().cloned());
                }
            }
            if !c["finish_reason"].is_null() {
                folded["finish_reason"] = c["finish_reason"].clone();
            }
        }
    }
    choices
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_echo_with_logprobs_equals_the_one_body() {
    let server = start(ServerOptions::default()).await;
    for max_tokens in [0, 5] {
        let body = json!({"model": MODEL_ID, "prompt": ["Let there be light", "And God said"],
            "echo": true, "logprobs": 2, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true, "n": 2});
        let (status, whole) = post(&server.base, "/v1/completions", &body).await;
        assert_eq!(status, 200, "{whole}");
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let res = reqwest::Client::new()
            .post(server.url("/v1/completions"))
            .json(&streamed)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let folded = fold_stream(&res.text().await.unwrap());
        let want = whole["choices"].as_array().unwrap();
        assert_eq!(folded.len(), want.len());
        for (got, want) in folded.iter().zip(want) {
            assert_eq!(got["text"], want["text"], "max_tokens {max_tokens}");
            assert_eq!(got["logprobs"], want["logprobs"], "max_tokens {max_tokens}");
            assert_eq!(got["finish_reason"], want["finish_reason"]);
            assert!(
                got["logprobs"]["token_logprobs"][0].is_null(),
                "the first prompt token"
            );
        }
    }
}
