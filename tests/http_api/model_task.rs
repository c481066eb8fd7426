//! `--task`: a model served as an embedder answers no generation, and `/v1/models` says what
//! each model is for.

use serde_json::{json, Value};
use sluice_api::registry::ModelTask;

use crate::server::post_json as post;
use crate::server::{fixture, start, ServerOptions, MODEL_ID};

async fn card(base: &str) -> Value {
    let models: Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    models["data"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_served_as_an_embedder_refuses_generation_and_embeds() {
    let server = start(ServerOptions {
        task: ModelTask::Embed,
        ..ServerOptions::default()
    })
    .await;
    for (path, body) in [
        (
            "/v1/completions",
            json!({"model": MODEL_ID, "prompt": "hi", "max_tokens": 1}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ] {
        let (status, error) = post(&server.base, path, body).await;
        assert_eq!(status, 400, "{path}: {error}");
        assert_eq!(error["error"]["param"], "model");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("--task embed"), "{message}");
    }
    let (status, embedded) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "{embedded}");
    // Rerank by cosine similarity of embeddings: a document equal to the query scores 1.
    let (status, ranked) = post(
        &server.base,
        "/v1/rerank",
        json!({"model": MODEL_ID, "query": "light", "documents": ["light", "dark"]}),
    )
    .await;
    assert_eq!(status, 200, "{ranked}");
    assert_eq!(ranked["results"][0]["index"], 0);
    let top = ranked["results"][0]["relevance_score"].as_f64().unwrap();
    assert!((top - 1.0).abs() < 1e-4, "{ranked}");
    assert_eq!(card(&server.base).await["task"], "embed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_keeps_detecting_the_task_from_the_model_files() {
    let generative = start(ServerOptions::default()).await;
    assert_eq!(card(&generative.base).await["task"], "generate");
    let (status, _) = post(
        &generative.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "auto still embeds with a generative model");
    let embedder = start(fixture("qwen3-embedder")).await;
    assert_eq!(card(&embedder.base).await["task"], "embed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_served_for_generation_refuses_embeddings() {
    let server = start(ServerOptions {
        task: ModelTask::Generate,
        ..ServerOptions::default()
    })
    .await;
    let (status, error) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": "hi"}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    let (status, _) = post(
        &server.base,
        "/v1/completions",
        json!({"model": MODEL_ID, "prompt": "hi", "max_tokens": 1}),
    )
    .await;
    assert_eq!(status, 200);
}
