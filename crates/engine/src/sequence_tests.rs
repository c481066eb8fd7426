use super::*;
use crate::request::FinishReason;

fn sequence(stop: StopRules, eos: &[u32]) -> Sequence {
    sequence_with(stop, eos, None)
}

fn sequence_with(stop: StopRules, eos: &[u32], constraint: Option<OutputConstraint>) -> Sequence {
    Sequence::new(SequenceSpec {
        id: 0,
        request_id: 0,
        choice: 0,
        priority: Priority::Normal,
        arrival: Instant::now(),
        prompt: vec![1, 2, 3],
        sampling: Arc::new(SamplingParams::default()),
        stop: Arc::new(stop),
        eos_token_ids: Arc::from(eos.to_vec()),
        text: None,
        constraint,
        cache_salt: None,
    })
}

fn push(seq: &mut Sequence, token: u32) -> Option<(FinishReason, Option<String>)> {
    let sample = Sample {
        token_id: token,
        logprob: None,
    };
    let ending = seq.append_tokens(vec![sample], 100, Instant::now()).ending;
    ending.map(|e| (e.reason(), e.message()))
}

#[test]
fn eos_stops_and_is_counted_as_an_output_token() {
    let mut seq = sequence(StopRules::default(), &[0]);
    assert_eq!(push(&mut seq, 5), None);
    assert_eq!(push(&mut seq, 0), Some((FinishReason::Stop, None)));
    assert_eq!(seq.output(), &[5, 0]);
}

#[test]
fn eos_is_ignored_before_min_tokens_and_with_ignore_eos() {
    let rules = StopRules {
        min_tokens: 2,
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[0]);
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(push(&mut seq, 0), Some((FinishReason::Stop, None)));
    let rules = StopRules {
        ignore_eos: true,
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[0]);
    assert_eq!(push(&mut seq, 0), None);
}

#[test]
fn stop_token_ids_stop_even_with_ignore_eos() {
    let rules = StopRules {
        ignore_eos: true,
        stop_token_ids: vec![9],
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[0]);
    assert_eq!(push(&mut seq, 9), Some((FinishReason::Stop, None)));
}

#[test]
fn max_tokens_and_context_length_end_with_length() {
    let rules = StopRules {
        max_tokens: 2,
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[]);
    assert_eq!(push(&mut seq, 4), None);
    assert_eq!(push(&mut seq, 4), Some((FinishReason::Length, None)));
    let mut seq = sequence(StopRules::default(), &[]);
    let sample = Sample {
        token_id: 4,
        logprob: None,
    };
    assert_eq!(
        seq.append_tokens(vec![sample], 4, Instant::now()),
        Appended {
            num_tokens: 1,
            ending: Some(Ending::Length)
        }
    );
}

#[test]
fn pending_output_accumulates_until_taken() {
    let mut seq = sequence(StopRules::default(), &[]);
    push(&mut seq, 4);
    push(&mut seq, 5);
    assert_eq!(seq.take_pending().token_ids, vec![4, 5]);
    assert!(seq.take_pending().is_empty());
}

#[test]
fn min_tokens_masks_eos_and_stop_ids_in_the_sampler() {
    let rules = StopRules {
        min_tokens: 1,
        stop_token_ids: vec![7],
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[0]);
    let (_, ctx, _) = seq.sampling_inputs();
    let mut masked = ctx.masked_until_min_tokens.to_vec();
    masked.sort();
    assert_eq!(masked, vec![0, 7]);
}

fn json_sequence(max_tokens: u32) -> Sequence {
    let words = ["{", "}", "\"a\"", ":", "1", "x", "<eos>"];
    let bytes: Vec<Option<Vec<u8>>> = words
        .iter()
        .map(|w| (*w != "<eos>").then(|| w.as_bytes().to_vec()))
        .collect();
    let trie = Arc::new(sluice_text::constraint::TokenTrie::new(bytes, 8));
    let masks = Arc::new(sluice_text::constraint::JsonTokenMasks::json_object(trie));
    let stop = StopRules {
        max_tokens,
        ..StopRules::default()
    };
    let constraint = crate::constraint::ConstraintMasks::new(masks).start();
    sequence_with(stop, &[6], Some(constraint))
}

fn allowed(seq: &mut Sequence) -> Vec<u32> {
    let (_, ctx, _) = seq.sampling_inputs();
    let set = ctx.allowed.expect("a constrained sequence has a mask");
    (0..8).filter(|&id| set.contains(id)).collect()
}

#[test]
fn a_json_choice_samples_only_valid_tokens_and_stops_when_the_object_closes() {
    let mut seq = json_sequence(16);
    assert_eq!(allowed(&mut seq), vec![0], "only `{{` opens; EOS is masked");
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(allowed(&mut seq), vec![1, 2]);
    for token in [2, 3] {
        assert_eq!(push(&mut seq, token), None);
    }
    assert_eq!(
        allowed(&mut seq),
        vec![0, 2, 4],
        "a value: object, string or number"
    );
    assert_eq!(push(&mut seq, 4), None);
    assert_eq!(allowed(&mut seq), vec![1, 4]);
    assert_eq!(push(&mut seq, 1), Some((FinishReason::Stop, None)));
    assert_eq!(seq.output(), &[0, 2, 3, 4, 1]);
}

#[test]
fn a_token_the_json_constraint_refuses_fails_the_choice() {
    let mut seq = json_sequence(16);
    let (reason, error) = push(&mut seq, 5).expect("finishes");
    assert_eq!(reason, FinishReason::Error);
    assert!(error.unwrap().contains("token 5"));
}

