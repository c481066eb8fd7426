//! Tools a local server cannot offer the model (hosted tools such as `web_search`, Codex's
//! `namespace` tools, Anthropic's server tools) are skipped without failing the request,
//! and the real binary logs which ones, so an operator sees why a client's tool is never called.

use std::time::Duration;

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::spawn_serve_listening;

const MODEL: &str = "fixtures/models/llama";
const WAIT: Duration = Duration::from_secs(60);

async fn post(base: &str, path: &str, body: Value) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_tools_are_named_in_the_log_and_the_request_still_answers() {
    let (mut child, base, logs) = spawn_serve_listening(&["--model", MODEL]);
    logs.wait_for("model ready", WAIT);
    let function = json!({"type": "function", "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}});
    let status = post(
        &base,
        "/v1/responses",
        json!({"input": "hi", "max_output_tokens": 2, "tools": [
            function,
            {"type": "web_search_preview"},
            {"type": "namespace", "name": "multi_agent_v1", "tools": [function.clone()]},
            {"type": "custom", "name": "apply_patch",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"x\""}}]}),
    )
    .await;
    assert_eq!(status, 200);
    let line = logs.wait_for("skipping tools", WAIT);
    assert!(
        line.contains("responses")
            && line.contains("multi_agent_v1 (namespace)")
            && line.contains("web_search_preview")
            // Custom tools reach the model (as functions of one string).
            && !line.contains("apply_patch"),
        "{line}"
    );
    let status = post(
        &base,
        "/v1/messages",
        json!({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],
               "tools": [{"type": "bash_20250124", "name": "bash"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let line = logs.wait_for("skipping tools", WAIT);
    assert!(
        line.contains("messages") && line.contains("bash (bash_20250124)"),
        "{line}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
