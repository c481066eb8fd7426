//! A model whose chat template is hostile (issue 30): its requests are a 400 naming the render
//! budget's limit, quickly, and requests for another model are answered meanwhile, though the
//! hostile renders share the server's tokenizing slots with them.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_text::{RenderLimits, Tokenizer};

use crate::server::{model_dir, post_json, start, ServerOptions, MODEL_ID};

/// Two nested `range(100000)` loops: 10^10 iterations.
const NESTED_LOOPS: &str =
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";

/// `ns.s ~ ns.s` 64 times: 2^64 bytes.
const STRING_DOUBLING: &str = "{% set ns = namespace(s='x') %}{% for i in range(64) %}\
{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";

/// The fixture model's tokenizer with `chat_template` as its template.
fn tokenizer_with_template(chat_template: &str) -> Arc<Tokenizer> {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".json") && name != "reference.json" {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    std::fs::write(
        Path::new(dir.path()).join("chat_template.jinja"),
        chat_template,
    )
    .unwrap();
    let tokenizer = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(
        tokenizer.chat_template().map(|t| t.source()),
        Some(chat_template)
    );
    Arc::new(tokenizer)
}

fn chat(model: &str) -> serde_json::Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": 3,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_chat_template_is_a_400_naming_the_limit_and_stalls_no_other_model() {
    let server = start(ServerOptions {
        extra_models: vec![
            ("loops".to_string(), tokenizer_with_template(NESTED_LOOPS)),
            (
                "doubling".to_string(),
                tokenizer_with_template(STRING_DOUBLING),
            ),
        ],
        ..ServerOptions::default()
    })
    .await;
    let limits = RenderLimits::default();
    // Two hostile requests for each template: four, on a server with two tokenizing slots.
    let started = Instant::now();
    let hostile: Vec<_> = ["loops", "doubling", "loops", "doubling"]
        .into_iter()
        .map(|model| {
            let base = server.base.clone();
            tokio::spawn(async move {
                let answer = post_json(&base, "/v1/chat/completions", chat(model)).await;
                (model, answer, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;

    let victim_started = Instant::now();
    let (status, body) = post_json(&server.base, "/v1/chat/completions", chat(MODEL_ID)).await;
    let victim_took = victim_started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(
        body["choices"][0]["message"]["content"].is_string(),
        "{body}"
    );

    for task in hostile {
        let (model, (status, body), took) = task.await.unwrap();
        assert_eq!(status, 400, "{model}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        let limit = match model {
            "loops" => format!("exceeded its budget of {} instructions", limits.fuel),
            _ => format!(
                "built a string over its limit of {} bytes",
                limits.max_bytes
            ),
        };
        assert!(message.contains(&limit), "{model}: {message}");
        assert!(took < Duration::from_secs(30), "{model} took {took:?}");
    }
    // The victim waited at most for the hostile renders ahead of it, each within its budget.
    assert!(victim_took < Duration::from_secs(30), "{victim_took:?}");
    eprintln!("victim answered in {victim_took:?}");
}
