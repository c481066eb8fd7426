//! End-to-end tests of the load generator against a scripted OpenAI-compatible server: a real
//! axum HTTP server that streams a known number of tokens at a known pace.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::client::{Endpoint, TokenizeApi};
use super::prompt::PromptFactory;
use super::report::BenchReport;
use super::sweep::{run_level, BenchEndpoint, LevelPlan, Workload};
use super::{run, BenchArgs};

/// Which `/tokenize` request shape the scripted server understands.
#[derive(Clone, Copy)]
enum Dialect {
    ModelPrompt,
    Content,
}

/// How the scripted server behaves.
#[derive(Clone)]
struct Script {
    token_delay: Duration,
    /// Send an error event after this many tokens instead of finishing.
    error_after: Option<usize>,
    /// Answer every completion with this status instead of a stream.
    status: Option<StatusCode>,
    dialect: Dialect,
}

impl Script {
    fn pace(token_delay_ms: u64) -> Self {
        Self {
            token_delay: Duration::from_millis(token_delay_ms),
            error_after: None,
            status: None,
            dialect: Dialect::ModelPrompt,
        }
    }
}

/// One token per whitespace-separated piece: the scripted server's whole tokenizer.
fn token_count(text: &str) -> usize {
    text.split_whitespace().count()
}

