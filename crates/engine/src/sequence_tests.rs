use super::*;

fn sequence(stop: StopRules, eos: &[u32]) -> Sequence {
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
    })
}

fn push(seq: &mut Sequence, token: u32) -> Option<(FinishReason, Option<String>)> {
    let sample = Sample {
        token_id: token,
        logprob: None,
    };
    seq.append_token(sample, 100, Instant::now())
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
        seq.append_token(sample, 4, Instant::now()),
        Some((FinishReason::Length, None))
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
