//! Compiled regexes and grammars kept by their text, so a client that sends the same
//! constraint with every request compiles it once. The compiled forms depend on the text
//! alone (not on a model's vocabulary), so one small cache serves every model; it holds the
//! most recently used entries (at most 32, and 64 MiB) and forgets the oldest. Errors are not
//! kept: a bad constraint is refused before it costs more than its own compile, which the size
//! limits bound.

use std::sync::{Arc, Mutex};

use super::grammar::{Grammar, GrammarError};
use super::regex::{Regex, RegexError};

/// Most compiled constraints kept, and most bytes they may hold together (a regex's DFA may
/// take up to 16 MiB).
const CAPACITY: usize = 32;
const MAX_BYTES: usize = 64 << 20;

#[derive(Debug, Clone)]
enum Compiled {
    Regex(Arc<Regex>),
    Grammar(Arc<Grammar>),
}

impl Compiled {
    fn memory_usage(&self) -> usize {
        match self {
            Compiled::Regex(r) => r.memory_usage(),
            Compiled::Grammar(g) => g.memory_usage(),
        }
    }
}

/// Entries by (is a grammar, text), the most recently used last.
static CACHE: Mutex<Vec<(bool, String, Compiled)>> = Mutex::new(Vec::new());

fn cached(grammar: bool, text: &str) -> Option<Compiled> {
    let mut entries = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let at = entries
        .iter()
        .position(|(g, t, _)| *g == grammar && t == text)?;
    let entry = entries.remove(at);
    let compiled = entry.2.clone();
    entries.push(entry);
    Some(compiled)
}

fn keep(grammar: bool, text: &str, compiled: Compiled) {
    let mut entries = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    entries.push((grammar, text.to_string(), compiled));
    let bytes = |entries: &Vec<(bool, String, Compiled)>| -> usize {
        entries
            .iter()
            .map(|(_, t, c)| t.len() + c.memory_usage())
            .sum()
    };
    // The newest entry stays even alone past the budget: the request holds it anyway.
    while entries.len() > 1 && (entries.len() > CAPACITY || bytes(&entries) > MAX_BYTES) {
        entries.remove(0);
    }
}

/// `pattern` compiled (see [`Regex::compile`]), from the cache when it was compiled lately.
pub fn regex(pattern: &str) -> Result<Arc<Regex>, RegexError> {
    if let Some(Compiled::Regex(regex)) = cached(false, pattern) {
        return Ok(regex);
    }
    let regex = Arc::new(Regex::compile(pattern)?);
    keep(false, pattern, Compiled::Regex(Arc::clone(&regex)));
    Ok(regex)
}

/// One of `choices` exactly (see [`Regex::choice`]), cached as its regex.
pub fn choice<S: AsRef<str>>(choices: &[S]) -> Result<Arc<Regex>, RegexError> {
    regex(&Regex::choice_pattern(choices))
}

/// `text` compiled (see [`Grammar::compile`]), from the cache when it was compiled lately.
pub fn grammar(text: &str) -> Result<Arc<Grammar>, GrammarError> {
    if let Some(Compiled::Grammar(grammar)) = cached(true, text) {
        return Ok(grammar);
    }
    let grammar = Arc::new(Grammar::compile(text)?);
    keep(true, text, Compiled::Grammar(Arc::clone(&grammar)));
    Ok(grammar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_compiles_once() {
        let a = regex("cache-test-[0-9]+").unwrap();
        let b = regex("cache-test-[0-9]+").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let g = grammar("root ::= \"cache-test\"").unwrap();
        assert!(Arc::ptr_eq(
            &g,
            &grammar("root ::= \"cache-test\"").unwrap()
        ));
        assert!(Arc::ptr_eq(
            &choice(&["x", "y"]).unwrap(),
            &choice(&["x", "y"]).unwrap()
        ));
    }
}
