//! Picks one token from one row of logits with one choice's parameters and its own RNG.
//!
//! Nothing here looks at other rows, so a seeded choice draws the same tokens whatever else runs
//! in its batch. Order of operations (as vLLM): penalties and logit bias on the raw logits, EOS
//! masking below `min_tokens`, then temperature, top-k, softmax, top-p, min-p, and a draw.
//! Logprobs are reported from the raw log-softmax, before any of that.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use thiserror::Error;

use crate::request::{SamplingParams, TokenLogprob};

/// Most alternatives a caller may ask for per position.
pub const MAX_TOP_LOGPROBS: u32 = 20;

/// Sampling could not pick a token.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SampleError {
    /// The row has no finite logit left to choose from.
    #[error("no finite logits to sample from (all NaN, infinite or masked)")]
    NoCandidates,
}

/// A choice's own random state: `seed + choice` when seeded, from the OS otherwise.
#[derive(Debug, Clone)]
pub struct SamplerRng(StdRng);

impl SamplerRng {
    /// The RNG of choice `choice` of a request seeded with `seed`.
    pub fn new(seed: Option<u64>, choice: u32) -> Self {
        match seed {
            Some(s) => SamplerRng(StdRng::seed_from_u64(s.wrapping_add(choice as u64))),
            None => SamplerRng(StdRng::from_os_rng()),
        }
    }
}

/// What the sampler needs to know about the sequence so far.
#[derive(Debug, Clone, Copy)]
pub struct SamplingContext<'a> {
    /// Prompt tokens (for the repetition penalty).
    pub prompt: &'a [u32],
    /// Tokens generated so far (for all penalties and `min_tokens`).
    pub output: &'a [u32],
    /// Tokens masked while `output.len() < min_tokens`: EOS (unless ignored) and stop token ids.
    pub masked_until_min_tokens: &'a [u32],
    /// The choice's `min_tokens`.
    pub min_tokens: u32,
}

/// The drawn token and, when asked for, its logprob and the top alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The chosen token.
    pub token_id: u32,
    /// Present when the request asked for logprobs.
    pub logprob: Option<TokenLogprob>,
}

/// Draws one token from `logits` (`[vocab_size]`).
pub fn sample(
    logits: &[f32],
    params: &SamplingParams,
    ctx: SamplingContext<'_>,
    rng: &mut SamplerRng,
) -> Result<Sample, SampleError> {
    let mut scores = logits.to_vec(); // [vocab_size]
    apply_penalties(&mut scores, params, ctx);
    for &(token, bias) in &params.logit_bias {
        if let Some(s) = scores.get_mut(token as usize) {
            *s += bias;
        }
    }
    if (ctx.output.len() as u32) < ctx.min_tokens {
        for &t in ctx.masked_until_min_tokens {
            if let Some(s) = scores.get_mut(t as usize) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    let token_id = if params.temperature == 0.0 {
        argmax(&scores).ok_or(SampleError::NoCandidates)?
    } else {
        draw(&scores, params, rng)?
    };
    let logprob = params
        .logprobs
        .map(|k| token_logprob(logits, token_id, k.min(MAX_TOP_LOGPROBS)));
    Ok(Sample { token_id, logprob })
}

/// Repetition penalty over prompt and output (divide positive logits, multiply negative ones);
/// presence and frequency penalties over the output only (OpenAI semantics).
fn apply_penalties(scores: &mut [f32], params: &SamplingParams, ctx: SamplingContext<'_>) {
    if params.repetition_penalty != 1.0 {
        let mut seen = vec![false; scores.len()];
        for &t in ctx.prompt.iter().chain(ctx.output) {
            if let Some(s) = seen.get_mut(t as usize) {
                *s = true;
            }
        }
        for (s, _) in scores.iter_mut().zip(&seen).filter(|(_, &seen)| seen) {
            *s = if *s > 0.0 {
                *s / params.repetition_penalty
            } else {
                *s * params.repetition_penalty
            };
        }
    }
    if params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 {
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for &t in ctx.output {
            *counts.entry(t).or_default() += 1;
        }
        for (t, c) in counts {
            if let Some(s) = scores.get_mut(t as usize) {
                *s -= params.presence_penalty + params.frequency_penalty * c as f32;
            }
        }
    }
}

/// Index of the largest finite score; the lowest index among equals.
fn argmax(scores: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &s) in scores.iter().enumerate() {
        if s.is_nan() || s == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// Temperature, top-k, top-p and min-p, then one draw from the remaining distribution.
fn draw(scores: &[f32], params: &SamplingParams, rng: &mut SamplerRng) -> Result<u32, SampleError> {
    // Candidates as (token, scaled logit), best first; ties broken by token id so the order
    // (and therefore the draw) is a pure function of the scores.
    let mut cands: Vec<(u32, f32)> = scores
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_finite())
        .map(|(i, &s)| (i as u32, s / params.temperature))
        .collect();
    if cands.is_empty() {
        return Err(SampleError::NoCandidates);
    }
    let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if let Some(k) = params
        .top_k
        .map(|k| k as usize)
        .filter(|&k| k < cands.len())
    {
        if k > 0 {
            cands.select_nth_unstable_by(k - 1, by_score);
            cands.truncate(k);
        }
    }
    cands.sort_unstable_by(by_score);
    let max = cands[0].1;
    let mut probs: Vec<f64> = cands.iter().map(|c| ((c.1 - max) as f64).exp()).collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    let mut keep = probs.len();
    if params.top_p < 1.0 {
        let mut mass = 0.0;
        keep = probs
            .iter()
            .position(|p| {
                mass += p;
                mass >= params.top_p as f64
            })
            .map_or(probs.len(), |i| i + 1);
    }
    if params.min_p > 0.0 {
        let floor = params.min_p as f64 * probs[0];
        keep = keep.min(probs.iter().take_while(|&&p| p >= floor).count().max(1));
    }
    let kept_mass: f64 = probs[..keep].iter().sum();
    let mut u = rng.0.random::<f64>() * kept_mass;
    for (i, p) in probs[..keep].iter().enumerate() {
        if u < *p {
            return Ok(cands[i].0);
        }
        u -= p;
    }
    // Rounding left a sliver of mass past the last kept candidate.
    Ok(cands[keep - 1].0)
}

/// The chosen token's raw log-probability and the `k` most likely alternatives.
fn token_logprob(logits: &[f32], token_id: u32, k: u32) -> TokenLogprob {
    let max = logits
        .iter()
        .copied()
        .filter(|s| !s.is_nan())
        .fold(f32::NEG_INFINITY, f32::max);
    let log_total = logits
        .iter()
        .filter(|s| !s.is_nan())
        .map(|&s| ((s - max) as f64).exp())
        .sum::<f64>()
        .ln() as f32;
    let logprob_of = |s: f32| s - max - log_total;
    let mut top: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_nan())
        .map(|(i, &s)| (i as u32, s))
        .collect();
    let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let k = (k as usize).min(top.len());
    if k > 0 && k < top.len() {
        top.select_nth_unstable_by(k - 1, by_score);
    }
    top.truncate(k);
    top.sort_unstable_by(by_score);
    TokenLogprob {
        token_id,
        logprob: logprob_of(logits[token_id as usize]),
        top: top.into_iter().map(|(t, s)| (t, logprob_of(s))).collect(),
    }
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
