//! Every error over HTTP: status, OpenAI error body, and that the server keeps serving.

use serde_json::{json, Value};

use crate::server::{start, ServerOptions, MODEL_ID};

async fn error_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body: Value = res
        .json()
        .await
        .unwrap_or_else(|e| panic!("status {status}: body is not JSON: {e}"));
    let err = &body["error"];
    assert!(err["message"].is_string(), "{body}");
    assert!(err["type"].is_string(), "{body}");
    assert!(
        err.get("param").is_some() && err.get("code").is_some(),
        "{body}"
    );
    (status, body)
}

fn chat(extra: Value) -> Value {
    let mut body = json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_parameters_are_400_with_the_param_named() {
    let server = start(ServerOptions::default()).await;
    let client = reqwest::Client::new();
    let cases = [
        (chat(json!({"temperature": 2.5})), "temperature"),
        (chat(json!({"top_p": 0})), "top_p"),
        (chat(json!({"n": 0})), "n"),
        (chat(json!({"max_tokens": 0})), "max_tokens"),
        (
            chat(json!({"logprobs": true, "top_logprobs": 21})),
            "top_logprobs",
        ),
        (
            chat(json!({"stream_options": {"include_usage": true}})),
            "stream_options",
        ),
        (chat(json!({"priority": "urgent"})), "priority"),
        (json!({"model": MODEL_ID, "messages": []}), "messages"),
    ];
    for (body, param) in cases {
        let (status, err) = error_of(
            client
                .post(server.url("/v1/chat/completions"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(err["error"]["param"], param, "{err}");
    }
    let (status, err) = error_of(
        client
            .post(server.url("/v1/completions"))
            .json(&json!({"model": MODEL_ID, "prompt": "x", "suffix": "y"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("suffix"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_plus_max_tokens_beyond_context_is_400_naming_both_numbers() {
    let server = start(ServerOptions::default()).await;
    let too_many = server.max_model_len + 1;
    let res = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&chat(json!({"max_tokens": too_many, "stream": true})))
        .send()
        .await
        .unwrap();
    let (status, err) = error_of(res).await;
    assert_eq!(status, 400);
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&server.max_model_len.to_string()),
        "{message}"
    );
    assert!(message.contains(&too_many.to_string()), "{message}");
    assert_eq!(err["error"]["code"], "context_length_exceeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_wrong_content_type_and_missing_fields_are_400() {
    let server = start(ServerOptions::default()).await;
    let client = reqwest::Client::new();
    let url = server.url("/v1/chat/completions");
    let bad_json = client
        .post(&url)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(bad_json).await.0, 400);
    let form = client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("model=x")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(form).await.0, 400);
    // A missing `messages` (a missing `model` goes to the only model: model_names.rs).
    let no_messages = client
        .post(&url)
        .json(&json!({"model": MODEL_ID}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(no_messages).await.0, 400);
    let wrong_type = client
        .post(&url)
        .json(&chat(json!({"temperature": "hot"})))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(wrong_type).await.0, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_and_route_are_404_and_wrong_method_is_405() {
    let server = start(ServerOptions::default()).await;
    let client = reqwest::Client::new();
    let (status, err) = error_of(
        client
            .post(server.url("/v1/chat/completions"))
            .json(&json!({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "model_not_found");
    assert_eq!(
        error_of(
            client
                .get(server.url("/v1/models/gpt-9"))
                .send()
                .await
                .unwrap()
        )
        .await
        .0,
        404
    );
    assert_eq!(
        error_of(client.get(server.url("/v1/nothing")).send().await.unwrap())
            .await
            .0,
        404
    );
    assert_eq!(
        error_of(
            client
                .get(server.url("/v1/chat/completions"))
                .send()
                .await
                .unwrap()
        )
        .await
        .0,
        405
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_limit_is_413() {
    let server = start(ServerOptions {
        max_body_bytes: 1024,
        ..ServerOptions::default()
    })
    .await;
    let big = chat(json!({"user": "x".repeat(4096)}));
    let res = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(res).await.0, 413);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_guards_the_api_but_not_health_or_metrics() {
    let server = start(ServerOptions {
        api_keys: vec!["sekrit".into()],
        ..ServerOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let (status, err) = error_of(client.get(server.url("/v1/models")).send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(err["error"]["code"], "invalid_api_key");
    assert_eq!(
        client
            .get(server.url("/v1/models"))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        client
            .post(server.url("/tokenize"))
            .json(&json!({"prompt": "x"}))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        client
            .get(server.url("/v1/models"))
            .bearer_auth("sekrit")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    for open in ["/health", "/metrics", "/version"] {
        assert_eq!(
            client.get(server.url(open)).send().await.unwrap().status(),
            200,
            "{open}"
        );
    }
}
