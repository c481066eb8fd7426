use std::sync::Arc;
use std::time::{Duration, Instant};

use super::masks::{Recognizer, TokenMasks, TokenTrie};
use super::regex::{Regex, RegexError, RegexRecognizer};

#[test]
fn the_whole_output_must_match() {
    let regex = Regex::compile("[0-9]{3}-[a-z]{2}").unwrap();
    assert!(regex.is_match(b"123-ab"));
    assert!(!regex.is_match(b"123-a"), "a prefix is not a match");
    assert!(!regex.is_match(b"x123-ab"), "anchored at the start");
    assert!(!regex.is_match(b"123-abc"), "anchored at the end");
    assert!(!regex.is_match(b"12-ab"));
}

#[test]
fn alternatives_are_all_kept() {
    // Leftmost-first semantics would drop `ab` once `a` matched.
    let regex = Regex::compile("a|ab").unwrap();
    assert!(regex.is_match(b"a"));
    assert!(regex.is_match(b"ab"));
}

#[test]
fn unicode_classes_accept_whole_characters() {
    let regex = Regex::compile(r"\p{Greek}+").unwrap();
    assert!(regex.is_match("αβγ".as_bytes()));
    assert!(!regex.is_match(b"abc"));
    let state = RegexRecognizer::start(&regex);
    assert!(
        state.after(&regex, &[0xce]).is_some(),
        "the first byte of α"
    );
    assert!(state.after(&regex, &[0xff]).is_none(), "never UTF-8");
}

#[test]
fn a_terminal_state_completes_the_output() {
    let regex = Regex::choice(&["yes", "no"]).unwrap();
    let start = RegexRecognizer::start(&regex);
    let yes = start.after(&regex, b"yes").unwrap();
    assert!(yes.is_complete(), "nothing can follow `yes`");
    assert!(!start.after(&regex, b"ye").unwrap().is_complete());
    assert!(start.after(&regex, b"yes!").is_none());
}

#[test]
fn end_of_sequence_only_where_the_output_matches() {
    let regex = Regex::compile("[0-9]+").unwrap();
    let start = RegexRecognizer::start(&regex);
    assert_eq!(
        start.after_byteless(&regex),
        None,
        "the empty output does not match"
    );
    let digits = start.after(&regex, b"42").unwrap();
    assert!(!digits.is_complete(), "more digits may follow");
    let ended = digits.after_byteless(&regex).unwrap();
    assert!(ended.is_complete());
}

#[test]
fn choices_are_literals() {
    let regex = Regex::choice(&["a.b", "(x)"]).unwrap();
    assert!(regex.is_match(b"a.b"));
    assert!(!regex.is_match(b"axb"), "`.` is a literal dot");
    assert!(regex.is_match(b"(x)"));
}

#[test]
fn a_syntax_error_gives_its_position() {
    let err = Regex::compile("ab[0-9").unwrap_err();
    let RegexError::Syntax {
        offset,
        line,
        column,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((*offset, *line, *column), (2, 1, 3));
    assert!(
        err.to_string().contains("at byte 2 (line 1, column 3)"),
        "{err}"
    );
    let err = Regex::compile("abc\n(d").unwrap_err();
    assert!(err.to_string().contains("line 2, column 1"), "{err}");
}

#[test]
fn hostile_patterns_are_refused_quickly() {
    let started = Instant::now();
    // 2^30 DFA states if determinized.
    let err = Regex::compile("(a|b)*a(a|b){30}").unwrap_err();
    assert!(matches!(err, RegexError::Unsupported(_)), "{err:?}");
    assert!(Regex::compile("a{100000}{100000}").is_err());
    assert!(Regex::compile(&"(".repeat(1000)).is_err(), "nesting");
    assert!(Regex::compile(&"a".repeat(20_000)).is_err(), "length");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn masks_hold_the_tokens_that_keep_a_match_reachable() {
    let words = ["1", "12", "123", "-", "-a", "ab", "a", "x", "3-"];
    let mut vocab: Vec<Option<Vec<u8>>> =
        words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
    vocab.push(None); // end-of-sequence
    let regex = Arc::new(Regex::compile("[0-9]{3}-[a-z]{2}").unwrap());
    let masks = TokenMasks::new(Arc::new(TokenTrie::new(vocab, 10)), Arc::clone(&regex));
    let ids = |state: &RegexRecognizer| {
        let set = masks.allowed(state);
        (0..10).filter(|&id| set.contains(id)).collect::<Vec<u32>>()
    };
    let start = RegexRecognizer::start(&regex);
    assert_eq!(ids(&start), vec![0, 1, 2]);
    let after_12 = masks.after_token(start, 1).unwrap();
    assert_eq!(ids(&after_12), vec![0, 8]);
    let whole = start.after(&regex, b"123-ab").unwrap();
    assert!(whole.is_complete());
    assert!(ids(&whole).is_empty());
}

#[test]
fn a_regex_that_matches_nothing_is_refused() {
    let err = Regex::compile(r"a[^\s\S]").unwrap_err();
    assert!(err.to_string().contains("matches no text"), "{err}");
}

#[test]
fn a_regex_that_matches_only_the_empty_string_is_refused() {
    let err = Regex::compile("(?:)").unwrap_err();
    assert!(err.to_string().contains("only the empty string"), "{err}");
    assert!(Regex::choice(&[""]).is_err());
    assert!(
        Regex::compile("a?").is_ok(),
        "the empty string among others is fine"
    );
}
