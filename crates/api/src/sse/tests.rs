//! Stream order and chunk shapes, fed with hand-written engine events.

use futures_util::stream;
use serde_json::Value;
use sluice_engine::FinishReason;

use super::*;
use crate::assemble::tests::{delta, finished, meta, NumberedTokens};
use crate::assemble::LogprobsShape;
use crate::dialect::chat::ChatRenderer;
use crate::dialect::completion::CompletionDialect;
use crate::dialect::turn_parse::{CallIds, TurnDialect};
use crate::dialect::DONE;

fn dialect(shape: LogprobsShape, choices: usize, include_usage: bool) -> Box<dyn Dialect> {
    match shape {
        LogprobsShape::Chat => Box::new(TurnDialect::new(
            ChatRenderer::new(meta(), choices, include_usage, false),
            choices,
            Default::default(),
            CallIds::OpenAi,
        )),
        LogprobsShape::Completion => Box::new(CompletionDialect::new(
            meta(),
            choices,
            include_usage,
            false,
        )),
    }
}

fn run(
    shape: LogprobsShape,
    n: u32,
    include_usage: bool,
    events: Vec<(usize, Event)>,
) -> Vec<String> {
    let num_prompts = events.iter().map(|(p, _)| p + 1).max().unwrap_or(1);
    let assembler = ResponseAssembler::new(shape, num_prompts, n, None, false);
    let spec = StreamSpec {
        dialect: dialect(shape, num_prompts * n as usize, include_usage),
        tokens: Arc::new(NumberedTokens),
        keep_alive: None,
    };
    let chunks = chunk_stream(stream::iter(events), assembler, spec);
    let frames = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(chunks.collect::<Vec<_>>());
    assert!(
        frames.iter().all(|f| f.event.is_none()),
        "OpenAI streams name no events"
    );
    frames.into_iter().map(|f| f.data).collect()
}

fn json(chunks: &[String]) -> Vec<Value> {
    chunks
        .iter()
        .filter(|c| *c != DONE)
        .map(|c| serde_json::from_str(c).unwrap())
        .collect()
}

#[test]
fn chat_stream_has_role_first_then_content_then_one_finish_then_done() {
    let out = run(
        LogprobsShape::Chat,
        1,
        false,
        vec![
            (0, delta(0, "He", &[1])),
            (0, delta(0, "llo", &[2])),
            (0, finished(0, FinishReason::Stop, 3, 2)),
        ],
    );
    assert_eq!(out.last().unwrap(), DONE);
    let chunks = json(&out);
    assert_eq!(chunks.len(), 3);
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        serde_json::json!({"role": "assistant", "content": "He"})
    );
    assert_eq!(
        chunks[1]["choices"][0]["delta"],
        serde_json::json!({"content": "llo"})
    );
    assert_eq!(chunks[2]["choices"][0]["delta"], serde_json::json!({}));
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "stop");
    for c in &chunks[..2] {
        assert!(c["choices"][0]["finish_reason"].is_null());
    }
    for c in &chunks {
        assert_eq!(c["id"], "id-1");
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["system_fingerprint"], "fp");
        assert!(c.get("usage").is_none());
    }
}

#[test]
fn n_choices_interleave_and_each_finishes_exactly_once_last() {
    let out = run(
        LogprobsShape::Chat,
        3,
        false,
        vec![
            (0, delta(0, "a", &[1])),
            (0, delta(1, "b", &[1])),
            (0, delta(2, "c", &[1])),
            (0, delta(0, "d", &[1])),
            (0, finished(1, FinishReason::Length, 3, 1)),
            (0, finished(0, FinishReason::Stop, 3, 2)),
            (0, delta(2, "e", &[1])),
            (0, finished(2, FinishReason::Stop, 3, 2)),
        ],
    );
    let chunks = json(&out);
    for index in 0..3 {
        let mine: Vec<&Value> = chunks
            .iter()
            .filter(|c| c["choices"][0]["index"] == index)
            .collect();
        assert!(mine[0]["choices"][0]["delta"]["role"] == "assistant");
        assert!(mine[1..]
            .iter()
            .all(|c| c["choices"][0]["delta"].get("role").is_none()));
        let finishes = mine
            .iter()
            .filter(|c| !c["choices"][0]["finish_reason"].is_null())
            .count();
        assert_eq!(finishes, 1);
        assert!(!mine.last().unwrap()["choices"][0]["finish_reason"].is_null());
    }
    assert_eq!(out.last().unwrap(), DONE);
}

