//! The linear merge derivation against the plain quadratic one, and the hostile vocabularies
//! of issue 30: prefix chains and one very long token.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sluice_gguf::{Metadata, Value};

use super::super::vocab::{GgufVocab, TokenType};
use super::merges_by_score;
use crate::{TextError, Tokenizer};

/// A SentencePiece vocabulary's metadata: `<unk>`, `<s>`, `</s>`, then `pieces` scored by
/// their place (earlier pieces score higher).
fn sentencepiece(pieces: &[String]) -> Metadata {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    tokens.extend(pieces.iter().cloned());
    let n = tokens.len();
    let scores = (0..n).map(|i| Value::F32(-(i as f32))).collect();
    let mut types = vec![Value::I32(1); n];
    types[0] = Value::I32(2);
    types[1] = Value::I32(3);
    types[2] = Value::I32(3);
    let pairs = [
        ("tokenizer.ggml.model", Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        ("tokenizer.ggml.scores", Value::Array(scores)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
    ];
    Metadata::new(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// Every split of every token whose halves are tokens, by score: the definition, quadratic.
fn reference_merges(vocab: &GgufVocab) -> Vec<(String, String)> {
    let mut ranked = Vec::new();
    for (id, text) in vocab.tokens.iter().enumerate() {
        if vocab.types[id] == TokenType::Byte {
            continue;
        }
        for (at, _) in text.char_indices().skip(1) {
            let (left, right) = text.split_at(at);
            if vocab.ids.contains_key(left) && vocab.ids.contains_key(right) {
                ranked.push((
                    vocab.scores[id],
                    id,
                    at,
                    left.to_string(),
                    right.to_string(),
                ));
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    ranked.into_iter().map(|(_, _, _, l, r)| (l, r)).collect()
}

proptest! {
    #[test]
    fn linear_merges_equal_the_definition(
        pieces in prop::collection::btree_set("[ab▁é]{1,6}", 1..60)
    ) {
        let pieces: Vec<String> = pieces.into_iter().collect();
        let vocab = GgufVocab::read(&sentencepiece(&pieces)).unwrap();
        prop_assert_eq!(merges_by_score(&vocab).unwrap(), reference_merges(&vocab));
    }
}

#[test]
fn a_prefix_chain_vocabulary_is_refused_naming_the_limit() {
    // `a`, `aa`, ... 2,600 long: 3.4 MB of tokens whose merge list would hold 5.9 GB of text.
    let chain: Vec<String> = (1..=2600).map(|n| "a".repeat(n)).collect();
    let started = Instant::now();
    let err = Tokenizer::from_gguf(&sentencepiece(&chain)).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(
            err,
            TextError::GgufVocabOverLimit {
                what: "merges",
                limit: 20_824,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("8 merges per token"), "{err}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}

#[test]
fn a_short_prefix_chain_stays_within_the_limits_and_merges_whole() {
    let chain: Vec<String> = (1..=12).map(|n| "a".repeat(n)).collect();
    let tokenizer = Tokenizer::from_gguf(&sentencepiece(&chain)).unwrap();
    let ids = tokenizer.encode(&"a".repeat(12), false).unwrap();
    // `▁` has no piece: byte fallback is off in this vocabulary, so it is `<unk>`.
    assert_eq!(ids, [0, 3 + 11]);
}

#[test]
fn a_million_character_token_loads_in_linear_time() {
    let long = "ab".repeat(500_000);
    let pieces = ["a".to_string(), "b".to_string(), "ab".to_string(), long];
    let started = Instant::now();
    let tokenizer = Tokenizer::from_gguf(&sentencepiece(&pieces)).unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let ids = tokenizer.encode("abab", false).unwrap();
    assert_eq!(ids[1..], [5, 5]);
}
