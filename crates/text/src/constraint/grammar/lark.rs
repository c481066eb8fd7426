//! Lark's directives in the grammars vLLM and Codex send: `%import common.NAME` (optionally
//! `-> ALIAS`) and `%import common (A, B, ...)` bring in Lark's common terminals, written here
//! in GBNF with the same language; `%ignore` (text skipped between any two tokens) would
//! change what the grammar means here and is refused, as is any other directive or module.

use super::parse::{parse_definition, RuleDef};
use super::GrammarError;

/// Lark's `common.lark` terminals, each self-contained.
const COMMON: &[(&str, &str)] = &[
    ("DIGIT", "[0-9]"),
    ("HEXDIGIT", "[0-9a-fA-F]"),
    ("INT", "[0-9]+"),
    ("SIGNED_INT", "[+-]? [0-9]+"),
    ("DECIMAL", "[0-9]+ \".\" [0-9]* | \".\" [0-9]+"),
    (
        "FLOAT",
        "[0-9]+ [eE] [+-]? [0-9]+ | ([0-9]+ \".\" [0-9]* | \".\" [0-9]+) ([eE] [+-]? [0-9]+)?",
    ),
    (
        "SIGNED_FLOAT",
        "[+-]? ([0-9]+ [eE] [+-]? [0-9]+ | ([0-9]+ \".\" [0-9]* | \".\" [0-9]+) ([eE] [+-]? [0-9]+)?)",
    ),
    (
        "NUMBER",
        "[0-9]+ ([eE] [+-]? [0-9]+)? | ([0-9]+ \".\" [0-9]* | \".\" [0-9]+) ([eE] [+-]? [0-9]+)?",
    ),
    (
        "SIGNED_NUMBER",
        "[+-]? ([0-9]+ ([eE] [+-]? [0-9]+)? | ([0-9]+ \".\" [0-9]* | \".\" [0-9]+) ([eE] [+-]? [0-9]+)?)",
    ),
    ("ESCAPED_STRING", "\"\\\"\" ([^\"\\\\\\n] | \"\\\\\" [^\\n])* \"\\\"\""),
    ("LCASE_LETTER", "[a-z]"),
    ("UCASE_LETTER", "[A-Z]"),
    ("LETTER", "[a-zA-Z]"),
    ("WORD", "[a-zA-Z]+"),
    ("CNAME", "[_a-zA-Z] [_a-zA-Z0-9]*"),
    ("WS_INLINE", "[ \\t]+"),
    ("WS", "[ \\t\\x0c\\r\\n]+"),
    ("CR", "\"\\r\""),
    ("LF", "\"\\n\""),
    ("NEWLINE", "(\"\\r\"? \"\\n\")+"),
];

/// The terminals a directive line (starting at byte `at` of `text`) imports, as `(name,
/// alias, at)`.
pub(super) fn directive(
    text: &str,
    at: usize,
    line: &str,
) -> Result<Vec<(String, String, usize)>, GrammarError> {
    let line = line.split("//").next().unwrap_or(line).trim_end();
    let error = |message: &str| Err(GrammarError::at(text, at, message));
    if line.starts_with("%ignore") {
        return error(
            "Lark's `%ignore` (text skipped between tokens) is not supported: write the \
             whitespace into the rules",
        );
    }
    let Some(rest) = line.strip_prefix("%import") else {
        return error("the only directive supported is `%import common...`");
    };
    let rest = rest.trim();
    let known = |name: &str| COMMON.iter().any(|(n, _)| *n == name);
    if let Some(list) = rest.strip_prefix("common") {
        let list = list.trim();
        let names: Vec<(String, String)> = if let Some(one) = list.strip_prefix('.') {
            let (name, alias) = match one.split_once("->") {
                Some((name, alias)) => (name.trim(), alias.trim()),
                None => (one.trim(), one.trim()),
            };
            vec![(name.to_string(), alias.to_string())]
        } else if let Some(inner) = list.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
            (inner.split(',').map(str::trim))
                .filter(|n| !n.is_empty())
                .map(|n| (n.to_string(), n.to_string()))
                .collect()
        } else {
            return error("expected `%import common.NAME` or `%import common (A, B)`");
        };
        if let Some((name, _)) = names.iter().find(|(n, _)| !known(n)) {
            return Err(GrammarError::at(
                text,
                at,
                format!("`{name}` is not one of Lark's common terminals"),
            ));
        }
        return Ok(names.into_iter().map(|(n, a)| (n, a, at)).collect());
    }
    error("only Lark's `common` terminals can be imported")
}

/// The rule of common terminal `name` (known to exist), as defined at byte `at`.
pub(super) fn common_terminal(at: usize, name: &str) -> RuleDef {
    let (_, body) = COMMON
        .iter()
        .find(|(n, _)| *n == name)
        .expect("checked when imported");
    let mut def = parse_definition(&format!("{name} ::= {body}"));
    def.at = at;
    def
}
