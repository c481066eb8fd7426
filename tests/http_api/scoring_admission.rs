//! Admission of the scoring routes (`/v1/embeddings`, `/v1/rerank`, `/v1/score`): their inputs
//! are one group in the engine's queue, as a completion's prompts are, and go through the same
//! byte pre-check as generation before anything is tokenized.

use std::time::Duration;

use serde_json::{json, Value};

use crate::server::post_json as post;
use crate::server::{model_dir, start, ServerOptions, MODEL_ID};

/// A slow engine with a small queue: 2 seats, 8 queued sequences, 20 ms a step.
fn small_queue(fixture: Option<&str>) -> ServerOptions {
    ServerOptions {
        max_queue: 8,
        max_num_seqs: 2,
        step_delay: Duration::from_millis(20),
        model_dir: fixture.map(|f| model_dir().join("..").join(f)),
        ..ServerOptions::default()
    }
}

fn assert_names_the_queue(status: u16, body: &Value, param: &str, requests: usize) {
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], param, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("--max-queue"), "{message}");
    assert!(
        message.contains(&format!("{requests} engine requests")),
        "{message}"
    );
    assert!(message.contains("at most 8"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_larger_than_the_queue_are_a_400_naming_it_and_a_full_queue_runs_whole() {
    let server = start(small_queue(None)).await;
    let inputs: Vec<String> = (0..40).map(|i| format!("verse {i} of the book")).collect();
    // Before: the first 8 inputs were queued one by one, the 9th found the queue full, and the
    // request was a 429 with Retry-After, however idle the server and however often retried.
    for _ in 0..2 {
        let (status, body) = post(
            &server.base,
            "/v1/embeddings",
            json!({"model": MODEL_ID, "input": inputs}),
        )
        .await;
        assert_names_the_queue(status, &body, "input", 40);
    }
    // As many inputs as the queue holds are admitted whole on an idle server.
    let (status, body) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": inputs[..8]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 8);
    assert_eq!(body["data"][7]["index"], 7);
    server.wait_until_idle(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_and_score_larger_than_the_queue_are_a_400_naming_it() {
    let server = start(small_queue(Some("qwen3-reranker"))).await;
    let documents: Vec<String> = (0..40).map(|i| format!("document {i}")).collect();
    for path in ["/v1/rerank", "/rerank"] {
        let body = json!({"model": MODEL_ID, "query": "which?", "documents": documents});
        let (status, body) = post(&server.base, path, body).await;
        assert_names_the_queue(status, &body, "documents", 40);
    }
    let body = json!({"model": MODEL_ID, "text_1": "which?", "text_2": documents});
    let (status, body) = post(&server.base, "/v1/score", body).await;
    assert_names_the_queue(status, &body, "documents", 40);
    let body = json!({"model": MODEL_ID, "query": "which?", "documents": documents[..8]});
    let (status, body) = post(&server.base, "/v1/rerank", body).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"].as_array().unwrap().len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoring_input_too_long_for_any_tokenization_is_refused_before_tokenizing() {
    let server = start(ServerOptions::default()).await;
    // Far more bytes than the context could hold whatever their tokens (the tokenizer's
    // longest token is much shorter than this many bytes per context position).
    let long = "light ".repeat(server.max_model_len * 64);
    let (status, body) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": ["short", long]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert_eq!(body["error"]["param"], "input");
    // The refusal comes from the byte count, not from a tokenization.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{} bytes long", long.len())),
        "{message}"
    );
    let (status, body) = post(
        &server.base,
        "/v1/score",
        json!({"model": MODEL_ID, "text_1": "query", "text_2": [long]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("bytes long"));
    // With truncation the same input is tokenized and its last tokens embedded.
    let (status, body) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": long, "truncate_prompt_tokens": 16}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["prompt_tokens"], 16);
}