async fn completions(State(script): State<Arc<Script>>, Json(body): Json<Value>) -> Response {
    if let Some(status) = script.status {
        return (
            status,
            Json(json!({"error": {"message": "scripted failure"}})),
        )
            .into_response();
    }
    assert_eq!(
        body["ignore_eos"], true,
        "the bench must ask for ignore_eos"
    );
    assert_eq!(body["stream_options"]["include_usage"], true);
    let max_tokens = body["max_tokens"].as_u64().unwrap() as usize;
    let prompt_tokens = token_count(body["prompt"].as_str().unwrap());
    let events = futures_util::stream::unfold(0usize, move |sent| {
        let script = Arc::clone(&script);
        async move {
            let event = if sent < max_tokens {
                tokio::time::sleep(script.token_delay).await;
                if script.error_after == Some(sent) {
                    json!({"error": {"message": "scripted stream error"}}).to_string()
                } else {
                    json!({"choices": [{"index": 0, "text": " tok"}]}).to_string()
                }
            } else if sent == max_tokens {
                json!({"choices": [], "usage": {
                    "prompt_tokens": prompt_tokens, "completion_tokens": max_tokens}})
                .to_string()
            } else if sent == max_tokens + 1 {
                "[DONE]".to_owned()
            } else {
                return None;
            };
            let next = if script.error_after == Some(sent) {
                usize::MAX - 1
            } else {
                sent + 1
            };
            // Every event goes out in two writes to exercise reassembly over the wire.
            let frame = format!("data: {event}\n\n");
            let (head, tail) = frame.split_at(frame.len() / 2);
            let pieces = vec![
                Ok::<_, std::io::Error>(Bytes::from(head.to_owned())),
                Ok(Bytes::from(tail.to_owned())),
            ];
            Some((futures_util::stream::iter(pieces), next))
        }
    });
    let body = Body::from_stream(futures_util::StreamExt::flatten(events));
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn tokenize(State(script): State<Arc<Script>>, Json(body): Json<Value>) -> Json<Value> {
    let (field, reply_count) = match script.dialect {
        Dialect::ModelPrompt => ("prompt", true),
        Dialect::Content => ("content", false),
    };
    // Like llama-server, answer an unknown request shape with an empty token list.
    let n = body
        .get(field)
        .and_then(Value::as_str)
        .map_or(0, token_count);
    let tokens: Vec<usize> = (0..n).collect();
    if reply_count {
        Json(json!({"tokens": tokens, "count": n}))
    } else {
        Json(json!({"tokens": tokens}))
    }
}

/// Starts the scripted server on a free loopback port; returns its `/v1` base URL.
async fn serve(script: Script) -> String {
    let app = Router::new()
        .route("/v1/completions", post(completions))
        .route("/tokenize", post(tokenize))
        .route(
            "/v1/models",
            get(|| async { Json(json!({"data": [{"id": "scripted"}]})) }),
        )
        .with_state(Arc::new(script));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // Without TCP_NODELAY, small SSE writes wait on delayed ACKs (about 40 ms on Linux).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/v1")
}

fn plan(concurrency: usize, warmup_ms: u64, duration_ms: u64, drain_ms: u64) -> LevelPlan {
    LevelPlan {
        concurrency,
        warmup: Duration::from_millis(warmup_ms),
        duration: Duration::from_millis(duration_ms),
        drain_cap: Duration::from_millis(drain_ms),
        max_requests: None,
    }
}

async fn workload(endpoint: &Endpoint, prompt_tokens: usize, output_tokens: u32) -> Arc<Workload> {
    let prompts = PromptFactory::calibrated(endpoint, "scripted", prompt_tokens, 7)
        .await
        .unwrap();
    Arc::new(Workload {
        model: "scripted".into(),
        prompts,
        output_tokens,
        temperature: 0.0,
        endpoint: BenchEndpoint::Completions,
        inputs_per_request: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_rates_match_the_scripted_token_pace() {
    let endpoint = Endpoint::new(&serve(Script::pace(5)).await, None).unwrap();
    let workload = workload(&endpoint, 40, 10).await;
    let one = run_level(&endpoint, &workload, plan(1, 200, 1500, 2000))
        .await
        .unwrap();
    let four = run_level(&endpoint, &workload, plan(4, 200, 1500, 2000))
        .await
        .unwrap();
    for level in [&one, &four] {
        assert_eq!(level.errors, 0, "{:?}", level.error_samples);
        assert_eq!(level.cut, 0);
        assert_eq!(level.completion_tokens_mean, Some(10.0));
        assert_eq!(level.prompt_tokens_mean, Some(40.0));
        let itl = level.itl_ms.unwrap();
        assert!((4.5..9.0).contains(&itl.p50), "ITL p50 {}", itl.p50);
        let ttft = level.ttft_ms.unwrap();
        assert!((4.5..30.0).contains(&ttft.p50), "TTFT p50 {}", ttft.p50);
    }
    // One stream at 5 ms a token makes at most 200 tokens/s; four streams four times that.
    assert!(
        (100.0..=205.0).contains(&one.output_tokens_per_s),
        "{}",
        one.output_tokens_per_s
    );
    let scaling = four.output_tokens_per_s / one.output_tokens_per_s;
    assert!(
        (3.0..4.5).contains(&scaling),
        "4 streams gave {scaling}x one stream"
    );
    // 10 tokens at >= 5 ms each: at most 20 requests/s per stream.
    assert!(
        one.requests_per_s > 10.0 && one.requests_per_s <= 20.5,
        "{}",
        one.requests_per_s
    );
}

#[tokio::test]
async fn prompt_length_is_calibrated_with_either_tokenize_dialect() {
    for (dialect, api) in [
        (Dialect::ModelPrompt, TokenizeApi::ModelPrompt),
        (Dialect::Content, TokenizeApi::Content),
    ] {
        let script = Script {
            dialect,
            ..Script::pace(1)
        };
        let endpoint = Endpoint::new(&serve(script).await, None).unwrap();
        assert_eq!(
            endpoint.detect_tokenize("scripted", "a b c").await,
            Some(api)
        );
        let prompts = PromptFactory::calibrated(&endpoint, "scripted", 128, 3)
            .await
            .unwrap();
        assert_eq!(prompts.calibrated_tokens(), Some(128.0));
        assert_eq!(token_count(&prompts.next_prompt()), 128);
    }
}

#[tokio::test]
async fn error_events_inside_streams_count_as_errors() {
    let script = Script {
        error_after: Some(3),
        ..Script::pace(1)
    };
    let endpoint = Endpoint::new(&serve(script).await, None).unwrap();
    let workload = workload(&endpoint, 8, 10).await;
    let level = run_level(&endpoint, &workload, plan(2, 0, 300, 1000))
        .await
        .unwrap();
    assert!(level.errors > 0);
    assert_eq!(level.requests_completed, 0);
    assert_eq!(level.ttft_ms, None);
    assert_eq!(level.error_samples, ["error event: scripted stream error"]);
}

#[tokio::test]
async fn http_error_statuses_count_as_errors() {
    let script = Script {
        status: Some(StatusCode::SERVICE_UNAVAILABLE),
        ..Script::pace(1)
    };
    let endpoint = Endpoint::new(&serve(script).await, None).unwrap();
    let workload = workload(&endpoint, 8, 10).await;
    let level = run_level(&endpoint, &workload, plan(1, 0, 200, 1000))
        .await
        .unwrap();
    assert!(level.errors >= 1);
    assert!(
        level.error_samples[0].starts_with("HTTP 503"),
        "{:?}",
        level.error_samples
    );
}

#[tokio::test]
async fn requests_still_streaming_after_the_drain_cap_are_cut() {
    let endpoint = Endpoint::new(&serve(Script::pace(50)).await, None).unwrap();
    let workload = workload(&endpoint, 8, 100).await;
    let started = tokio::time::Instant::now();
    let level = run_level(&endpoint, &workload, plan(2, 0, 200, 200))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the drain cap must bound the level"
    );
    assert_eq!(level.cut, 2);
    assert_eq!(level.errors, 0);
    // Tokens that arrived in the window still count.
    assert!(level.output_tokens_per_s > 0.0);
}

#[tokio::test]
async fn requests_per_level_bounds_the_window() {
    let endpoint = Endpoint::new(&serve(Script::pace(1)).await, None).unwrap();
    let workload = workload(&endpoint, 8, 5).await;
    let mut bounded = plan(2, 0, 10_000, 1000);
    bounded.max_requests = Some(6);
    let started = tokio::time::Instant::now();
    let level = run_level(&endpoint, &workload, bounded).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(level.requests_completed, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_run_writes_json_and_svg_that_merge_reads_back() {
    let base_url = serve(Script::pace(2)).await;
    let dir = std::env::temp_dir().join(format!("sluice-bench-test-{}", std::process::id()));
    let json_path = dir.join("run.json");
    let args = BenchArgs {
        base_url,
        model: None,
        prompt_tokens: 16,
        output_tokens: 4,
        concurrency: vec![1, 2],
        duration_secs: 0.4,
        warmup_secs: 0.1,
        drain_secs: 1.0,
        requests_per_level: None,
        endpoint: BenchEndpoint::Completions,
        inputs_per_request: 1,
        temperature: 0.0,
        label: "scripted".into(),
        api_key: Some("secret".into()),
        out: Some(json_path.clone()),
        svg: Some(dir.join("run.svg")),
        markdown: None,
        title: None,
        merge: vec![],
    };
    run(args.clone()).await.unwrap();
    let report: BenchReport =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report.model, "scripted");
    assert_eq!(report.levels.len(), 2);
    assert_eq!(report.prompt_tokens_calibrated, Some(16.0));
    assert!(std::fs::read_to_string(dir.join("run.svg"))
        .unwrap()
        .contains("<polyline"));

    let merged = BenchArgs {
        merge: vec![json_path.clone(), json_path],
        svg: Some(dir.join("merged.svg")),
        markdown: Some(dir.join("merged.md")),
        ..args
    };
    run(merged).await.unwrap();
    let markdown = std::fs::read_to_string(dir.join("merged.md")).unwrap();
    assert!(
        markdown.contains("| 1 |") && markdown.contains("| 1.00 |"),
        "{markdown}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