#[test]
fn a_json_choice_cut_by_max_tokens_ends_with_length() {
    let mut seq = json_sequence(2);
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(push(&mut seq, 2), Some((FinishReason::Length, None)));
}

/// Tokens: `<tool_call>`, the start of a call to tool `a`, `}}`, `</tool_call>`, `hi`, and
/// end-of-sequence (no bytes).
fn tool_sequence(mode: sluice_text::constraint::ToolCallMode, stop: StopRules) -> Sequence {
    use sluice_text::constraint::{TokenMasks, TokenTrie, Tool, ToolCallFraming, ToolCallRules};
    let words = [
        "<tool_call>",
        "{\"name\": \"a\", \"arguments\": {",
        "}}",
        "</tool_call>",
        "hi",
    ];
    let mut bytes: Vec<Option<Vec<u8>>> =
        words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
    bytes.push(None);
    let (tool, _) = Tool::compile("a", &serde_json::json!({})).unwrap();
    let rules = ToolCallRules::new(&[tool], &ToolCallFraming::hermes(), &mode).unwrap();
    let masks = TokenMasks::<sluice_text::constraint::ToolCallRecognizer>::new(
        Arc::new(TokenTrie::new(bytes, 8)),
        Arc::new(rules),
    );
    let constraint = crate::constraint::ConstraintMasks::new(Arc::new(masks)).start();
    sequence_with(stop, &[5], Some(constraint))
}

#[test]
fn a_forced_tool_call_is_the_whole_output_and_stops_when_it_closes() {
    let forced = sluice_text::constraint::ToolCallMode::Forced { tool: None };
    let mut seq = tool_sequence(forced, StopRules::default());
    assert_eq!(
        allowed(&mut seq),
        vec![0],
        "the prefix first; no EOS, no text"
    );
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(allowed(&mut seq), vec![1]);
    assert_eq!(push(&mut seq, 1), None);
    assert_eq!(allowed(&mut seq), vec![2]);
    assert_eq!(push(&mut seq, 2), None);
    assert_eq!(allowed(&mut seq), vec![3], "only the suffix, never EOS");
    assert_eq!(push(&mut seq, 3), Some((FinishReason::Stop, None)));
}

#[test]
fn auto_tool_calls_let_eos_through_only_outside_a_call() {
    let mut seq = tool_sequence(
        sluice_text::constraint::ToolCallMode::Auto,
        StopRules::default(),
    );
    assert_eq!(
        allowed(&mut seq),
        vec![0, 1, 2, 3, 4, 5],
        "free text, EOS included"
    );
    assert_eq!(push(&mut seq, 4), None);
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(allowed(&mut seq), vec![1], "inside the call: no EOS");
    for token in [1, 2] {
        assert_eq!(push(&mut seq, token), None);
    }
    assert_eq!(allowed(&mut seq), vec![3]);
    assert_eq!(push(&mut seq, 3), None);
    assert_eq!(allowed(&mut seq), vec![0, 1, 2, 3, 4, 5], "text again");
    assert_eq!(push(&mut seq, 5), Some((FinishReason::Stop, None)));
    assert_eq!(seq.output(), &[4, 0, 1, 2, 3, 5]);
}

#[test]
fn with_ignore_eos_an_auto_choice_goes_on_past_eos_outside_a_call() {
    let stop = StopRules {
        ignore_eos: true,
        max_tokens: 16,
        ..StopRules::default()
    };
    let mut seq = tool_sequence(sluice_text::constraint::ToolCallMode::Auto, stop);
    assert_eq!(push(&mut seq, 5), None);
    assert_eq!(push(&mut seq, 0), None);
    assert_eq!(allowed(&mut seq), vec![1]);
}

#[test]
fn a_run_of_tokens_is_checked_in_order_and_ends_at_the_first_stop() {
    let mut seq = sequence(StopRules::default(), &[0]);
    let appended = seq.append_tokens(Sample::run(&[4, 5, 0, 6, 7]), 100, Instant::now());
    assert_eq!(
        appended,
        Appended {
            num_tokens: 3,
            ending: Some(Ending::Stop)
        }
    );
    assert_eq!(
        seq.output(),
        &[4, 5, 0],
        "tokens after the stop are dropped"
    );
    assert_eq!(seq.take_pending().token_ids, vec![4, 5, 0]);
    // The same tokens one at a time end at the same place.
    let mut one_by_one = sequence(StopRules::default(), &[0]);
    let endings: Vec<_> = [4, 5, 0].map(|t| push(&mut one_by_one, t)).into();
    assert_eq!(endings, [None, None, Some((FinishReason::Stop, None))]);
    assert_eq!(one_by_one.output(), seq.output());
}

#[test]
fn a_run_is_cut_by_max_tokens_and_by_the_constraint() {
    let rules = StopRules {
        max_tokens: 2,
        ..StopRules::default()
    };
    let mut seq = sequence(rules, &[]);
    let appended = seq.append_tokens(Sample::run(&[4, 5, 6]), 100, Instant::now());
    assert_eq!(
        (appended.num_tokens, appended.ending),
        (2, Some(Ending::Length))
    );
    // `{` then a refused token: the run fails at the second token.
    let mut seq = json_sequence(16);
    let appended = seq.append_tokens(Sample::run(&[0, 5, 1]), 100, Instant::now());
    assert_eq!(appended.num_tokens, 2);
    assert_eq!(
        appended.ending,
        Some(Ending::Error(
            crate::output::ChoiceError::ConstraintRefused(5)
        ))
    );
}
