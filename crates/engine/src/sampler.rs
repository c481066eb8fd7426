//! Picks one token from one row of logits with one choice's parameters and its own RNG.
//!
//! Nothing here looks at other rows, so a seeded choice draws the same tokens whatever else runs
//! in its batch. Order of operations (as vLLM): penalties and logit bias on the raw logits, EOS
//! masking below `min_tokens`, the output constraint's mask, then temperature, top-k, softmax,
//! top-p, min-p, and a draw.
//! Logprobs are reported from the raw log-softmax, before any of that.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use thiserror::Error;

use sluice_model::kernels::vector::{exp_sum, max_finite};

use sluice_text::constraint::TokenSet;

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
    /// When the output is constrained: the only tokens that may be drawn.
    pub allowed: Option<&'a TokenSet>,
}

/// The drawn token and, when asked for, its logprob and the top alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The chosen token.
    pub token_id: u32,
    /// Present when the request asked for logprobs.
    pub logprob: Option<TokenLogprob>,
}

#[cfg(test)]
impl Sample {
    /// Samples of `tokens` without logprobs (a hand-written model output).
    pub(crate) fn run(tokens: &[u32]) -> Vec<Sample> {
        (tokens.iter())
            .map(|&token_id| Sample {
                token_id,
                logprob: None,
            })
            .collect()
    }
}

/// Draws one token from `logits` (`[vocab_size]`).
pub fn sample(
    logits: &[f32],
    params: &SamplingParams,
    ctx: SamplingContext<'_>,
    rng: &mut SamplerRng,
) -> Result<Sample, SampleError> {
    let edited = edit_scores(logits, params, ctx);
    let scores = edited.as_deref().unwrap_or(logits);
    let token_id = if params.temperature == 0.0 {
        argmax(scores).ok_or(SampleError::NoCandidates)?
    } else {
        draw(scores, params, rng)?
    };
    let logprob = params
        .logprobs
        .map(|k| token_logprob(logits, token_id, k.min(MAX_TOP_LOGPROBS)));
    Ok(Sample { token_id, logprob })
}

