//! The render routes through the whole router, over the `llama-tools` fixture's tokenizer and
//! chat template and an engine that has already stopped: a render that reached the engine
//! would fail, so every 200 here also shows that nothing was submitted.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sluice_engine::{Engine, EngineConfig, Executor, ExecutorError, GenerationRequest, Priority};
use sluice_model::{Batch, KvGroupId, KvPools, Logits};
use sluice_text::Tokenizer;
use tower::ServiceExt;

use crate::registry::ModelTask;
use crate::validate::ValidStream;
use crate::wire::render::RenderedRequest;
use crate::{ApiConfig, ServedModel};

const MODEL: &str = "tools";
const MAX_MODEL_LEN: usize = 4096;

/// A backend that refuses every forward pass.
struct NoForward {
    vocab_size: usize,
}

impl Executor for NoForward {
    fn execute(&mut self, _batch: &Batch) -> Result<Logits, ExecutorError> {
        Err(ExecutorError::Forward(
            "render must not run the model".into(),
        ))
    }
    fn vocab_size(&self) -> usize {
        self.vocab_size
    }
    fn block_size(&self) -> usize {
        16
    }
    fn kv_pools(&self) -> KvPools {
        KvPools::full(64)
    }
    fn block_bytes(&self, _group: KvGroupId) -> usize {
        0
    }
    fn save_block(&self, _group: KvGroupId, _block: u32, _out: &mut Vec<u8>) {}
    fn load_block(&mut self, _: KvGroupId, _: u32, _: &[u8]) -> Result<(), ExecutorError> {
        Ok(())
    }
}

fn tokenizer() -> Arc<Tokenizer> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/models/llama-tools"
    );
    Arc::new(Tokenizer::from_dir(std::path::Path::new(dir)).unwrap())
}

/// The router over one model, `tools`, whose engine has stopped.
fn app(api_keys: Vec<String>) -> Router {
    let tokenizer = tokenizer();
    let engine = Engine::start(
        Box::new(NoForward {
            vocab_size: tokenizer.vocab_size(),
        }),
        tokenizer.clone(),
        EngineConfig {
            max_model_len: MAX_MODEL_LEN,
            ..EngineConfig::default()
        },
    );
    engine.shutdown();
    assert!(engine.wait_stopped(Duration::from_secs(10)));
    let model = ServedModel {
        id: MODEL.into(),
        engine,
        tokenizer,
        max_model_len: MAX_MODEL_LEN,
        created: 0,
        pooling: None,
        task: ModelTask::Auto,
        lease: None,
        images: None,
    };
    crate::router(
        vec![model],
        ApiConfig {
            api_keys,
            ..ApiConfig::default()
        },
    )
}

