//! Anthropic Messages as Claude Code reads them: thinking blocks only when the request turns
//! thinking on (no `thinking` is Anthropic's default: off), and `message_start` splits the
//! prompt into cached and uncached tokens exactly as `message_delta` does, on a prefix-cache
//! miss and on a hit.

use serde_json::{json, Value};

use crate::agents::named_events;
use crate::server::{fixture, post_json, post_stream, start, MODEL_ID};

fn ask(thinking: Option<Value>) -> Value {
    // Token 203 is a newline, which this random model otherwise repeats.
    let mut body = json!({"model": MODEL_ID, "seed": 9, "max_tokens": 12,
        "logit_bias": {"203": -100},
        "messages": [{"role": "user", "content": "Think first, then answer at some length."}]});
    if let Some(t) = thinking {
        body["thinking"] = t;
    }
    body
}

fn kinds(answer: &Value) -> Vec<String> {
    let blocks = answer["content"].as_array().unwrap();
    blocks
        .iter()
        .map(|b| b["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn thinking_blocks_only_when_thinking_is_on() {
    let server = start(fixture("llama-think")).await;
    let on = json!({"type": "enabled", "budget_tokens": 1024});
    let (status, thinking) = post_json(&server.base, "/v1/messages", ask(Some(on.clone()))).await;
    assert_eq!(status, 200, "{thinking}");
    assert_eq!(kinds(&thinking), ["thinking"], "{thinking}");
    for off in [None, Some(json!({"type": "disabled"}))] {
        let (status, plain) = post_json(&server.base, "/v1/messages", ask(off.clone())).await;
        assert_eq!(status, 200, "{plain}");
        assert!(
            !kinds(&plain).contains(&"thinking".to_string()),
            "{off:?}: {plain}"
        );
        let mut streamed = ask(off.clone());
        streamed["stream"] = json!(true);
        let events = named_events(&post_stream(&server.base, "/v1/messages", &streamed).await);
        assert!(
            events
                .iter()
                .all(|(_, d)| d["delta"]["type"] != "thinking_delta"
                    && d["content_block"]["type"] != "thinking"),
            "{off:?}: {events:?}"
        );
    }
}

#[tokio::test]
async fn message_start_splits_cached_tokens_as_message_delta_does() {
    let server = start(fixture("llama-think")).await;
    let mut body = ask(None);
    body["stream"] = json!(true);
    body["max_tokens"] = json!(4);
    // A long system prompt fills whole blocks that the second request finds cached.
    body["system"] = json!("You are a careful assistant. ".repeat(30));
    let mut cached = Vec::new();
    for _ in 0..2 {
        let events = named_events(&post_stream(&server.base, "/v1/messages", &body).await);
        let start = &events.iter().find(|(n, _)| n == "message_start").unwrap().1;
        let delta = &events.iter().find(|(n, _)| n == "message_delta").unwrap().1;
        let (start, delta) = (&start["message"]["usage"], &delta["usage"]);
        assert_eq!(
            start["input_tokens"], delta["input_tokens"],
            "{start} vs {delta}"
        );
        assert_eq!(
            start["cache_read_input_tokens"], delta["cache_read_input_tokens"],
            "{start} vs {delta}"
        );
        cached.push(start["cache_read_input_tokens"].as_u64().unwrap());
    }
    assert_eq!(cached[0], 0, "a cold cache");
    assert!(
        cached[1] > 0,
        "the second request reads the first one's blocks: {cached:?}"
    );
}
