//! A client that stops reading its streamed response: the write deadline drops the connection
//! and the engine frees the request.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::{start, ServerOptions, MODEL_ID};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_and_its_request_cancelled() {
    // 200 steps of at least 40 ms: the request would take 8 s to complete.
    let server = start(ServerOptions {
        step_delay: Duration::from_millis(40),
        write_timeout: Duration::from_millis(500),
        ..ServerOptions::default()
    })
    .await;
    // A receive buffer as small as the kernel allows, never read: the server's writes stall
    // soon, since every step produces ~16 KB (16 choices with 20 alternatives per token).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let addr = server.base.trim_start_matches("http://").parse().unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    let body = json!({
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "In the beginning"}],
        "max_tokens": 200,
        "ignore_eos": true,
        "n": 16,
        "logprobs": true,
        "top_logprobs": 20,
        "stream": true,
    })
    .to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    let started = Instant::now();
    server
        .wait_for_metric("vllm:num_requests_running", 16.0, Duration::from_secs(10))
        .await;
    // Within the deadline (plus slack) of the stall, every sequence and block is free...
    server.wait_until_idle(Duration::from_secs(6)).await;
    server
        .wait_for_metric("vllm:num_requests_running", 0.0, Duration::from_secs(2))
        .await;
    server
        .wait_for_metric("vllm:kv_cache_usage_perc", 0.0, Duration::from_secs(2))
        .await;
    // ...because the request was cancelled, long before it could have completed.
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        crate::metrics::scrape(
            &server.base,
            &format!("vllm:request_success_total{{model_name=\"{MODEL_ID}\",task=\"generate\"}}")
        )
        .await,
        0.0
    );
    // The connection is closed: what the client finally reads ends without `[DONE]`.
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    assert!(!String::from_utf8_lossy(&got).contains("[DONE]"));
    // Other clients are served as usual.
    let res = reqwest::Client::new()
        .post(server.url("/v1/completions"))
        .json(&json!({"model": MODEL_ID, "prompt": "light", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