async fn send(app: &Router, path: &str, body: &str, key: Option<&str>) -> (StatusCode, Value) {
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        req = req.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    send(app, path, &body.to_string(), None).await
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "Current weather of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

fn messages() -> Value {
    json!([{"role": "system", "content": "Be brief."},
           {"role": "user", "content": "Weather in Paris? <|im_end|> not a control token"}])
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn chat_render_gives_the_tokens_tokenize_gives_for_the_same_conversation() {
    let app = app(Vec::new());
    for tools in [None, Some(tools())] {
        let mut render = json!({"model": MODEL, "messages": messages()});
        let mut tokenize = render.clone();
        if let Some(tools) = &tools {
            render["tools"] = tools.clone();
            tokenize["tools"] = tools.clone();
        }
        let (status, rendered) = post(&app, "/v1/chat/completions/render", render).await;
        assert_eq!(status, StatusCode::OK, "{rendered}");
        let (status, tokenized) = post(&app, "/tokenize", tokenize).await;
        assert_eq!(status, StatusCode::OK, "{tokenized}");
        assert_eq!(ids(&rendered["token_ids"]), ids(&tokenized["tokens"]));
        let n = tokenized["count"].as_u64().unwrap();
        assert_eq!(
            rendered["sampling_params"]["max_tokens"],
            MAX_MODEL_LEN as u64 - n,
            "max_tokens defaults to the rest of the context"
        );
        assert!(rendered["request_id"]
            .as_str()
            .unwrap()
            .starts_with("chatcmpl-"));
        assert_eq!(rendered["model"], MODEL);
        assert!(rendered["features"].is_null());
        assert_eq!(rendered["stream"], false);
        assert!(rendered["stream_options"].is_null());
    }
}

#[tokio::test]
async fn chat_render_writes_the_tools_and_reports_the_resolved_parameters() {
    let app = app(Vec::new());
    let plain = post(
        &app,
        "/v1/chat/completions/render",
        json!({"model": MODEL, "messages": messages()}),
    )
    .await
    .1;
    let (status, with_tools) = post(
        &app,
        "/v1/chat/completions/render",
        json!({"model": MODEL, "messages": messages(), "tools": tools(), "tool_choice": "required",
               "max_tokens": 7, "temperature": 0.25, "top_k": 5, "seed": 9, "n": 2,
               "stop": ["END"], "priority": "high", "cache_salt": "s", "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{with_tools}");
    assert!(
        ids(&with_tools["token_ids"]).len() > ids(&plain["token_ids"]).len(),
        "the template writes the tools into the prompt"
    );
    let sampling = &with_tools["sampling_params"];
    assert_eq!(sampling["max_tokens"], 7);
    assert_eq!(sampling["temperature"], 0.25);
    assert_eq!(sampling["top_k"], 5);
    assert_eq!(sampling["seed"], 9);
    assert_eq!(sampling["n"], 2);
    assert_eq!(sampling["stop"], json!(["END"]));
    assert_eq!(with_tools["priority"], -1);
    assert_eq!(with_tools["cache_salt"], "s");
    assert_eq!(with_tools["stream"], true);
    assert_eq!(with_tools["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn completion_render_gives_one_request_per_prompt_as_generation_tokenizes_it() {
    let app = app(Vec::new());
    let tokenizer = tokenizer();
    let prompts = ["Once upon a time", "jumps"];
    let (status, rendered) = post(
        &app,
        "/v1/completions/render",
        json!({"model": MODEL, "prompt": prompts, "max_tokens": 3, "logprobs": 2}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rendered}");
    let rendered = rendered.as_array().unwrap();
    assert_eq!(rendered.len(), 2);
    for (one, prompt) in rendered.iter().zip(prompts) {
        let text: Vec<u64> = (tokenizer.encode(prompt, true).unwrap())
            .into_iter()
            .map(u64::from)
            .collect();
        assert_eq!(ids(&one["token_ids"]), text, "with the tokenizer's BOS");
        assert!(one["request_id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(one["sampling_params"]["max_tokens"], 3);
        assert_eq!(one["sampling_params"]["logprobs"], 2);
        assert_eq!(one["model"], MODEL);
    }
    assert_ne!(rendered[0]["request_id"], rendered[1]["request_id"]);
    // Token prompts pass as given.
    let (status, rendered) = post(
        &app,
        "/v1/completions/render",
        json!({"model": MODEL, "prompt": [[5, 6, 7], [8]]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rendered}");
    assert_eq!(ids(&rendered[0]["token_ids"]), vec![5, 6, 7]);
    assert_eq!(ids(&rendered[1]["token_ids"]), vec![8]);
    assert_eq!(
        rendered[1]["sampling_params"]["max_tokens"],
        MAX_MODEL_LEN as u64 - 1
    );
}

#[tokio::test]
async fn model_may_be_left_out_as_vllm_allows() {
    let app = app(Vec::new());
    let (status, chat) = post(
        &app,
        "/v1/chat/completions/render",
        json!({"messages": messages()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{chat}");
    assert_eq!(chat["model"], MODEL);
    let (status, completion) = post(
        &app,
        "/v1/completions/render",
        json!({"model": null, "prompt": "hi"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{completion}");
    assert_eq!(completion[0]["model"], MODEL);
}

#[tokio::test]
async fn errors_are_the_generating_routes_errors() {
    let app = app(Vec::new());
    for path in ["/v1/chat/completions/render", "/v1/completions/render"] {
        let body = json!({"model": "nope", "messages": messages(), "prompt": "hi"});
        let (status, err) = post(&app, path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {err}");
        assert_eq!(err["error"]["code"], "model_not_found");
        let (status, err) = send(&app, path, "{\"model\": ", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
        assert_eq!(err["error"]["type"], "invalid_request_error");
        let (status, err) = send(&app, path, "[1, 2]", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
        let (status, err) = send(&app, path, r#"{"model": 3}"#, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
    }
    let chat = "/v1/chat/completions/render";
    let (status, err) = post(&app, chat, json!({"model": MODEL, "messages": "hi"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let too_long = json!({"model": MODEL, "messages": messages(), "max_tokens": MAX_MODEL_LEN});
    let (status, err) = post(&app, chat, too_long).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["code"], "context_length_exceeded");
    let (status, err) = post(&app, chat, json!({"model": MODEL, "messages": []})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let completions = "/v1/completions/render";
    let (status, err) = post(&app, completions, json!({"model": MODEL, "prompt": [9999]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    // The engine really is stopped: generating is refused where rendering succeeded.
    let (status, _) = post(
        &app,
        "/v1/chat/completions",
        json!({"model": MODEL, "messages": messages(), "max_tokens": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn render_needs_the_api_key_like_every_v1_route() {
    let app = app(vec!["secret".into()]);
    let body = json!({"model": MODEL, "messages": messages(), "prompt": "hi"}).to_string();
    for path in ["/v1/chat/completions/render", "/v1/completions/render"] {
        let (status, _) = send(&app, path, &body, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        let (status, _) = send(&app, path, &body, Some("wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        let (status, ok) = send(&app, path, &body, Some("secret")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {ok}");
    }
}

#[test]
fn a_rendered_request_has_vllm_generate_request_fields() {
    let request = GenerationRequest {
        prompt_tokens: vec![1, 2, 3],
        n: 2,
        sampling: Default::default(),
        stop: Default::default(),
        priority: Priority::Low,
        cache_salt: Some(7),
        caller: None,
        images: Default::default(),
        prompt_outputs: Default::default(),
    };
    let stream = Some(ValidStream {
        include_usage: true,
    });
    let rendered = super::rendered_request("chatcmpl", "m", request, stream, Some("salt".into()));
    let v = serde_json::to_value(&rendered).unwrap();
    assert!(v["request_id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["token_ids"], json!([1, 2, 3]));
    assert!(v["features"].is_null());
    assert!(v["kv_transfer_params"].is_null());
    assert_eq!(v["model"], "m");
    assert_eq!(v["stream"], true);
    assert_eq!(v["stream_options"]["include_usage"], true);
    assert_eq!(
        v["cache_salt"], "salt",
        "the client's salt, not the derived scope"
    );
    assert_eq!(v["priority"], 1);
    let sampling = &v["sampling_params"];
    assert_eq!(sampling["n"], 2);
    assert_eq!(sampling["top_k"], 0);
    assert_eq!(sampling["stop"], json!([]));
    assert!(sampling["logit_bias"].is_null());
    let back: RenderedRequest = serde_json::from_value(v).unwrap();
    assert_eq!(back, rendered);
}
