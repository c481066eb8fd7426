//! The adapter over a real parser and the chat renderer: text split at every point streams to
//! the one body; markup never reaches content; `parallel_tool_calls: false` keeps one call.

use serde_json::Value;
use sluice_text::assistant::{ReasoningSyntax, ToolCallFormat, TurnOptions};

use super::*;
use crate::assemble::tests::{meta, NumberedTokens};
use crate::assemble::{ResponseAssembler, TokenTexts};
use crate::dialect::chat::ChatRenderer;

const OUTPUT: &str = "<think>\nweather needs a tool\n</think>\n\nChecking.\n<tool_call>\n\
{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n\
{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

fn options() -> TurnOptions {
    TurnOptions {
        tool_format: Some(ToolCallFormat::Hermes),
        reasoning: Some(ReasoningSyntax::think_tags()),
        ..TurnOptions::default()
    }
}

/// The chunks and the body of `pieces` sent as one choice's deltas.
fn run(pieces: &[&str], single_call: bool) -> (Vec<Value>, Value) {
    let make = || {
        TurnDialect::new(
            ChatRenderer::new(meta(), 1, false, false),
            1,
            options(),
            CallIds::OpenAi,
        )
        .single_call(single_call)
    };
    let (mut streamed, mut collected) = (make(), make());
    let tokens: &dyn TokenTexts = &NumberedTokens;
    let mut chunks = Vec::new();
    let updates = pieces
        .iter()
        .enumerate()
        .map(|(i, text)| ChoiceUpdate::Delta {
            index: 0,
            first: i == 0,
            text: text.to_string(),
            logprobs: None,
            tokens: 1,
        });
    for update in updates.chain([ChoiceUpdate::Finish {
        index: 0,
        reason: "stop",
        stop_string: None,
        tokens: 0,
    }]) {
        for frame in streamed.update(update.clone()) {
            chunks.push(serde_json::from_str(&frame.data).unwrap());
        }
        collected.update(update);
    }
    let assembler = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let ending = Ending {
        usage: assembler.usage(),
        assembler: &assembler,
        tokens,
    };
    let body = Box::new(collected).body(ending);
    (chunks, serde_json::from_str(&body).unwrap())
}

type Calls = Vec<(String, String, String)>;

/// Folds chat chunks into (content, reasoning, [(id, name, arguments)], finish_reason).
fn fold(chunks: &[Value]) -> (String, String, Calls, String) {
    let (mut content, mut reasoning, mut calls, mut finish) =
        (String::new(), String::new(), Calls::new(), String::new());
    for chunk in chunks {
        let choice = &chunk["choices"][0];
        content += choice["delta"]["content"].as_str().unwrap_or("");
        reasoning += choice["delta"]["reasoning_content"].as_str().unwrap_or("");
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = call["index"].as_u64().unwrap() as usize;
            if i == calls.len() {
                calls.push(Default::default());
            }
            let entry = &mut calls[i];
            entry.0 += call["id"].as_str().unwrap_or("");
            entry.1 += call["function"]["name"].as_str().unwrap_or("");
            entry.2 += call["function"]["arguments"].as_str().unwrap_or("");
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (content, reasoning, calls, finish)
}

#[test]
fn every_split_streams_to_the_one_body_and_no_markup_leaks() {
    let chars: Vec<usize> = OUTPUT.char_indices().map(|(i, _)| i).collect();
    for &cut in &chars {
        let (chunks, body) = run(&[&OUTPUT[..cut], &OUTPUT[cut..]], false);
        let (content, reasoning, calls, finish) = fold(&chunks);
        let message = &body["choices"][0]["message"];
        assert_eq!(
            content,
            message["content"].as_str().unwrap_or(""),
            "cut {cut}"
        );
        assert_eq!(
            reasoning,
            message["reasoning_content"].as_str().unwrap(),
            "cut {cut}"
        );
        assert_eq!(finish, "tool_calls");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        let body_calls: Calls = (message["tool_calls"].as_array())
            .unwrap()
            .iter()
            .map(|c| {
                let text = |v: &Value| v.as_str().unwrap().to_string();
                (
                    text(&c["id"]),
                    text(&c["function"]["name"]),
                    text(&c["function"]["arguments"]),
                )
            })
            .collect();
        assert_eq!(calls.len(), 2, "cut {cut}");
        // Ids are drawn per response; names and arguments are the same.
        for (s, b) in calls.iter().zip(&body_calls) {
            assert!(s.0.starts_with("call_") && b.0.starts_with("call_"));
            assert_eq!((&s.1, &s.2), (&b.1, &b.2), "cut {cut}");
        }
        assert!(!content.contains('<'), "markup leaked into {content:?}");
    }
}

#[test]
fn one_call_is_kept_without_parallel_tool_calls() {
    let (chunks, body) = run(&[OUTPUT], true);
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(fold(&chunks).2.len(), 1);
}

/// Records the reasoning tokens a turn finished with.
struct ReasoningRecorder(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl TurnRenderer for ReasoningRecorder {
    fn update(&mut self, update: TurnUpdate) -> Vec<Frame> {
        if let TurnUpdate::Finish {
            reasoning_tokens, ..
        } = update
        {
            (self.0).store(reasoning_tokens, std::sync::atomic::Ordering::Relaxed);
        }
        Vec::new()
    }

    fn close(&mut self, _: Ending<'_>) -> Vec<Frame> {
        Vec::new()
    }

    fn body(self: Box<Self>, _: Ending<'_>) -> String {
        String::new()
    }
}

/// The reasoning tokens of deltas `(text, tokens)` followed by a finish with `last` tokens.
fn reasoning_tokens(deltas: &[(&str, u32)], last: u32, options: TurnOptions) -> u32 {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(u32::MAX));
    let recorder = ReasoningRecorder(count.clone());
    let mut dialect = TurnDialect::new(recorder, 1, options, CallIds::OpenAi);
    for (i, (text, tokens)) in deltas.iter().enumerate() {
        dialect.update(ChoiceUpdate::Delta {
            index: 0,
            first: i == 0,
            text: text.to_string(),
            logprobs: None,
            tokens: *tokens,
        });
    }
    dialect.update(ChoiceUpdate::Finish {
        index: 0,
        reason: "stop",
        stop_string: None,
        tokens: last,
    });
    count.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn reasoning_tokens_are_those_before_the_answer() {
    // The opening marker counts with the reasoning it opens, the closing one with the answer;
    // a delta of two tokens counts two.
    let thought = [("<think>", 1), ("Let", 1), (" me see", 2), ("</think>", 1)];
    let answered = [&thought[..], &[("\n\nYes", 1), (".", 1)]].concat();
    assert_eq!(reasoning_tokens(&answered, 0, options()), 4);
    // A marker split over tokens (held back, then released) is placed with what follows.
    let split = [
        ("<th", 1),
        ("ink>", 1),
        ("Hm", 1),
        ("</th", 1),
        ("ink>", 1),
        ("No", 1),
    ];
    assert_eq!(reasoning_tokens(&split, 0, options()), 3);
    // Never closed: every token reasoned, the finish's own (cut by a stop string) included.
    assert_eq!(reasoning_tokens(&thought[..3], 2, options()), 6);
    // Without a reasoning syntax, or a turn that answers at once: none.
    let plain = TurnOptions::default();
    assert_eq!(reasoning_tokens(&answered, 0, plain), 0);
    assert_eq!(reasoning_tokens(&[("Yes", 1), (".", 1)], 3, options()), 0);
}
