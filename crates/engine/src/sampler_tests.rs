use super::*;

fn ctx<'a>(output: &'a [u32]) -> SamplingContext<'a> {
    SamplingContext {
        prompt: &[],
        output,
        masked_until_min_tokens: &[],
        min_tokens: 0,
        allowed: None,
    }
}

fn greedy() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        ..SamplingParams::default()
    }
}

fn pick(logits: &[f32], params: &SamplingParams, c: SamplingContext<'_>) -> u32 {
    sample(logits, params, c, &mut SamplerRng::new(Some(0), 0))
        .unwrap()
        .token_id
}

#[test]
fn zero_temperature_takes_the_argmax() {
    assert_eq!(pick(&[0.1, 2.0, 1.0], &greedy(), ctx(&[])), 1);
}

#[test]
fn greedy_ties_go_to_the_lowest_token_id() {
    assert_eq!(pick(&[1.0, 3.0, 3.0], &greedy(), ctx(&[])), 1);
}

#[test]
fn greedy_finds_the_first_maximum_across_the_scan_chunks() {
    // A vocabulary wider than the 8-lane and 64-value chunks, with ties in different chunks,
    // a NaN and an infinity ahead of them.
    let mut logits: Vec<f32> = (0..1000).map(|i| (i % 97) as f32 * 0.01).collect();
    logits[5] = f32::NAN;
    logits[6] = f32::INFINITY;
    for t in [130, 131, 700, 999] {
        logits[t] = 7.5;
    }
    assert_eq!(pick(&logits, &greedy(), ctx(&[])), 130);
    logits[130] = 0.0;
    logits[131] = 0.0;
    assert_eq!(pick(&logits, &greedy(), ctx(&[])), 700);
}

#[test]
fn all_nan_logits_are_an_error_not_a_token() {
    let err = sample(
        &[f32::NAN; 3],
        &greedy(),
        ctx(&[]),
        &mut SamplerRng::new(None, 0),
    );
    assert_eq!(err, Err(SampleError::NoCandidates));
}