/// The logits after penalties, logit bias and the `min_tokens` mask; `None` when none of them
/// applies (the common case, which then copies nothing).
fn edit_scores(
    logits: &[f32],
    params: &SamplingParams,
    ctx: SamplingContext<'_>,
) -> Option<Vec<f32>> {
    let penalised = params.repetition_penalty != 1.0
        || params.presence_penalty != 0.0
        || params.frequency_penalty != 0.0;
    let masking = (ctx.output.len() as u32) < ctx.min_tokens;
    if !penalised && params.logit_bias.is_empty() && !masking && ctx.allowed.is_none() {
        return None;
    }
    let mut scores = logits.to_vec(); // [vocab_size]
    apply_penalties(&mut scores, params, ctx);
    for &(token, bias) in &params.logit_bias {
        if let Some(s) = scores.get_mut(token as usize) {
            *s += bias;
        }
    }
    if masking {
        for &t in ctx.masked_until_min_tokens {
            if let Some(s) = scores.get_mut(t as usize) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    if let Some(allowed) = ctx.allowed {
        for (id, s) in scores.iter_mut().enumerate() {
            if !allowed.contains(id as u32) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    Some(scores)
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
pub(crate) fn argmax(scores: &[f32]) -> Option<u32> {
    let best = max_finite(scores)?;
    // The first index holding `best`: whole chunks are tested without an early exit (so the
    // test vectorises), then the one chunk that has it is searched.
    const CHUNK: usize = 64;
    let (c, chunk) = scores
        .chunks(CHUNK)
        .enumerate()
        .find(|(_, chunk)| chunk.iter().fold(false, |found, &s| found | (s == best)))?;
    let i = chunk.iter().position(|&s| s == best)?;
    Some((c * CHUNK + i) as u32)
}

/// `Σ w` in f64, in eight independent lanes (a single running sum would wait on every add).
fn sum(w: &[f32]) -> f64 {
    let mut lanes = [0f64; 8];
    let mut chunks = w.chunks_exact(8);
    for chunk in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(chunk) {
            *l += f64::from(x);
        }
    }
    lanes.iter().sum::<f64>()
        + chunks
            .remainder()
            .iter()
            .map(|&x| f64::from(x))
            .sum::<f64>()
}

/// Temperature, top-k, top-p and min-p, then one draw from the remaining distribution.
///
/// Cost is linear in the vocabulary: weights come from one vectorised `exp` pass, and only
/// top-k and top-p need an order, found by selecting and sorting the few best candidates
/// (a full sort of 152k logits per row would cost more than the forward pass).
fn draw(scores: &[f32], params: &SamplingParams, rng: &mut SamplerRng) -> Result<u32, SampleError> {
    let mut weights = weights(scores, params.temperature).ok_or(SampleError::NoCandidates)?;
    let top_k = params.top_k.map(|k| k as usize).filter(|&k| k > 0);
    // min-p: the best candidate weighs exactly 1, so the threshold is min_p itself.
    let floor = params.min_p.max(0.0);
    if top_k.is_none() && params.top_p >= 1.0 {
        // Every candidate above min-p stays: no order needed, walk in token order.
        if floor > 0.0 {
            weights
                .iter_mut()
                .filter(|w| **w < floor)
                .for_each(|w| *w = 0.0);
        }
        return Ok(draw_in_token_order(&weights, rng));
    }
    let candidates = best_first(&weights, top_k, params.top_p);
    let keep = candidates
        .iter()
        .take_while(|&&t| weights[t as usize] >= floor)
        .count()
        .max(1);
    let candidates = &candidates[..keep];
    let mass: f64 = candidates
        .iter()
        .map(|&t| f64::from(weights[t as usize]))
        .sum();
    let mut u = rng.0.random::<f64>() * mass;
    for &t in candidates {
        let w = f64::from(weights[t as usize]);
        if u < w {
            return Ok(t);
        }
        u -= w;
    }
    // Rounding left a sliver of mass past the last candidate.
    Ok(candidates[keep - 1])
}

/// One draw proportional to `weights`, walking in token order; skips whole chunks by their sum.
/// Needs one positive weight.
fn draw_in_token_order(weights: &[f32], rng: &mut SamplerRng) -> u32 {
    const CHUNK: usize = 512;
    let chunk_masses: Vec<f64> = weights.chunks(CHUNK).map(sum).collect();
    let mut u = rng.0.random::<f64>() * chunk_masses.iter().sum::<f64>();
    for ((c, chunk), &chunk_mass) in weights.chunks(CHUNK).enumerate().zip(&chunk_masses) {
        if u >= chunk_mass {
            u -= chunk_mass;
            continue;
        }
        for (i, &w) in chunk.iter().enumerate() {
            let w = f64::from(w);
            if u < w {
                return (c * CHUNK + i) as u32;
            }
            u -= w;
        }
    }
    // Rounding left a sliver of mass past the last positive weight.
    weights
        .iter()
        .rposition(|&w| w > 0.0)
        .expect("a positive weight") as u32
}

/// `e^((s - max) / temperature)` per token, 0 for non-finite scores (masked, NaN); the best
/// token weighs exactly 1. `None` when no score is finite.
fn weights(scores: &[f32], temperature: f32) -> Option<Vec<f32>> {
    let max = max_finite(scores)?;
    let mut masked = false;
    let mut w: Vec<f32> = scores
        .iter()
        .map(|&s| {
            masked |= !s.is_finite();
            s / temperature
        })
        .collect();
    exp_sum(&mut w, max / temperature);
    if masked {
        // Masked, NaN or infinite scores weigh nothing (the vector exp would give ~1e-38).
        for (w, s) in w.iter_mut().zip(scores) {
            if !s.is_finite() {
                *w = 0.0;
            }
        }
    }
    Some(w)
}

/// Tokens best first (ties by token id), cut to the top `k` and then to the smallest prefix
/// holding `top_p` of their mass.
///
/// Only candidates above a floor weight are ordered when that provably changes nothing (at
/// least `k` of them, or at least `top_p` of the mass above the floor); a model's distribution
/// puts nearly all its mass on a few hundred tokens, so this skips most of the vocabulary.
fn best_first(weights: &[f32], top_k: Option<usize>, top_p: f32) -> Vec<u32> {
    let total = sum(weights);
    for floor in [1e-3f32, 1e-7, 0.0] {
        let mut keys: Vec<u64> = weights
            .iter()
            .enumerate()
            .filter(|&(_, &w)| w > 0.0 && w >= floor)
            .map(|(t, &w)| order_key(t, w))
            .collect();
        let enough = match top_k {
            Some(k) => keys.len() >= k,
            None => {
                let above: f64 = keys.iter().map(|&key| key_weight(key) as f64).sum();
                above >= top_p as f64 * total
            }
        };
        if !enough && floor > 0.0 {
            continue;
        }
        let mass = match top_k {
            Some(k) if k < keys.len() => {
                sort_prefix(&mut keys, k);
                keys.truncate(k);
                keys.iter().map(|&key| key_weight(key) as f64).sum()
            }
            _ => total,
        };
        let cut = nucleus(&mut keys, top_p as f64 * mass);
        return keys[..cut].iter().map(|&key| key_token(key)).collect();
    }
    unreachable!("the last floor keeps every candidate")
}

/// Sorts `keys` best first far enough to find the smallest prefix with `target` mass, and
/// returns its length (all of them when they never reach it). Sorts the best 256 first, then
/// sixteen times more, so a peaked distribution never pays for a full sort.
fn nucleus(keys: &mut [u64], target: f64) -> usize {
    let mut sorted = 256.min(keys.len());
    loop {
        sort_prefix(keys, sorted);
        let mut mass = 0.0;
        if let Some(i) = keys[..sorted].iter().position(|&key| {
            mass += key_weight(key) as f64;
            mass >= target
        }) {
            return i + 1;
        }
        if sorted == keys.len() {
            return sorted;
        }
        sorted = (sorted * 16).min(keys.len());
    }
}

/// Puts the `n` best keys first, best first.
fn sort_prefix(keys: &mut [u64], n: usize) {
    if n == 0 {
        return;
    }
    if n < keys.len() {
        keys.select_nth_unstable_by(n - 1, |a, b| b.cmp(a));
    }
    keys[..n].sort_unstable_by(|a, b| b.cmp(a));
}

/// A key whose descending order is weight descending, then token id ascending: the bits of a
/// positive float order like its value, and the low half holds the inverted token id.
fn order_key(token: usize, weight: f32) -> u64 {
    (u64::from(weight.to_bits()) << 32) | u64::from(u32::MAX - token as u32)
}

fn key_weight(key: u64) -> f32 {
    f32::from_bits((key >> 32) as u32)
}

fn key_token(key: u64) -> u32 {
    u32::MAX - key as u32
}

/// The chosen token's raw log-probability and the `k` most likely alternatives.
///
/// The log-normaliser comes from the same vectorised `exp` pass as sampling; the alternatives
/// are ordered by raw score (ties by token id), selecting among the scores within 8 (then 24)
/// nats of the best when there are at least `k` of them, among all otherwise.
pub(crate) fn token_logprob(logits: &[f32], token_id: u32, k: u32) -> TokenLogprob {
    let Some(max) = max_finite(logits) else {
        // No finite logit: nothing has a probability to report.
        return TokenLogprob {
            token_id,
            logprob: f32::NAN,
            top: Vec::new(),
        };
    };
    let weights = weights(logits, 1.0).expect("a finite logit exists");
    let log_total = sum(&weights).ln() as f32;
    let logprob_of = |s: f32| s - max - log_total;
    let k = k as usize;
    let mut keys = Vec::new();
    for floor in [max - 8.0, max - 24.0, f32::NEG_INFINITY] {
        keys = logits
            .iter()
            .enumerate()
            .filter(|&(_, &s)| !s.is_nan() && s >= floor)
            .map(|(t, &s)| (u64::from(score_order(s)) << 32) | u64::from(u32::MAX - t as u32))
            .collect();
        if keys.len() >= k {
            break;
        }
    }
    let k = k.min(keys.len());
    sort_prefix(&mut keys, k);
    TokenLogprob {
        token_id,
        logprob: logprob_of(logits[token_id as usize]),
        top: keys[..k]
            .iter()
            .map(|&key| {
                let t = key_token(key);
                (t, logprob_of(logits[t as usize]))
            })
            .collect(),
    }
}

/// Bits of a non-NaN float that order as the floats do (negatives flipped, sign bit set on
/// the rest).
fn score_order(s: f32) -> u32 {
    let bits = s.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
