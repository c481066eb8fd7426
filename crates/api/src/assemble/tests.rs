//! The assembler's invariants and shapes.

use std::time::Duration;

use super::*;
use crate::dialect::chat::ChatRenderer;
use crate::dialect::completion::CompletionDialect;
use crate::dialect::turn_parse::{CallIds, TurnDialect};

/// Token `i` reads as `t{i}`.
pub(crate) struct NumberedTokens;

impl TokenTexts for NumberedTokens {
    fn token_text(&self, id: u32) -> String {
        format!("t{id}")
    }
}

pub(crate) fn delta(choice: u32, text: &str, ids: &[u32]) -> Event {
    Event::Delta {
        choice,
        text: text.into(),
        token_ids: ids.to_vec(),
        logprobs: Vec::new(),
    }
}

pub(crate) fn finished(choice: u32, reason: FinishReason, prompt: u32, completion: u32) -> Event {
    Event::Finished {
        choice,
        reason,
        error: None,
        stop_string: None,
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_prompt_tokens: 0,
        },
        queue_time: Duration::ZERO,
    }
}

pub(crate) fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "id-1".into(),
        created: 7,
        model: "m".into(),
        system_fingerprint: "fp".into(),
    }
}

#[test]
fn first_delta_of_a_choice_is_marked_first_and_later_ones_are_not() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let u = a.apply(0, delta(0, "He", &[1]), &NumberedTokens).unwrap();
    assert!(matches!(&u[..], [ChoiceUpdate::Delta { first: true, .. }]));
    let u = a.apply(0, delta(0, "llo", &[2]), &NumberedTokens).unwrap();
    assert!(matches!(&u[..], [ChoiceUpdate::Delta { first: false, .. }]));
}

#[test]
fn empty_later_deltas_without_logprobs_produce_nothing() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    a.apply(0, delta(0, "a", &[1]), &NumberedTokens).unwrap();
    assert!(a
        .apply(0, delta(0, "", &[2]), &NumberedTokens)
        .unwrap()
        .is_empty());
}

#[test]
fn tokens_whose_text_is_held_back_are_counted_with_the_next_update() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let tokens_of = |u: &[ChoiceUpdate]| match u {
        [ChoiceUpdate::Delta { tokens, .. }] | [ChoiceUpdate::Finish { tokens, .. }] => *tokens,
        _ => panic!("one update: {u:?}"),
    };
    let u = a.apply(0, delta(0, "a", &[1]), &NumberedTokens).unwrap();
    assert_eq!(tokens_of(&u), 1);
    // Two tokens release nothing (a held-back stop prefix), the third releases their text.
    assert!(a
        .apply(0, delta(0, "", &[2]), &NumberedTokens)
        .unwrap()
        .is_empty());
    assert!(a
        .apply(0, delta(0, "", &[3]), &NumberedTokens)
        .unwrap()
        .is_empty());
    let u = a.apply(0, delta(0, "bcd", &[4]), &NumberedTokens).unwrap();
    assert_eq!(tokens_of(&u), 3);
    // The finish carries what the engine counted past the last update (text a stop cut off).
    let u = a
        .apply(0, finished(0, FinishReason::Stop, 3, 6), &NumberedTokens)
        .unwrap();
    assert_eq!(tokens_of(&u), 2);
}

#[test]
fn finish_without_any_delta_still_starts_the_choice_first() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let u = a
        .apply(0, finished(0, FinishReason::Stop, 3, 0), &NumberedTokens)
        .unwrap();
    assert_eq!(
        u,
        vec![
            ChoiceUpdate::Delta {
                index: 0,
                first: true,
                text: String::new(),
                logprobs: None,
                tokens: 0,
            },
            ChoiceUpdate::Finish {
                index: 0,
                reason: "stop",
                stop_string: None,
                tokens: 0,
            },
        ]
    );
    assert!(a.is_complete());
}

#[test]
fn events_after_a_finish_are_an_error() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    a.apply(0, finished(0, FinishReason::Length, 3, 1), &NumberedTokens)
        .unwrap();
    assert!(a.apply(0, delta(0, "x", &[1]), &NumberedTokens).is_err());
    assert!(a
        .apply(0, finished(0, FinishReason::Stop, 3, 1), &NumberedTokens)
        .is_err());
}

#[test]
fn choice_outside_n_is_an_error() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 2, None, false);
    assert!(a.apply(0, delta(2, "x", &[1]), &NumberedTokens).is_err());
    assert!(a.apply(1, delta(0, "x", &[1]), &NumberedTokens).is_err());
}

#[test]
fn engine_error_and_cancellation_become_api_errors() {
    let mut a = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let mut failed = finished(0, FinishReason::Error, 3, 0);
    if let Event::Finished { error, .. } = &mut failed {
        *error = Some("kernel exploded".into());
    }
    assert_eq!(
        a.apply(0, failed, &NumberedTokens),
        Err(ApiError::Internal("kernel exploded".into()))
    );
    let mut b = ResponseAssembler::new(LogprobsShape::Chat, 1, 1, None, false);
    let err = b
        .apply(
            0,
            finished(0, FinishReason::Cancelled, 3, 0),
            &NumberedTokens,
        )
        .unwrap_err();
    assert_eq!(err.status().as_u16(), 503);
}

#[test]
fn multiple_prompts_index_choices_by_prompt_times_n_plus_choice() {
    let mut a = ResponseAssembler::new(LogprobsShape::Completion, 2, 3, None, false);
    let u = a.apply(1, delta(2, "x", &[1]), &NumberedTokens).unwrap();
    assert!(matches!(&u[..], [ChoiceUpdate::Delta { index: 5, .. }]));
    assert_eq!(a.num_choices(), 6);
}