#[test]
fn same_seed_and_choice_draw_the_same_tokens() {
    let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let params = SamplingParams::default();
    let draws = |seed, choice| {
        let mut rng = SamplerRng::new(Some(seed), choice);
        (0..20)
            .map(|_| {
                sample(&logits, &params, ctx(&[]), &mut rng)
                    .unwrap()
                    .token_id
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(draws(7, 0), draws(7, 0));
    assert_ne!(draws(7, 0), draws(7, 1));
    assert_eq!(draws(7, 1), draws(8, 0), "choice i seeds with seed + i");
}

#[test]
fn top_k_one_is_greedy_at_any_temperature() {
    let params = SamplingParams {
        temperature: 5.0,
        top_k: Some(1),
        ..SamplingParams::default()
    };
    for seed in 0..20 {
        let mut rng = SamplerRng::new(Some(seed), 0);
        let s = sample(&[0.0, 1.0, 0.5], &params, ctx(&[]), &mut rng).unwrap();
        assert_eq!(s.token_id, 1);
    }
}

#[test]
fn top_p_keeps_only_the_nucleus() {
    // p = [0.7, 0.2, 0.1] roughly: top_p 0.6 keeps only the first.
    let logits = [0.7f32.ln(), 0.2f32.ln(), 0.1f32.ln()];
    let params = SamplingParams {
        top_p: 0.6,
        ..SamplingParams::default()
    };
    for seed in 0..30 {
        let mut rng = SamplerRng::new(Some(seed), 0);
        assert_eq!(
            sample(&logits, &params, ctx(&[]), &mut rng)
                .unwrap()
                .token_id,
            0
        );
    }
}

#[test]
fn min_p_drops_unlikely_tokens() {
    let logits = [0.6f32.ln(), 0.35f32.ln(), 0.05f32.ln()];
    let params = SamplingParams {
        min_p: 0.5,
        ..SamplingParams::default()
    };
    for seed in 0..50 {
        let mut rng = SamplerRng::new(Some(seed), 0);
        assert_ne!(
            sample(&logits, &params, ctx(&[]), &mut rng)
                .unwrap()
                .token_id,
            2
        );
    }
}

#[test]
fn unrestricted_sampling_reaches_every_likely_token() {
    let logits = [0.0f32, 0.0, 0.0];
    let mut rng = SamplerRng::new(Some(3), 0);
    let mut seen = [false; 3];
    for _ in 0..100 {
        let t = sample(&logits, &SamplingParams::default(), ctx(&[]), &mut rng).unwrap();
        seen[t.token_id as usize] = true;
    }
    assert_eq!(seen, [true; 3]);
}

#[test]
fn logit_bias_can_force_a_token() {
    let params = SamplingParams {
        logit_bias: vec![(2, 100.0)],
        ..greedy()
    };
    assert_eq!(pick(&[5.0, 4.0, 0.0], &params, ctx(&[])), 2);
}

#[test]
fn frequency_penalty_grows_with_each_occurrence() {
    let params = SamplingParams {
        frequency_penalty: 1.0,
        ..greedy()
    };
    let logits = [3.0, 1.5];
    assert_eq!(pick(&logits, &params, ctx(&[0])), 0); // 3 - 1 = 2 > 1.5
    assert_eq!(pick(&logits, &params, ctx(&[0, 0])), 1); // 3 - 2 = 1 < 1.5
}

#[test]
fn presence_penalty_is_paid_once() {
    let params = SamplingParams {
        presence_penalty: 1.0,
        ..greedy()
    };
    assert_eq!(pick(&[3.0, 1.5], &params, ctx(&[0, 0, 0])), 0); // 3 - 1 = 2 > 1.5
}

#[test]
fn repetition_penalty_covers_the_prompt_and_both_signs() {
    let params = SamplingParams {
        repetition_penalty: 2.0,
        ..greedy()
    };
    let c = SamplingContext {
        prompt: &[0],
        ..ctx(&[])
    };
    assert_eq!(pick(&[3.0, 2.0], &params, c), 1); // 3 / 2 = 1.5 < 2
    let negative = SamplingContext {
        prompt: &[1],
        ..ctx(&[])
    };
    assert_eq!(pick(&[-1.0, -0.8], &params, negative), 0); // -0.8 * 2 = -1.6 < -1
}

#[test]
fn eos_is_masked_until_min_tokens() {
    let c = SamplingContext {
        prompt: &[],
        output: &[1],
        masked_until_min_tokens: &[0],
        min_tokens: 2,
        allowed: None,
    };
    assert_eq!(pick(&[9.0, 1.0], &greedy(), c), 1);
    let reached = SamplingContext {
        output: &[1, 1],
        ..c
    };
    assert_eq!(pick(&[9.0, 1.0], &greedy(), reached), 0);
}

#[test]
fn logprobs_come_from_the_raw_distribution_best_first() {
    let logits = [2.0f32.ln(), 1.0f32.ln(), 1.0f32.ln()]; // p = [0.5, 0.25, 0.25]
    let params = SamplingParams {
        temperature: 0.0,
        logprobs: Some(2),
        logit_bias: vec![(2, 10.0)],
        ..SamplingParams::default()
    };
    let s = sample(&logits, &params, ctx(&[]), &mut SamplerRng::new(Some(0), 0)).unwrap();
    assert_eq!(s.token_id, 2);
    let lp = s.logprob.unwrap();
    assert!((lp.logprob - 0.25f32.ln()).abs() < 1e-5);
    assert_eq!(lp.top.len(), 2);
    assert_eq!(lp.top[0].0, 0);
    assert!((lp.top[0].1 - 0.5f32.ln()).abs() < 1e-5);
    assert_eq!(lp.top[1].0, 1, "ties are ordered by token id");
}

#[test]
fn top_logprobs_are_capped_at_twenty() {
    let logits = vec![0.0f32; 64];
    let params = SamplingParams {
        logprobs: Some(50),
        ..greedy()
    };
    let s = sample(&logits, &params, ctx(&[]), &mut SamplerRng::new(Some(0), 0)).unwrap();
    assert_eq!(s.logprob.unwrap().top.len(), 20);
}

/// Relative frequency of each token over `n` seeded draws.
fn frequencies(logits: &[f32], params: &SamplingParams, n: usize) -> Vec<f64> {
    let mut rng = SamplerRng::new(Some(11), 0);
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[sample(logits, params, ctx(&[]), &mut rng).unwrap().token_id as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

fn assert_close(got: &[f64], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 0.015,
            "frequencies {got:?}, expected {want:?}"
        );
    }
}

#[test]
fn draws_follow_the_softmax_at_temperature() {
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
    assert_close(
        &frequencies(&logits, &SamplingParams::default(), 20_000),
        &[0.5, 0.3, 0.2],
    );
    // Temperature 0.5 squares the odds: 25 : 9 : 4.
    let sharper = SamplingParams {
        temperature: 0.5,
        ..SamplingParams::default()
    };
    assert_close(
        &frequencies(&logits, &sharper, 20_000),
        &[25.0 / 38.0, 9.0 / 38.0, 4.0 / 38.0],
    );
}

#[test]
fn the_nucleus_is_renormalised() {
    let logits = [0.2f32.ln(), 0.5f32.ln(), 0.3f32.ln()];
    let params = SamplingParams {
        top_p: 0.75,
        ..SamplingParams::default()
    };
    assert_close(&frequencies(&logits, &params, 20_000), &[0.0, 0.625, 0.375]);
}

#[test]
fn a_nucleus_wider_than_the_first_sorted_slice_is_found() {
    // 5000 equal tokens: top_p 0.5 keeps the first 2500 by token id (ties go to the lower id),
    // more than the 256 the sampler sorts first.
    let logits = vec![0.0f32; 5000];
    let params = SamplingParams {
        top_p: 0.5,
        ..SamplingParams::default()
    };
    let mut rng = SamplerRng::new(Some(5), 0);
    let mut highest = 0;
    for _ in 0..2000 {
        let t = sample(&logits, &params, ctx(&[]), &mut rng)
            .unwrap()
            .token_id;
        highest = highest.max(t);
    }
    assert!(highest < 2500, "drew {highest}, outside the nucleus");
    assert!(
        highest > 2000,
        "the nucleus is wider than 256: drew at most {highest}"
    );
}

#[test]
fn masked_and_nan_tokens_are_never_drawn() {
    let mut logits = vec![f32::NEG_INFINITY; 64];
    logits[10] = -30.0;
    logits[20] = f32::NAN;
    logits[40] = -31.0;
    for params in [
        SamplingParams::default(),
        SamplingParams {
            top_p: 0.99,
            ..SamplingParams::default()
        },
        SamplingParams {
            top_k: Some(100),
            ..SamplingParams::default()
        },
    ] {
        let f = frequencies(&logits, &params, 3000);
        let drawn: Vec<usize> = (0..64).filter(|&t| f[t] > 0.0).collect();
        assert_eq!(drawn, vec![10, 40], "{params:?}");
    }
}

#[test]
fn a_top_k_wider_than_the_vocabulary_still_applies_min_p() {
    let logits = [0.6f32.ln(), 0.05f32.ln(), 0.35f32.ln()];
    let params = SamplingParams {
        top_k: Some(10),
        min_p: 0.5,
        ..SamplingParams::default()
    };
    assert_close(
        &frequencies(&logits, &params, 10_000),
        &[0.6 / 0.95, 0.0, 0.35 / 0.95],
    );
}

#[test]
fn greedy_skips_nan_and_masked_scores() {
    let mut logits = vec![f32::NEG_INFINITY; 37];
    logits[3] = f32::NAN;
    logits[30] = -5.0;
    logits[33] = -5.0;
    assert_eq!(pick(&logits, &greedy(), ctx(&[])), 30);
    assert_eq!(
        sample(
            &[f32::NEG_INFINITY; 9],
            &greedy(),
            ctx(&[]),
            &mut SamplerRng::new(None, 0)
        ),
        Err(SampleError::NoCandidates)
    );
}

#[test]
fn top_logprobs_order_by_raw_score_across_the_whole_range() {
    // Scores far below the best (beyond the shortcuts' floors) still order correctly.
    let logits = [
        -5.0f32,
        3.0,
        -200.0,
        f32::NAN,
        -60.0,
        3.0,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
    ];
    let params = SamplingParams {
        logprobs: Some(20),
        ..greedy()
    };
    let s = sample(&logits, &params, ctx(&[]), &mut SamplerRng::new(Some(0), 0)).unwrap();
    let lp = s.logprob.unwrap();
    let order: Vec<u32> = lp.top.iter().map(|t| t.0).collect();
    assert_eq!(
        order,
        vec![1, 5, 8, 7, 0, 4, 2, 6],
        "NaN is left out, -inf comes last"
    );
    let total: f64 = [-5.0f64, 3.0, -200.0, -60.0, 3.0, 0.0, 0.0]
        .iter()
        .map(|s| s.exp())
        .sum();
    let expected = (3.0 - total.ln()) as f32;
    assert!(
        (lp.logprob - expected).abs() < 1e-5,
        "{} vs {expected}",
        lp.logprob
    );
    assert_eq!(lp.top[7].1, f32::NEG_INFINITY);
}
