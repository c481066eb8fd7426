use super::*;
use crate::constraint::grammar::Grammar;
use crate::constraint::grammar::GrammarStates;

/// Codex's `apply_patch` grammar, as its CLI sends it in a `custom` tool's `format`.
pub(crate) const APPLY_PATCH: &str =
    include_str!("../../../../../fixtures/grammars/codex_apply_patch.lark");

fn whole(pattern: &str) -> regex::Regex {
    regex::Regex::new(&format!("^(?:{pattern})$")).unwrap()
}

/// The grammar's own recognizer, as the oracle for the expression.
fn grammar_accepts(grammar: &std::sync::Arc<Grammar>, text: &str) -> bool {
    GrammarStates::new(grammar.clone()).is_match(text.as_bytes())
}

#[test]
fn apply_patch_is_regular_and_means_the_same() {
    let pattern = regular_expression(APPLY_PATCH).unwrap().expect("regular");
    let re = whole(&pattern);
    let grammar = std::sync::Arc::new(Grammar::compile(APPLY_PATCH).unwrap());
    let good = [
        "*** Begin Patch\n*** Add File: a.txt\n+hello\n+\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: b.rs\n*** End Patch",
        "*** Begin Patch\n*** Update File: src/x.py\n*** Move to: src/y.py\n@@ def f():\n-    return 1\n+    return 2\n \n*** End of File\n*** End Patch\n",
    ];
    let bad = [
        "",
        "*** Begin Patch\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: a.txt\nhello\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: b.rs\n*** End Patch\n\n",
    ];
    for text in good {
        assert!(re.is_match(text), "{text:?}");
        assert!(grammar_accepts(&grammar, text), "{text:?}");
    }
    for text in bad {
        assert!(!re.is_match(text), "{text:?}");
        assert!(!grammar_accepts(&grammar, text), "{text:?}");
    }
}

#[test]
fn recursive_grammars_are_not_regular() {
    let nested = "root ::= \"(\" root? \")\"";
    assert_eq!(regular_expression(nested).unwrap(), None);
    let indirect = "root ::= a\na ::= \"x\" b?\nb ::= \"[\" a \"]\"";
    assert_eq!(regular_expression(indirect).unwrap(), None);
    // Used twice but never inside itself: regular.
    let shared = "root ::= item (\",\" item)*\nitem ::= [a-z]+ | [0-9]{1,3}";
    let re = whole(&regular_expression(shared).unwrap().unwrap());
    assert!(re.is_match("ab,12,c"));
    assert!(!re.is_match("ab,,c"));
    assert!(!re.is_match("1234"));
}

#[test]
fn lark_directives() {
    let imported = "start: INT (\",\" WS? SIGNED_NUMBER)*\n%import common (INT, WS, SIGNED_NUMBER)";
    let pattern = regular_expression(imported).unwrap().unwrap();
    let re = whole(&pattern);
    assert!(re.is_match("12, -3.5e2,7"));
    assert!(!re.is_match("12,,"));
    // `WS?` is optional, not a lazy `WS+`.
    assert!(re.is_match("1,2"));
    let ignore = "start: \"a\"+\n%ignore \" \"";
    let err = regular_expression(ignore).unwrap_err();
    assert!(err.message.contains("%ignore"), "{err}");
    assert_eq!(err.line, 2);
    let unknown = "start: FOO\n%import common.FOO";
    assert!(Grammar::compile(unknown)
        .unwrap_err()
        .message
        .contains("FOO"));
    let other = "start: X\n%import mylib.X";
    assert!(Grammar::compile(other).is_err());
}

/// Every string of up to six characters over a small alphabet: the expression and the
/// grammar's recognizer agree, for grammars with nested repetitions, optional parts,
/// classes, shared rules and `/regex/` terminals.
#[test]
fn expression_and_recognizer_agree_on_every_short_string() {
    let grammars = [
        "root ::= (\"a\" | \"b\"+)? \",\"* item\nitem ::= [0-1]{1,2} | \"ab\"",
        "start: x (\",\" x)*\nx: /a+b?/ | \"1\"+\n",
        "root ::= ((\"a\" \"b\"?)+ \"1\")? [^a,]*",
    ];
    let alphabet = ['a', 'b', ',', '1'];
    for text in grammars {
        let re = whole(&regular_expression(text).unwrap().unwrap());
        let grammar = std::sync::Arc::new(Grammar::compile(text).unwrap());
        let mut strings = vec![String::new()];
        for _ in 0..6 {
            let longer: Vec<String> = (strings.iter())
                .filter(|s| s.chars().count() == strings.last().unwrap().chars().count())
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            strings.extend(longer);
        }
        for s in &strings {
            assert_eq!(
                re.is_match(s),
                grammar_accepts(&grammar, s),
                "{text:?} on {s:?}"
            );
        }
    }
}