#[test]
fn usage_chunk_has_empty_choices_and_comes_just_before_done() {
    let out = run(
        LogprobsShape::Chat,
        1,
        true,
        vec![
            (0, delta(0, "a", &[1, 2])),
            (0, finished(0, FinishReason::Length, 5, 2)),
        ],
    );
    assert_eq!(out.last().unwrap(), DONE);
    let usage_chunk: Value = serde_json::from_str(&out[out.len() - 2]).unwrap();
    assert_eq!(usage_chunk["choices"], serde_json::json!([]));
    assert_eq!(usage_chunk["usage"]["prompt_tokens"], 5);
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 2);
    assert_eq!(usage_chunk["usage"]["total_tokens"], 7);
}

#[test]
fn engine_error_mid_stream_becomes_an_error_event_then_done() {
    let mut failed = finished(0, FinishReason::Error, 3, 1);
    if let Event::Finished { error, .. } = &mut failed {
        *error = Some("out of memory".into());
    }
    let out = run(
        LogprobsShape::Chat,
        1,
        true,
        vec![(0, delta(0, "a", &[1])), (0, failed)],
    );
    assert_eq!(out.len(), 3);
    let err: Value = serde_json::from_str(&out[1]).unwrap();
    assert_eq!(err["error"]["message"], "out of memory");
    assert_eq!(out[2], DONE);
}

#[test]
fn engine_stream_ending_early_is_reported_as_an_error() {
    let out = run(
        LogprobsShape::Completion,
        2,
        false,
        vec![
            (0, delta(0, "a", &[1])),
            (0, finished(0, FinishReason::Stop, 3, 1)),
        ],
    );
    let err: Value = serde_json::from_str(&out[out.len() - 2]).unwrap();
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("engine stopped"));
    assert_eq!(out.last().unwrap(), DONE);
}

#[test]
fn completion_chunks_have_text_and_null_finish_until_the_end() {
    let out = run(
        LogprobsShape::Completion,
        1,
        false,
        vec![
            (0, delta(0, "x", &[1])),
            (1, delta(0, "y", &[1])),
            (1, finished(0, FinishReason::Stop, 2, 1)),
            (0, finished(0, FinishReason::Length, 2, 1)),
        ],
    );
    let chunks = json(&out);
    assert_eq!(chunks[0]["object"], "text_completion");
    assert_eq!(chunks[0]["choices"][0]["text"], "x");
    assert!(chunks[0]["choices"][0]["finish_reason"].is_null());
    assert_eq!(chunks[1]["choices"][0]["index"], 1);
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[3]["choices"][0]["index"], 0);
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "length");
}

#[test]
fn stream_text_equals_collected_text() {
    let events = vec![
        (0, delta(0, "Hel", &[1])),
        (0, delta(0, "", &[2])),
        (0, delta(0, "lo", &[3])),
        (0, finished(0, FinishReason::Stop, 3, 3)),
    ];
    let streamed: String = json(&run(LogprobsShape::Chat, 1, false, events.clone()))
        .iter()
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let mut d = dialect(LogprobsShape::Chat, 1, false);
    for (p, e) in events {
        for u in a.apply(p, e, &NumberedTokens).unwrap() {
            d.update(u);
        }
    }
    let ending = crate::dialect::Ending {
        usage: a.usage(),
        assembler: &a,
        tokens: &NumberedTokens,
    };
    let body: Value = serde_json::from_str(&d.body(ending)).unwrap();
    assert_eq!(streamed, body["choices"][0]["message"]["content"]);
}

