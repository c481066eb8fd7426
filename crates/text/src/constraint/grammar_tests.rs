use std::sync::Arc;
use std::time::{Duration, Instant};

use super::grammar::{Grammar, GrammarError, GrammarRecognizer, GrammarStates};
use super::masks::{Recognizer, TokenMasks, TokenTrie};

fn states(text: &str) -> GrammarStates {
    GrammarStates::new(Arc::new(Grammar::compile(text).unwrap()))
}

fn error(text: &str) -> GrammarError {
    Grammar::compile(text).unwrap_err()
}

#[test]
fn literals_alternatives_and_references() {
    let g = states(
        r#"root ::= answer "." # a comment
           answer ::= "yes" | "no""#,
    );
    assert!(g.is_match(b"yes."));
    assert!(g.is_match(b"no."));
    assert!(!g.is_match(b"yes"));
    assert!(!g.is_match(b"maybe."));
}

#[test]
fn repetitions_and_classes() {
    let g = states(r#"root ::= [a-z]+ ("-" [0-9]{2,3}) ? [^a-z0-9] *"#);
    assert!(g.is_match(b"abc"));
    assert!(g.is_match(b"abc-12"));
    assert!(g.is_match(b"abc-123!?"));
    assert!(!g.is_match(b"abc-1"));
    assert!(!g.is_match(b"abc-1234"));
    assert!(!g.is_match(b"-12"));
    assert!(
        g.is_match("x→€".as_bytes()),
        "a negated class takes multi-byte characters"
    );
}

#[test]
fn recursion_nests() {
    let g = states(
        r#"
root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | [0-9]+
"#,
    );
    assert!(g.is_match(b"[]"));
    assert!(g.is_match(b"[1,[2,[3]],[]]"));
    assert!(!g.is_match(b"[1,]"));
    assert!(!g.is_match(b"[[1]"));
}

#[test]
fn escapes_and_any_character() {
    let g = states(r#"root ::= "\"" . "\x41\u00e9\n" [\]\-]"#);
    assert!(g.is_match("\"zAé\n]".as_bytes()));
    assert!(g.is_match("\"€Aé\n-".as_bytes()));
    assert!(!g.is_match("\"zAé\nx".as_bytes()));
}

#[test]
fn lark_forms() {
    let g = states(
        r#"start: greeting " " NAME
// Lark comment
?greeting: "hi" | "hello"
NAME: /[A-Z][a-z]*/"#,
    );
    assert!(g.is_match(b"hi Bob"));
    assert!(g.is_match(b"hello X"));
    assert!(!g.is_match(b"hi bob"));
}

#[test]
fn a_sentence_that_cannot_go_on_completes_the_output() {
    let g = states(r#"root ::= "a" "b"?"#);
    let start = GrammarRecognizer::start(&g);
    let a = start.after(&g, b"a").unwrap();
    assert!(!a.is_complete(), "`b` may follow");
    assert!(
        a.after_byteless(&g).unwrap().is_complete(),
        "or the output may end"
    );
    assert_eq!(
        start.after_byteless(&g),
        None,
        "the empty output is not a sentence"
    );
    assert!(a.after(&g, b"b").unwrap().is_complete());
}

#[test]
fn errors_give_line_and_column() {
    let e = error("root ::= \"a\"\nnext ::= [a-");
    assert_eq!((e.line, e.column), (2, 10), "{e}");
    let e = error("root ::= missing");
    assert_eq!(e.offset, 9);
    assert!(e.to_string().contains("`missing` is not defined"), "{e}");
    let e = error("item ::= \"a\"");
    assert!(e.message.contains("no `root` rule"), "{e}");
    let e = error("root ::= \"a\"{3,1}");
    assert!(e.message.contains("below the minimum"), "{e}");
    let e = error("root ::= (\"a\"");
    assert!(e.message.contains("`)`"), "{e}");
    let e = error("root ::= \"a\" /[/");
    assert!(e.message.contains("invalid regex"), "{e}");
}

#[test]
fn left_recursion_is_refused() {
    let e = error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"");
    assert!(e.message.contains("`expr` is left-recursive"), "{e}");
    assert_eq!(e.line, 2);
    // A loop through empty-matching rules that leaves nothing on the stack is fine.
    let g = states(r#"root ::= ("" | "a")* "b""#);
    assert!(g.is_match(b"aab") && g.is_match(b"b") && !g.is_match(b"ab a"));
    let g = states(r#"root ::= a  a ::= b  b ::= a | "x""#);
    assert!(g.is_match(b"x"));
}

#[test]
fn hostile_grammars_are_bounded() {
    let started = Instant::now();
    let huge = format!("root ::= {}", r#""ab"{1000} "#.repeat(300));
    let e = Grammar::compile(&huge).unwrap_err();
    assert!(e.message.contains("elements"), "{e}");
    // Compact however long its sentences: a rule repeated, not copied out.
    assert!(Grammar::compile(r#"root ::= ("a"{1000}){1000}"#).is_ok());
    assert!(Grammar::compile(&format!(
        "root ::= {}\"a\"{}",
        "(".repeat(500),
        ")".repeat(500)
    ))
    .is_err());
    // Ambiguous: every split of the a's is a parse; the stacks stay bounded.
    let g = states(r#"root ::= x* x ::= "a" | "aa" | "aaa""#);
    assert!(g.is_match(&[b'a'; 2000]));
    // Deep nesting: refused past the stack bound, never a hang.
    let g = states(r#"root ::= "(" root ")" | "x""#);
    let deep = format!("{}x{}", "(".repeat(100), ")".repeat(100));
    assert!(g.is_match(deep.as_bytes()));
    let too_deep = "(".repeat(1000);
    assert!(!g.is_match(too_deep.as_bytes()));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn masks_hold_the_tokens_that_keep_a_sentence_reachable() {
    let words = ["yes", "no", "y", "es", "n", "o.", ".", "x"];
    let mut vocab: Vec<Option<Vec<u8>>> =
        words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
    vocab.push(None); // end-of-sequence
    let g = Arc::new(states(r#"root ::= ("yes" | "no") "."?"#));
    let masks = TokenMasks::new(Arc::new(TokenTrie::new(vocab, 9)), Arc::clone(&g));
    let ids = |state: &GrammarRecognizer| {
        let set = masks.allowed(state);
        (0..9).filter(|&id| set.contains(id)).collect::<Vec<u32>>()
    };
    let start = GrammarRecognizer::start(&g);
    assert_eq!(ids(&start), vec![0, 1, 2, 4]);
    let n = masks.after_token(start, 4).unwrap();
    assert_eq!(ids(&n), vec![5]);
    let no = masks.after_token(start, 1).unwrap();
    assert_eq!(ids(&no), vec![6, 8], "`.` or end-of-sequence");
    assert!(masks.after_token(no, 6).unwrap().is_complete());
}

#[test]
fn a_root_too_wide_at_its_start_is_refused() {
    let alternatives: Vec<String> = (0..2000).map(|i| format!("\"{i}x\"")).collect();
    let e = error(&format!("root ::= {}", alternatives.join(" | ")));
    assert!(e.message.contains("too many alternatives"), "{e}");
    // Within the bound (1,024 stacks), a long list of alternatives is fine.
    let alternatives: Vec<String> = (0..500).map(|i| format!("\"{i}x\"")).collect();
    let g = states(&format!("root ::= {}", alternatives.join(" | ")));
    assert!(g.is_match(b"499x"));
}

#[test]
fn a_grammar_whose_configurations_keep_growing_is_cut_off_in_bounded_time() {
    // After n a's, one stack per nesting depth, each as deep: n² entries per configuration,
    // every configuration new.
    let g = states(r#"root ::= a+ a ::= "a" | "a" a "b""#);
    let started = Instant::now();
    let state = GrammarRecognizer::start(&g).after(&g, &[b'a'; 5000]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(state.is_none(), "refused once past the table's bounds");
    // The bounds are per request: a fresh table reads a short sentence.
    let fresh = states(r#"root ::= a+ a ::= "a" | "a" a "b""#);
    assert!(fresh.is_match(b"aaabba"));
    assert!(!fresh.is_match(b"aabbb"));
}

#[test]
fn rules_with_no_sentence_are_left_out_or_refused() {
    // `never` cannot be written whole: only its other alternative is offered, so the
    // recognizer never takes a prefix it cannot finish.
    let g = states(r#"root ::= "a" "b" never | "a" "c"  never ::= "x" never"#);
    assert!(g.is_match(b"ac"));
    let start = GrammarRecognizer::start(&g);
    assert!(start.after(&g, b"ab").is_none());
    let e = error(r#"root ::= "a" [^\x00-\U0010FFFF]"#);
    assert!(e.message.contains("no sentence"), "{e}");
}

#[test]
fn a_json_grammar_written_across_lines_reads_documents() {
    let g = states(
        r#"
root ::=
  object
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws (
    string ":" ws value
    ("," ws string ":" ws value)*
  )? "}"
array ::= "[" ws ( value ("," ws value)* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \t\n]*
"#,
    );
    assert!(g.is_match(br#"{"a":[1,-2.5,{"b":"x\"y"}],"c":null}"#));
    assert!(g.is_match(b"{ \n\"k\": true}"));
    assert!(!g.is_match(br#"{"a":}"#));
    assert!(
        !g.is_match(b"{\"a\":\"\x01\"}"),
        "a control character in a string"
    );
}

#[test]
fn a_grammar_whose_only_sentence_is_empty_is_refused() {
    let e = error(r#"root ::= "" | ("")*"#);
    assert!(
        e.message.contains("only sentence is the empty string"),
        "{e}"
    );
}