#[test]
fn usage_counts_prompts_once_and_sums_completions() {
    let mut a = ResponseAssembler::new(LogprobsShape::Completion, 2, 2, None, false);
    for (p, prompt_len) in [(0, 4), (1, 6)] {
        for c in 0..2 {
            a.apply(p, delta(c, "ab", &[1, 2]), &NumberedTokens)
                .unwrap();
            a.apply(
                p,
                finished(c, FinishReason::Length, prompt_len, 2 + c),
                &NumberedTokens,
            )
            .unwrap();
        }
    }
    assert!(a.is_complete());
    let usage = a.usage();
    assert_eq!(usage.prompt_tokens, 10);
    assert_eq!(usage.completion_tokens, 2 + 3 + 2 + 3);
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );
}

#[test]
fn echo_puts_the_prompt_in_front_of_each_choice_once() {
    let a = ResponseAssembler::new(
        LogprobsShape::Completion,
        1,
        2,
        Some(vec!["Q: ".into()]),
        false,
    );
    let dialect = CompletionDialect::new(meta(), 2, false, false);
    let events = vec![
        delta(0, "a", &[1]),
        delta(0, "b", &[2]),
        finished(0, FinishReason::Stop, 2, 2),
        finished(1, FinishReason::Stop, 2, 0),
    ];
    let body = body_of(a, Box::new(dialect), events);
    assert_eq!(body["choices"][0]["text"], "Q: ab");
    assert_eq!(body["choices"][1]["text"], "Q: ");
}

#[test]
fn chat_logprobs_carry_token_bytes_and_alternatives() {
    let lp = TokenLogprob {
        token_id: 3,
        logprob: -0.25,
        top: vec![(3, -0.25), (4, -2.0)],
    };
    let out = chat_logprobs(&[lp], &NumberedTokens);
    assert_eq!(out.content[0].token, "t3");
    assert_eq!(out.content[0].bytes, b"t3".to_vec());
    assert_eq!(out.content[0].top_logprobs.len(), 2);
    assert_eq!(out.content[0].top_logprobs[1].token, "t4");
    assert_eq!(out.content[0].top_logprobs[1].logprob, -2.0);
}

#[test]
fn completion_logprobs_offsets_run_over_token_texts_across_deltas() {
    let a = ResponseAssembler::new(LogprobsShape::Completion, 1, 1, None, true);
    let lp = |id| TokenLogprob {
        token_id: id,
        logprob: -1.0,
        top: vec![(id, -1.0)],
    };
    let d1 = Event::Delta {
        choice: 0,
        text: "t1t22".into(),
        token_ids: vec![1, 22],
        logprobs: vec![lp(1), lp(22)],
    };
    let d2 = Event::Delta {
        choice: 0,
        text: "t3".into(),
        token_ids: vec![3],
        logprobs: vec![lp(3)],
    };
    let events = vec![d1, d2, finished(0, FinishReason::Length, 1, 3)];
    let body = body_of(
        a,
        Box::new(CompletionDialect::new(meta(), 1, false, true)),
        events,
    );
    let lp: CompletionLogprobs =
        serde_json::from_value(body["choices"][0]["logprobs"].clone()).unwrap();
    assert_eq!(lp.tokens, vec!["t1", "t22", "t3"]);
    assert_eq!(lp.text_offset, vec![0, 2, 5]);
    assert_eq!(lp.token_logprobs, vec![Some(-1.0); 3]);
    assert_eq!(lp.top_logprobs[2].as_ref().unwrap()["t3"], -1.0);
}

#[test]
fn non_stream_chat_body_joins_text_and_reports_finish_reasons() {
    let a = ResponseAssembler::new(LogprobsShape::Chat, 1, 2, None, false);
    let events = vec![
        delta(1, "x", &[5]),
        delta(0, "He", &[1]),
        delta(0, "llo", &[2]),
        finished(0, FinishReason::Stop, 4, 2),
        finished(1, FinishReason::Length, 4, 1),
    ];
    let body = body_of(
        a,
        Box::new(TurnDialect::new(
            ChatRenderer::new(meta(), 2, false, false),
            2,
            Default::default(),
            CallIds::OpenAi,
        )),
        events,
    );
    let body: crate::wire::chat::ChatCompletion = serde_json::from_value(body).unwrap();
    assert_eq!(body.object, "chat.completion");
    assert_eq!(body.choices[0].message.content.as_deref(), Some("Hello"));
    assert_eq!(body.choices[0].finish_reason, "stop");
    assert_eq!(body.choices[1].message.content.as_deref(), Some("x"));
    assert_eq!(body.choices[1].finish_reason, "length");
    assert!(body.choices[0].logprobs.is_none());
    assert_eq!(body.usage.prompt_tokens, 4);
    assert_eq!(body.usage.completion_tokens, 3);
    assert_eq!(body.system_fingerprint, "fp");
}

/// Folds `events` (all of prompt 0) through the assembler and `dialect`; the one body.
fn body_of(
    mut a: ResponseAssembler,
    mut dialect: Box<dyn crate::dialect::Dialect>,
    events: Vec<Event>,
) -> serde_json::Value {
    for e in events {
        for u in a.apply(0, e, &NumberedTokens).unwrap() {
            dialect.update(u);
        }
    }
    let body = dialect.body(crate::dialect::Ending {
        usage: a.usage(),
        assembler: &a,
        tokens: &NumberedTokens,
    });
    serde_json::from_str(&body).unwrap()
}
