//! The SentencePiece merge list, built in time and memory linear in the vocabulary's bytes.
//!
//! llama.cpp merges the adjacent pair whose joined text is the highest-scoring token; a BPE
//! model whose merges are every (left, right) split of every token into two tokens, ranked by
//! the token's score, merges in the same order. Looking each split's halves up by their text
//! costs the token's length per split, so a token of `k` characters costs `k²` (one token of
//! 1,000,000 characters took 94 s), and a vocabulary of prefix chains (`a`, `aa`, ... 2,600
//! long) has a valid split at every position of every token: its merge list holds `n³/3` bytes
//! of text (6 GB from a 5.4 MB vocabulary).
//!
//! Here each token's prefixes and suffixes are hashed in one pass (a polynomial hash with a
//! base drawn at random per process, so a file cannot be written to collide), candidate splits
//! are those whose two halves' hashes and lengths are a token's, and only candidates are
//! compared byte for byte. Whatever passes counts against two limits, checked while counting
//! and before any text is copied, so a vocabulary over them costs no more than its own size:
//!
//! - at most [`MERGES_PER_TOKEN`] merges per token (real vocabularies: 0.9 to 2);
//! - at most [`MERGE_TEXT_PER_VOCAB_BYTE`] bytes of merge text per byte of token text (2.0 for
//!   Llama 2's and Phi-3's, 1.2 for Baichuan's).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use super::vocab::{GgufVocab, TokenType};
use crate::TextError;

/// Most merges a SentencePiece vocabulary may derive, per token.
pub(crate) const MERGES_PER_TOKEN: usize = 8;
/// Most bytes of merge text (each merge holds its token's text, split in two) per byte of
/// token text.
pub(crate) const MERGE_TEXT_PER_VOCAB_BYTE: usize = 16;

/// The Mersenne prime 2^61 - 1: products of two residues fit in a u128.
const MODULUS: u64 = (1 << 61) - 1;

/// The SentencePiece merge list: every split of every token into two tokens, highest token
/// score first (ties: lower token id first, then shorter left half).
pub(super) fn merges_by_score(vocab: &GgufVocab) -> Result<Vec<(String, String)>, TextError> {
    let token_bytes: usize = vocab.tokens.iter().map(String::len).sum();
    let max_merges = vocab.tokens.len().saturating_mul(MERGES_PER_TOKEN);
    let max_text = token_bytes.saturating_mul(MERGE_TEXT_PER_VOCAB_BYTE);
    let hasher = PrefixHasher::new(vocab.tokens.iter().map(String::len).max().unwrap_or(0));
    let known: HashSet<(u64, usize)> = (vocab.tokens.iter())
        .map(|t| (hasher.whole(t.as_bytes()), t.len()))
        .collect();
    let mut ranked: Vec<(f32, u32, usize)> = Vec::new();
    let mut text = 0usize;
    let mut prefixes = Vec::new();
    for (id, token) in vocab.tokens.iter().enumerate() {
        if vocab.types[id] == TokenType::Byte {
            continue;
        }
        let bytes = token.as_bytes();
        hasher.prefixes(bytes, &mut prefixes);
        for (at, _) in token.char_indices().skip(1) {
            let left = (prefixes[at], at);
            let right = (hasher.suffix(&prefixes, at), bytes.len() - at);
            if !known.contains(&left) || !known.contains(&right) {
                continue;
            }
            // Compared byte for byte (a candidate's cost counts even if it fails, so no
            // collision can make this loop long).
            text += bytes.len();
            if text > max_text {
                return Err(over_limit("merge text in bytes", text, max_text, TEXT_RULE));
            }
            let (l, r) = token.split_at(at);
            if vocab.ids.contains_key(l) && vocab.ids.contains_key(r) {
                if ranked.len() == max_merges {
                    return Err(over_limit("merges", max_merges + 1, max_merges, COUNT_RULE));
                }
                ranked.push((vocab.scores[id], id as u32, at));
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    Ok(ranked
        .into_iter()
        .map(|(_, id, at)| {
            let (left, right) = vocab.tokens[id as usize].split_at(at);
            (left.to_string(), right.to_string())
        })
        .collect())
}

const TEXT_RULE: &str = "16 bytes of merge text per byte of token text";
const COUNT_RULE: &str = "8 merges per token";

fn over_limit(what: &'static str, value: usize, limit: usize, rule: &'static str) -> TextError {
    TextError::GgufVocabOverLimit {
        what,
        value,
        limit,
        rule,
    }
}

/// A polynomial hash over bytes modulo 2^61 - 1, with a random base and the powers of it up
/// to the longest token.
struct PrefixHasher {
    base: u64,
    powers: Vec<u64>,
}

impl PrefixHasher {
    fn new(longest: usize) -> Self {
        // A random 64-bit value from the standard library's per-process random hash keys.
        let base = RandomState::new().hash_one(0x5eed_u64) % (MODULUS - 256) + 256;
        let mut powers = Vec::with_capacity(longest + 1);
        let mut power = 1;
        for _ in 0..=longest {
            powers.push(power);
            power = mul(power, base);
        }
        Self { base, powers }
    }

    /// The hash of all of `bytes`.
    fn whole(&self, bytes: &[u8]) -> u64 {
        bytes.iter().fold(0, |h, &b| self.step(h, b))
    }

    /// `out[i]` becomes the hash of `bytes[..i]`, for `i` in `0..=bytes.len()`.
    fn prefixes(&self, bytes: &[u8], out: &mut Vec<u64>) {
        out.clear();
        out.push(0);
        let mut h = 0;
        for &b in bytes {
            h = self.step(h, b);
            out.push(h);
        }
    }

    /// The hash of `bytes[at..]`, from the prefix hashes of `bytes`.
    fn suffix(&self, prefixes: &[u64], at: usize) -> u64 {
        let end = prefixes.len() - 1;
        let shifted = mul(prefixes[at], self.powers[end - at]);
        (prefixes[end] + MODULUS - shifted) % MODULUS
    }

    fn step(&self, h: u64, byte: u8) -> u64 {
        (mul(h, self.base) + u64::from(byte) + 1) % MODULUS
    }
}

fn mul(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(MODULUS)) as u64
}

#[cfg(test)]
#[path = "merges_tests.rs"]
mod tests;
