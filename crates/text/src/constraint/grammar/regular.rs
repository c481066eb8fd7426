//! A grammar whose rules never refer back to themselves (directly or through others) describes
//! a regular language: every reference can be inlined, and the whole grammar is one regular
//! expression. Codex's `apply_patch` grammar is one. Such a grammar can then constrain text
//! where only a regular expression fits, such as a JSON string's characters (a `custom` tool's
//! input inside a tool call's arguments).

use std::collections::HashMap;

use regex_syntax::hir::{Capture, Class, Hir, HirKind, Repetition};

use super::parse::{parse, unicode_class, Expr};
use super::{GrammarError, MAX_GRAMMAR_BYTES};

/// Most expression nodes the inlined grammar may have (inlining can multiply a grammar's size).
const MAX_NODES: usize = 100_000;

/// The language of the grammar `text` (GBNF or the Lark forms `parse.rs` reads) as a regular
/// expression in `regex` syntax, matched whole; `Ok(None)` when a rule refers back to itself
/// or inlining grows past [`MAX_NODES`]. Errors are the grammar's own.
pub fn regular_expression(text: &str) -> Result<Option<String>, GrammarError> {
    if text.len() > MAX_GRAMMAR_BYTES {
        return Err(GrammarError::at(
            text,
            MAX_GRAMMAR_BYTES,
            "the grammar is too long",
        ));
    }
    let defs = parse(text)?;
    let rules: HashMap<&str, &Expr> = defs.iter().map(|d| (d.name.as_str(), &d.expr)).collect();
    let Some(root) = ["root", "start"].iter().find(|n| rules.contains_key(**n)) else {
        return Err(GrammarError::at(text, 0, "the grammar has no `root` rule"));
    };
    let mut inliner = Inliner {
        text,
        rules: &rules,
        open: Vec::new(),
        nodes: 0,
    };
    Ok(inliner.hir(rules[root])?.map(|hir| hir.to_string()))
}

struct Inliner<'a> {
    text: &'a str,
    rules: &'a HashMap<&'a str, &'a Expr>,
    /// The rules being inlined, outermost first.
    open: Vec<&'a str>,
    nodes: usize,
}

impl<'a> Inliner<'a> {
    /// `expr` with its references inlined; `None` when one is recursive or it grows too large.
    fn hir(&mut self, expr: &'a Expr) -> Result<Option<Hir>, GrammarError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Ok(None);
        }
        let all = |me: &mut Self, items: &'a [Expr]| -> Result<Option<Vec<Hir>>, GrammarError> {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match me.hir(item)? {
                    Some(h) => out.push(h),
                    None => return Ok(None),
                }
            }
            Ok(Some(out))
        };
        Ok(Some(match expr {
            Expr::Alt(alts) => match all(self, alts)? {
                Some(hirs) => Hir::alternation(hirs),
                None => return Ok(None),
            },
            Expr::Seq(items) => match all(self, items)? {
                Some(hirs) => Hir::concat(hirs),
                None => return Ok(None),
            },
            Expr::Literal(bytes) => Hir::literal(bytes.clone()),
            Expr::Class { ranges, negated } => {
                Hir::class(Class::Unicode(unicode_class(ranges, *negated)))
            }
            Expr::Repeat { inner, min, max } => match self.hir(inner)? {
                Some(sub) => Hir::repetition(Repetition {
                    min: *min,
                    max: *max,
                    greedy: true,
                    sub: Box::new(grouped(sub)),
                }),
                None => return Ok(None),
            },
            Expr::Regex(hir) => hir.clone(),
            Expr::Ref { name, at } => {
                let Some((&name, &body)) = self.rules.get_key_value(name.as_str()) else {
                    return Err(GrammarError::at(
                        self.text,
                        *at,
                        format!("rule `{name}` is not defined"),
                    ));
                };
                if self.open.contains(&name) {
                    return Ok(None);
                }
                self.open.push(name);
                let inlined = self.hir(body)?;
                self.open.pop();
                match inlined {
                    Some(h) => h,
                    None => return Ok(None),
                }
            }
        }))
    }
}

/// `hir` in a group when it is a repetition, which the printer would otherwise run into the
/// operator after it (`a+` then `?` prints `a+?`, a lazy `+`).
fn grouped(hir: Hir) -> Hir {
    match hir.kind() {
        HirKind::Repetition(_) => Hir::capture(Capture {
            index: 1,
            name: None,
            sub: Box::new(hir),
        }),
        _ => hir,
    }
}

#[cfg(test)]
#[path = "regular_tests.rs"]
mod tests;
