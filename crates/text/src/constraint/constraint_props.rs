//! Properties of the regex and grammar constraints, with the `regex` crate as the oracle: a
//! random walk that only takes tokens the mask allows, and ends only where the constraint
//! lets it (complete, or end-of-sequence allowed), writes a whole match; and the recognizers
//! agree with the oracle on random strings. The grammar side reads the same patterns as
//! `/regex/` terminals, so its translation of a regex into rules is checked too.

use std::sync::Arc;

use proptest::prelude::*;

use super::grammar::{Grammar, GrammarRecognizer, GrammarStates};
use super::masks::{Recognizer, TokenMasks, TokenTrie};
use super::regex::{Regex, RegexRecognizer};

/// Random patterns over a small alphabet: literals, classes, groups, alternations and
/// repetitions.
fn pattern() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        "[abc]{1,2}",
        Just("[a-c]".to_string()),
        Just("[^a]".to_string()),
        Just("é".to_string()),
        Just("\\d".to_string()),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..3).prop_map(|v| v.concat()),
            proptest::collection::vec(inner.clone(), 2..3)
                .prop_map(|v| format!("(?:{})", v.join("|"))),
            (
                inner.clone(),
                prop_oneof![Just("*"), Just("+"), Just("?"), Just("{1,3}")]
            )
                .prop_map(|(p, op)| format!("(?:{p}){op}")),
        ]
    })
}

fn vocabulary() -> Vec<Option<Vec<u8>>> {
    let words = [
        "a", "b", "c", "ab", "ba", "abc", "é", "1", "12", "x", "ca", "\u{e9}a",
    ];
    let mut v: Vec<Option<Vec<u8>>> = words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
    v.push(Some(vec![0xc3])); // half of é
    v.push(Some(vec![0xa9]));
    v.push(None); // end-of-sequence
    v
}

/// How a random walk through the masks ended.
#[derive(Debug, PartialEq)]
enum Walk {
    /// The constraint completed, or end-of-sequence was taken: these bytes were written.
    Whole(Vec<u8>),
    /// The choices ran out first.
    Unfinished,
    /// A state allowed no token at all: a dead end the masks should never lead into.
    Stuck,
}

/// Walks from the start, taking the allowed token each of `choices` picks.
fn walk<R: Recognizer>(masks: &TokenMasks<R>, vocab: &[Option<Vec<u8>>], choices: &[u16]) -> Walk {
    let eos = (vocab.len() - 1) as u32;
    let mut state = R::start(masks.rules());
    let mut out = Vec::new();
    for &pick in choices {
        if state.is_complete() {
            return Walk::Whole(out);
        }
        let allowed = masks.allowed(&state);
        let ids: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| allowed.contains(id))
            .collect();
        let Some(&id) = ids.get(pick as usize % ids.len().max(1)) else {
            return Walk::Stuck;
        };
        if id == eos {
            return Walk::Whole(out);
        }
        out.extend_from_slice(vocab[id as usize].as_deref().unwrap_or_default());
        state = masks
            .after_token(state, id)
            .expect("an allowed token is accepted");
    }
    match state.is_complete() {
        true => Walk::Whole(out),
        false => Walk::Unfinished,
    }
}

/// Checks a walk's output against the oracle.
fn check(walk: Walk, oracle: &::regex::Regex, what: &str) -> Result<(), TestCaseError> {
    match walk {
        Walk::Whole(out) => {
            let text = std::str::from_utf8(&out).expect("whole characters");
            prop_assert!(oracle.is_match(text), "{what}: {text:?}");
        }
        Walk::Unfinished => {}
        Walk::Stuck => prop_assert!(false, "{what}: stuck"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn regex_walks_write_whole_matches(p in pattern(), choices in proptest::collection::vec(any::<u16>(), 1..40)) {
        let oracle = ::regex::Regex::new(&format!("^(?:{p})$")).unwrap();
        let vocab = vocabulary();
        let trie = Arc::new(TokenTrie::new(vocab.clone(), vocab.len()));
        let regex = Arc::new(Regex::compile(&p).unwrap());
        let masks = TokenMasks::<RegexRecognizer>::new(Arc::clone(&trie), regex);
        check(walk(&masks, &vocab, &choices), &oracle, &p)?;
        let grammar = Arc::new(Grammar::compile(&format!("root ::= /{p}/")).unwrap());
        let masks = TokenMasks::<GrammarRecognizer>::new(trie, Arc::new(GrammarStates::new(grammar)));
        check(walk(&masks, &vocab, &choices), &oracle, &format!("grammar /{p}/"))?;
    }

    #[test]
    fn recognizers_agree_with_the_oracle(p in pattern(), text in "[abcé1x]{0,8}") {
        let oracle = ::regex::Regex::new(&format!("^(?:{p})$")).unwrap();
        let regex = Regex::compile(&p).unwrap();
        prop_assert_eq!(regex.is_match(text.as_bytes()), oracle.is_match(&text), "regex {}", p);
        let grammar = Arc::new(Grammar::compile(&format!("root ::= /{p}/")).unwrap());
        let states = GrammarStates::new(grammar);
        prop_assert_eq!(states.is_match(text.as_bytes()), oracle.is_match(&text), "grammar {}", p);
    }
}
