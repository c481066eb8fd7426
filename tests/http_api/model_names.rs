//! Forgiving model names: a request without `model` reaches the default model, extra names and
//! alias globs reach the model they name (responses name the served id), and an unknown name is
//! a 404 listing what is served.

use serde_json::json;
use sluice_api::model_names::ModelNames;

use crate::server::post_json as post;
use crate::server::{start, ServerOptions, MODEL_ID};

fn chat(model: Option<&str>) -> serde_json::Value {
    let mut body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_model_reaches_the_only_model_and_names_it() {
    let server = start(ServerOptions::default()).await;
    let (status, body) = post(&server.base, "/v1/chat/completions", chat(None)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], MODEL_ID);
    for (path, request) in [
        ("/v1/completions", json!({"prompt": "hi", "max_tokens": 1})),
        (
            "/v1/responses",
            json!({"input": "hi", "max_output_tokens": 2}),
        ),
        (
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
        ),
        ("/v1/embeddings", json!({"input": "hi"})),
    ] {
        let (status, body) = post(&server.base, path, request).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body["model"], MODEL_ID, "{path}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_names_and_alias_globs_reach_their_model_and_are_echoed() {
    let names = ModelNames::default()
        .with_name("tiny", MODEL_ID)
        .with_alias("claude-*=tiny")
        .unwrap();
    let server = start(ServerOptions {
        model_names: names,
        ..ServerOptions::default()
    })
    .await;
    for name in ["tiny", "claude-sonnet-4-5", MODEL_ID] {
        let (status, body) = post(&server.base, "/v1/chat/completions", chat(Some(name))).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(
            body["model"], MODEL_ID,
            "{name}: the model that answered is named"
        );
    }
    let (status, body) = post(
        &server.base,
        "/v1/messages",
        json!({"model": "claude-haiku-4-5", "max_tokens": 2,
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // An unknown name is a 404 that lists what is served.
    let (status, body) = post(&server.base, "/v1/chat/completions", chat(Some("gpt-4o"))).await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("'gpt-4o'") && message.contains(&format!("served models: {MODEL_ID}")),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_several_models_and_no_default_a_missing_model_is_a_400() {
    let tokenizer =
        std::sync::Arc::new(sluice_text::Tokenizer::from_dir(&crate::server::model_dir()).unwrap());
    let server = start(ServerOptions {
        extra_models: vec![("second".into(), tokenizer.clone())],
        ..ServerOptions::default()
    })
    .await;
    let (status, body) = post(&server.base, "/v1/chat/completions", chat(None)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "model");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--default-model"));
    let server = start(ServerOptions {
        extra_models: vec![("second".into(), tokenizer)],
        model_names: ModelNames::default().with_default("second"),
        ..ServerOptions::default()
    })
    .await;
    let (status, body) = post(&server.base, "/v1/chat/completions", chat(None)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "second");
}
