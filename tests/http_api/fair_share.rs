//! Fair sharing of the engine's seats between API keys: one request with many choices does
//! not keep another key's request waiting for all of them, and loses none of its own tokens.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::metrics::scrape;
use crate::server::{sse_payloads, start, ServerOptions, MODEL_ID};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_key_runs_while_a_large_n_request_holds_every_seat() {
    let server = start(ServerOptions {
        api_keys: vec!["alice".into(), "bob".into()],
        max_num_seqs: 4,
        step_delay: Duration::from_millis(10),
        ..ServerOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    // Alice: 8 greedy choices of 150 tokens on 4 seats; her first wave alone takes 150 steps.
    let mut alice = client
        .post(server.url("/v1/completions"))
        .bearer_auth("alice")
        .json(&json!({
            "model": MODEL_ID, "prompt": "Once upon a time", "n": 8, "max_tokens": 150,
            "ignore_eos": true, "temperature": 0, "stream": true,
            "stream_options": {"include_usage": true},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(alice.status(), 200);
    let mut alice_body = String::from_utf8(alice.chunk().await.unwrap().unwrap().to_vec()).unwrap();
    server
        .wait_for_metric("vllm:num_requests_running", 4.0, Duration::from_secs(10))
        .await;

    // Bob: one short request while Alice holds every seat and has four choices waiting.
    let bob: Value = client
        .post(server.url("/v1/completions"))
        .bearer_auth("bob")
        .json(&json!({"model": MODEL_ID, "prompt": "Hello", "max_tokens": 8, "ignore_eos": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bob["choices"][0]["finish_reason"], "length", "{bob}");
    // Bob is done before any of Alice's choices is: he took a seat at once rather than
    // queueing behind her four waiting choices (which need her first wave to finish).
    let succeeded = r#"vllm:request_success_total{model_name="llama",task="generate"}"#;
    assert_eq!(
        scrape(&server.base, succeeded).await,
        1.0,
        "only Bob's choice"
    );
    assert!(server.metric("sluice:fair_share_preemptions_total").await >= 1.0);
    assert!(server.metric("sluice:fair_share_deferred_total").await >= 1.0);

    // Alice loses nothing: every choice ends with its 150 tokens, all equal (greedy), the
    // preempted one recomputed.
    while let Some(chunk) = alice.chunk().await.unwrap() {
        alice_body.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let mut texts: BTreeMap<u64, String> = BTreeMap::new();
    let mut finished = 0;
    let mut usage = Value::Null;
    for payload in sse_payloads(&alice_body) {
        if payload == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(&payload).unwrap();
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        for choice in chunk["choices"].as_array().unwrap() {
            let index = choice["index"].as_u64().unwrap();
            let text = choice["text"].as_str().unwrap_or_default();
            texts.entry(index).or_default().push_str(text);
            if choice["finish_reason"] == "length" {
                finished += 1;
            }
        }
    }
    assert_eq!(finished, 8);
    assert_eq!(usage["completion_tokens"], 8 * 150, "{usage}");
    assert_eq!(texts.len(), 8);
    let first = &texts[&0];
    assert!(texts.values().all(|t| t == first), "greedy choices differ");
    server.wait_until_idle(Duration::from_secs(10)).await;
}

/// Engine steps so far.
async fn steps(server: &crate::server::TestServer) -> f64 {
    server.metric("sluice:engine_steps_total").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_keys_short_prompt_runs_while_another_key_prefills_many_long_prompts() {
    let server = start(ServerOptions {
        api_keys: vec!["alice".into(), "bob".into()],
        step_delay: Duration::from_millis(20),
        max_num_seqs: 32,
        num_blocks: 640,
        ..ServerOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    // Alice: 32 prompts of 240 tokens (7,680 prompt tokens, 30 steps of 256 tokens), then as
    // prompt logprobs (`echo` + `logprobs`, scored 64 rows per prompt per step).
    let prompts: Vec<Vec<u32>> = (0..32u32)
        .map(|i| (0..240u32).map(|j| (i * 31 + j * 13) % 500 + 3).collect())
        .collect();
    let heavy = [
        json!({"model": MODEL_ID, "prompt": prompts, "max_tokens": 8, "ignore_eos": true}),
        json!({"model": MODEL_ID, "prompt": prompts, "max_tokens": 1, "echo": true, "logprobs": 1}),
    ];
    for body in heavy {
        let alice = tokio::spawn({
            let (client, url) = (client.clone(), server.url("/v1/completions"));
            async move {
                let res = client
                    .post(url)
                    .bearer_auth("alice")
                    .json(&body)
                    .send()
                    .await;
                res.unwrap().status().as_u16()
            }
        });
        // Bob arrives once Alice's prompts are being computed.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while server.metric("vllm:num_requests_running").await < 2.0 {
            assert!(std::time::Instant::now() < deadline, "Alice never ran");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let before = steps(&server).await;
        let bob: Value = client
            .post(server.url("/v1/completions"))
            .bearer_auth("bob")
            .json(
                &json!({"model": MODEL_ID, "prompt": "Hello", "max_tokens": 4, "ignore_eos": true}),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let waited = steps(&server).await - before;
        assert_eq!(bob["choices"][0]["finish_reason"], "length", "{bob}");
        // Bob's prompt runs in the step after it arrives and his 4 tokens take 4 steps; before,
        // it waited until every running prompt of Alice's was computed (20 steps or more).
        assert!(waited <= 7.0, "Bob waited {waited} steps");
        assert!(
            server.metric("vllm:num_requests_running").await >= 1.0,
            "Alice's prompts are still being computed"
        );
        assert_eq!(alice.await.unwrap(), 200);
        server.wait_until_idle(Duration::from_secs(20)).await;
    }
    assert!(
        server
            .metric("sluice:fair_share_prompt_tokens_deferred_total")
            .await
            > 0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_keys_tokenize_is_not_queued_behind_another_keys_large_prompts() {
    let server = start(ServerOptions {
        api_keys: vec!["alice".into(), "bob".into()],
        max_body_bytes: 4 << 20,
        ..ServerOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let big = "In the beginning God created the heaven and the earth. ".repeat(55_000);
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Alice: six 3 MB prompts at once; the server tokenizes two at a time.
    let alice: Vec<_> = (0..6)
        .map(|_| {
            let (client, url) = (client.clone(), server.url("/tokenize"));
            let (body, finished) = (json!({"model": MODEL_ID, "prompt": big}), finished.clone());
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .bearer_auth("alice")
                    .json(&body)
                    .send()
                    .await;
                let status = res.unwrap().status().as_u16();
                finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                status
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while scrape(&server.base, "sluice:tokenizing_waiting").await < 4.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "Alice's prompts never queued"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Bob's short prompt takes the first slot that frees, ahead of Alice's four queued ones
    // (before: behind all of them).
    let res = client
        .post(server.url("/tokenize"))
        .bearer_auth("bob")
        .json(&json!({"model": MODEL_ID, "prompt": "Hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let done = finished.load(std::sync::atomic::Ordering::SeqCst);
    assert!(done <= 2, "Bob waited for {done} of Alice's six prompts");
    for a in alice {
        assert_eq!(a.await.unwrap(), 200);
    }
    assert_eq!(
        scrape(&server.base, "sluice:tokenizing_slots_used").await,
        0.0
    );
}
