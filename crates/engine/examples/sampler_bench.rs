//! Times one `sample` call on a large vocabulary under common parameter sets.
//!
//! `cargo run --release -p sluice-engine --example sampler_bench [vocab]` (default 151936,
//! Qwen2.5's vocabulary).

use std::time::Instant;

use sluice_engine::request::SamplingParams;
use sluice_engine::sampler::{sample, SamplerRng, SamplingContext};

fn main() {
    let vocab: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(151_936);
    // Logits shaped like a model's: a few strong candidates over a broad tail.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let logits: Vec<f32> = (0..vocab)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32;
            noise * 6.0 - 3.0 + if i % 997 == 0 { 8.0 } else { 0.0 }
        })
        .collect();
    let ctx = SamplingContext {
        prompt: &[1, 2, 3],
        output: &[4, 5],
        masked_until_min_tokens: &[],
        min_tokens: 0,
        allowed: None,
    };
    let cases: [(&str, SamplingParams); 6] = [
        (
            "greedy",
            SamplingParams {
                temperature: 0.0,
                ..SamplingParams::default()
            },
        ),
        (
            "temperature 1",
            SamplingParams {
                temperature: 1.0,
                ..SamplingParams::default()
            },
        ),
        (
            "temperature 0.7, top_p 0.9",
            SamplingParams {
                temperature: 0.7,
                top_p: 0.9,
                ..SamplingParams::default()
            },
        ),
        (
            "top_k 40",
            SamplingParams {
                temperature: 0.8,
                top_k: Some(40),
                ..SamplingParams::default()
            },
        ),
        (
            "greedy, logprobs 5",
            SamplingParams {
                temperature: 0.0,
                logprobs: Some(5),
                ..SamplingParams::default()
            },
        ),
        (
            "min_p 0.05",
            SamplingParams {
                temperature: 1.0,
                min_p: 0.05,
                ..SamplingParams::default()
            },
        ),
    ];
    let mut rng = SamplerRng::new(Some(7), 0);
    for (name, params) in cases {
        let runs = 50;
        let start = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(sample(&logits, &params, ctx, &mut rng).expect("samples"));
        }
        let per = start.elapsed() / runs;
        println!(
            "{name:>28}: {:>9.1} µs per row (vocab {vocab})",
            per.as_secs_f64() * 1e6
        );
    }
}
