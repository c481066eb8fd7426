//! Times the regex and grammar constraints' per-token work on a real vocabulary: compiling,
//! and computing the mask of a recognizer state (what a constrained choice pays on each step
//! whose state is not cached), checked against trying every token.
//!
//! `cargo run --release -p sluice-text --example constraint_mask_bench -- <model dir>`

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sluice_text::constraint::{
    Grammar, GrammarRecognizer, GrammarStates, Recognizer, Regex, RegexRecognizer, TokenMasks,
    TokenTrie,
};
use sluice_text::Tokenizer;

/// A JSON-like grammar with recursion, strings and numbers.
const GRAMMAR: &str = r#"
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}"
array  ::= "[" ws ( value ("," ws value)* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t\n]{0,2}
"#;

fn time<R: Recognizer>(name: &str, masks: &TokenMasks<R>, state: R, bytes: &[Option<Vec<u8>>]) {
    let started = Instant::now();
    let allowed = masks.allowed(&state);
    let first = started.elapsed();
    let started = Instant::now();
    let _ = masks.allowed(&state);
    let cached = started.elapsed();
    // Tokens with no bytes (special ones) are allowed where the output may end.
    let ends = state.after_byteless(masks.rules()).is_some();
    let brute = bytes
        .iter()
        .filter(|b| match b.as_deref() {
            Some(b) if !b.is_empty() => state.after(masks.rules(), b).is_some(),
            _ => ends,
        })
        .count();
    assert_eq!(allowed.len(), brute, "{name}");
    println!(
        "{name:>28}: {:>6} tokens allowed, mask {:>7.3} ms, cached {:>6.3} µs",
        allowed.len(),
        first.as_secs_f64() * 1e3,
        cached.as_secs_f64() * 1e6
    );
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: constraint_mask_bench <model dir>"),
    );
    let tokenizer = Tokenizer::from_dir(&dir).expect("a tokenizer");
    let bytes = tokenizer.token_bytes();
    let trie = Arc::new(TokenTrie::new(bytes.clone(), tokenizer.vocab_size()));
    println!("vocabulary {} tokens", tokenizer.vocab_size());

    let started = Instant::now();
    let regex = Arc::new(Regex::compile(r"[A-Z][a-z]+ [0-9]{3}-[0-9]{4}( \w+)*").unwrap());
    println!(
        "regex compiled in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let masks = TokenMasks::new(Arc::clone(&trie), Arc::clone(&regex));
    let start = RegexRecognizer::start(&regex);
    for (name, prefix) in [("regex: start", ""), ("regex: in \\w+", "Ab 123-4567 wor")] {
        let state = start.after(&regex, prefix.as_bytes()).unwrap();
        time(name, &masks, state, &bytes);
    }

    let started = Instant::now();
    let grammar = Arc::new(Grammar::compile(GRAMMAR).unwrap());
    println!(
        "grammar compiled in {:.3} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let states = Arc::new(GrammarStates::new(grammar));
    let masks = TokenMasks::new(Arc::clone(&trie), Arc::clone(&states));
    let start = GrammarRecognizer::start(&states);
    for (name, prefix) in [
        ("grammar: start", ""),
        ("grammar: after {", "{"),
        ("grammar: in a string", "{\"na"),
        ("grammar: after :", "{\"name\":"),
        ("grammar: nested string", "{\"a\":[{\"b\":[\"x"),
        ("grammar: in a number", "{\"a\":12"),
    ] {
        let state = start.after(&states, prefix.as_bytes()).unwrap();
        time(name, &masks, state, &bytes);
    }
}