/// Frames of a Messages stream whose engine events each come `gap` after the one before,
/// with keep-alives every `every`.
fn slow_messages_stream(
    events: Vec<(usize, Event)>,
    gap: std::time::Duration,
    every: std::time::Duration,
) -> Vec<Frame> {
    use crate::dialect::messages::MessagesRenderer;
    let assembler = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let spec = StreamSpec {
        dialect: Box::new(TurnDialect::new(
            MessagesRenderer::new(meta(), 3),
            1,
            Default::default(),
            CallIds::OpenAi,
        )),
        tokens: Arc::new(NumberedTokens),
        keep_alive: Some(every),
    };
    let slow = Box::pin(stream::iter(events).then(move |e| async move {
        tokio::time::sleep(gap).await;
        e
    }));
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(chunk_stream(slow, assembler, spec).collect::<Vec<_>>())
}

#[test]
fn a_quiet_messages_stream_pings_until_its_first_content_block() {
    // Queued for a while, then scheduled with 2 of its 3 prompt tokens cached, then a long
    // prefill before the first token.
    let every = std::time::Duration::from_millis(20);
    let mut finished = finished(0, FinishReason::Stop, 3, 2);
    if let Event::Finished { usage, .. } = &mut finished {
        usage.cached_prompt_tokens = 2;
    }
    let frames = slow_messages_stream(
        vec![
            (
                0,
                Event::Scheduled {
                    choice: 0,
                    cached_prompt_tokens: 2,
                },
            ),
            (0, delta(0, "a", &[1])),
            (0, delta(0, "b", &[1])),
            (0, finished),
        ],
        every * 6,
        every,
    );
    let names: Vec<&str> = frames.iter().map(|f| f.event.unwrap()).collect();
    let first_block = names
        .iter()
        .position(|n| *n == "content_block_start")
        .unwrap();
    let start = names.iter().position(|n| *n == "message_start").unwrap();
    let pings = names.iter().filter(|n| **n == "ping").count();
    assert!(
        pings >= 4,
        "queueing and a prefill of 6 intervals each ping: {names:?}"
    );
    assert!(names[..start].iter().all(|n| *n == "ping"), "{names:?}");
    assert!(start > 0 && start < first_block, "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "message_start").count(), 1);
    assert!(
        names[first_block..].iter().all(|n| *n != "ping"),
        "no ping once content flows: {names:?}"
    );
    let ping = frames.iter().find(|f| f.event == Some("ping")).unwrap();
    assert_eq!(ping.data, r#"{"type":"ping"}"#);
    // message_start splits the prompt as message_delta does.
    let usage = |name: &str| -> Value {
        let frame = frames.iter().find(|f| f.event == Some(name)).unwrap();
        let data: Value = serde_json::from_str(&frame.data).unwrap();
        match name {
            "message_start" => data["message"]["usage"].clone(),
            _ => data["usage"].clone(),
        }
    };
    let (start, end) = (usage("message_start"), usage("message_delta"));
    for key in ["input_tokens", "cache_read_input_tokens"] {
        assert_eq!(start[key], end[key], "{key}: {start} vs {end}");
    }
    assert_eq!(start["input_tokens"], 1);
    assert_eq!(start["cache_read_input_tokens"], 2);
}

#[test]
fn a_prompt_answered_within_the_interval_sends_no_keep_alive() {
    let frames = slow_messages_stream(
        vec![
            (0, delta(0, "a", &[1])),
            (0, finished(0, FinishReason::Stop, 3, 1)),
        ],
        std::time::Duration::ZERO,
        std::time::Duration::from_secs(5),
    );
    assert!(frames.iter().all(|f| f.event != Some("ping")));
}
