//! Keep-alive events while a slow engine has nothing to say: Claude Code gives up on a
//! Messages stream with no event for 300 s (SSE comments do not count), which a long prompt's
//! prefill can take on a CPU. Messages streams send `ping`, Responses streams repeat
//! `response.in_progress`, every interval until the first content.

use std::time::Duration;

use serde_json::{json, Value};

use crate::server::{post_stream, start, ServerOptions, MODEL_ID};

/// Each forward pass this long, keep-alives four times as often: the first step alone (the
/// prefill) leaves room for several.
const STEP: Duration = Duration::from_millis(400);
const EVERY: Duration = Duration::from_millis(100);

/// The `(event, data)` pairs of an SSE body, comments left out.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|event| {
            let field = |name: &str| {
                event
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            let data = field("data:")?;
            Some((
                field("event:").unwrap_or("").to_string(),
                serde_json::from_str(data).unwrap(),
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_streams_send_keep_alive_events_until_their_first_content() {
    let server = start(ServerOptions {
        step_delay: STEP,
        stream_keep_alive: EVERY,
        ..ServerOptions::default()
    })
    .await;

    let body = json!({"model": MODEL_ID, "max_tokens": 3, "seed": 1,
        "messages": [{"role": "user", "content": "hi"}]});
    let text = post_stream(&server.base, "/v1/messages", &body).await;
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start", "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"), "{names:?}");
    let first_block = names
        .iter()
        .position(|n| *n == "content_block_start")
        .expect("a text block");
    let pings: Vec<&Value> = events[..first_block]
        .iter()
        .filter(|(n, _)| n == "ping")
        .map(|(_, d)| d)
        .collect();
    assert!(
        pings.len() >= 2,
        "pings while the prompt prefills: {names:?}"
    );
    assert!(pings.iter().all(|d| **d == json!({"type": "ping"})));
    assert!(
        !names[first_block..].contains(&"ping"),
        "no ping once content flows: {names:?}"
    );

    let body = json!({"model": MODEL_ID, "max_output_tokens": 3, "seed": 1, "input": "hi"});
    let text = post_stream(&server.base, "/v1/responses", &body).await;
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let first_item = names
        .iter()
        .position(|n| *n == "response.output_item.added")
        .expect("an output item");
    let in_progress = names[..first_item]
        .iter()
        .filter(|n| **n == "response.in_progress")
        .count();
    assert!(
        in_progress >= 3,
        "one on opening, more while the prompt prefills: {names:?}"
    );
    assert!(!names[first_item..].contains(&"response.in_progress"));
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], i, "{name}");
        if name == "response.in_progress" {
            assert_eq!(data["response"]["status"], "in_progress");
        }
    }
}
