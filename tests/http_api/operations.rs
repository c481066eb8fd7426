//! What operators and load balancers rely on: health, version, models, tokenize, metrics,
//! cancellation on disconnect and overload.

use std::time::Duration;

use serde_json::{json, Value};

use crate::server::{start, ServerOptions, MODEL_ID};

async fn get_json(url: String) -> (u16, Value) {
    let res = reqwest::get(url).await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_version_openapi_and_models_answer() {
    let server = start(ServerOptions::default()).await;
    assert_eq!(get_json(server.url("/health")).await.0, 200);
    let (_, version) = get_json(server.url("/version")).await;
    assert!(version["version"].is_string());
    let (_, doc) = get_json(server.url("/openapi.json")).await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/v1/chat/completions"]["post"].is_object());
    let (_, models) = get_json(server.url("/v1/models")).await;
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL_ID);
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["max_model_len"], server.max_model_len);
    let (status, model) = get_json(server.url(&format!("/v1/models/{MODEL_ID}"))).await;
    assert_eq!(status, 200);
    assert_eq!(model["id"], MODEL_ID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_turns_503_when_the_engine_is_gone() {
    let server = start(ServerOptions::default()).await;
    server.engine.shutdown();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = get_json(server.url("/health")).await;
        if status == 503 {
            assert!(body["error"]["message"].is_string());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "health stayed {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let res = reqwest::Client::new()
        .post(server.url("/v1/completions"))
        .json(&json!({"model": MODEL_ID, "prompt": "x", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenize_and_detokenize_round_trip() {
    let server = start(ServerOptions::default()).await;
    let client = reqwest::Client::new();
    let tok: Value = client
        .post(server.url("/tokenize"))
        .json(&json!({"model": MODEL_ID, "prompt": "In the beginning", "add_special_tokens": false, "return_token_strs": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tok["count"], tok["tokens"].as_array().unwrap().len());
    assert_eq!(tok["max_model_len"], server.max_model_len);
    assert_eq!(
        tok["token_strs"].as_array().unwrap().len(),
        tok["tokens"].as_array().unwrap().len()
    );
    let detok: Value = client
        .post(server.url("/detokenize"))
        .json(&json!({"model": MODEL_ID, "tokens": tok["tokens"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detok["prompt"], "In the beginning");
    let bad = client
        .post(server.url("/detokenize"))
        .json(&json!({"tokens": [1_000_000]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_use_vllm_names_and_count_tokens() {
    let server = start(ServerOptions::default()).await;
    let res = reqwest::Client::new()
        .post(server.url("/v1/completions"))
        .json(&json!({"model": MODEL_ID, "prompt": "light", "max_tokens": 4, "ignore_eos": true}))
        .send()
        .await
        .unwrap();
    let usage = res.json::<Value>().await.unwrap()["usage"].clone();
    let res = reqwest::get(server.url("/metrics")).await.unwrap();
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = res.text().await.unwrap();
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:cache_config_info",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:request_queue_time_seconds_bucket",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(name) && l.contains("model_name=\"llama\"")),
            "missing {name}"
        );
    }
    assert!(text.contains("block_size=\"16\""));
    assert!(text.contains("num_gpu_blocks=\"256\""));
    assert_eq!(
        server.metric("vllm:generation_tokens_total").await,
        usage["completion_tokens"].as_f64().unwrap()
    );
    assert_eq!(
        server.metric("vllm:prompt_tokens_total").await,
        usage["prompt_tokens"].as_f64().unwrap()
    );
}

/// Opens a long streaming completion and returns the response once its first chunk arrived.
async fn open_long_stream(base: &str) -> reqwest::Response {
    let mut res = reqwest::Client::new()
        .post(format!("{base}/v1/completions"))
        .json(&json!({"model": MODEL_ID, "prompt": "And the earth was", "max_tokens": 200, "ignore_eos": true, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let first = res.chunk().await.unwrap().expect("a first chunk");
    assert!(String::from_utf8_lossy(&first).contains("data:"));
    res
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_stream_returns_running_and_kv_usage_to_zero() {
    let server = start(ServerOptions {
        step_delay: Duration::from_millis(20),
        ..ServerOptions::default()
    })
    .await;
    let stream = open_long_stream(&server.base).await;
    // The gauges are published after the step that sent the first chunk: wait for them.
    server
        .wait_for_metric("vllm:num_requests_running", 1.0, Duration::from_secs(10))
        .await;
    assert!(server.metric("vllm:kv_cache_usage_perc").await > 0.0);
    drop(stream);
    server.wait_until_idle(Duration::from_secs(10)).await;
    server
        .wait_for_metric("vllm:num_requests_running", 0.0, Duration::from_secs(10))
        .await;
    server
        .wait_for_metric("vllm:kv_cache_usage_perc", 0.0, Duration::from_secs(10))
        .await;
    assert_eq!(server.engine.num_unfinished(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_gives_429_with_retry_after_and_the_server_keeps_serving() {
    let server = start(ServerOptions {
        max_num_seqs: 1,
        max_queue: 1,
        step_delay: Duration::from_millis(20),
        ..ServerOptions::default()
    })
    .await;
    let mut open = Vec::new();
    let mut rejected = None;
    for _ in 0..4 {
        let res = reqwest::Client::new()
            .post(server.url("/v1/completions"))
            .json(&json!({"model": MODEL_ID, "prompt": "And the earth was", "max_tokens": 200, "ignore_eos": true, "stream": true}))
            .send()
            .await
            .unwrap();
        if res.status() == 429 {
            rejected = Some(res);
            break;
        }
        assert_eq!(res.status(), 200);
        open.push(res);
    }
    let rejected = rejected.expect("a full queue answers 429");
    assert_eq!(rejected.headers()["retry-after"], "2");
    let body: Value = rejected.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    drop(open);
    server.wait_until_idle(Duration::from_secs(10)).await;
    server
        .wait_for_metric("vllm:num_requests_running", 0.0, Duration::from_secs(10))
        .await;
    server
        .wait_for_metric("vllm:num_requests_waiting", 0.0, Duration::from_secs(10))
        .await;
    let res = reqwest::Client::new()
        .post(server.url("/v1/completions"))
        .json(&json!({"model": MODEL_ID, "prompt": "light", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    assert_eq!(
        status,
        200,
        "{}; unfinished {}",
        res.text().await.unwrap(),
        server.engine.num_unfinished()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_finishes_its_headers_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start(ServerOptions {
        header_read_timeout: Duration::from_millis(300),
        ..ServerOptions::default()
    })
    .await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // A request line and one header, then nothing: the blank line never comes.
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "the server kept a connection with unfinished headers open for 10 s"
    );
    // Well-behaved clients are unaffected, on a fresh connection or a kept-alive one.
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let res = client.get(server.url("/health")).send().await.unwrap();
        assert_eq!(res.status().as_u16(), 200);
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}
