//! Parsed rules into the flat form the recognizer walks: every alternative a run of elements
//! (a byte range or a rule reference) closed by `End`. Repetitions, groups, alternations inside
//! a sequence and multi-byte character classes become rules of their own (`x*` is
//! `R ::= x R | ε`, `x{2,4}` is `x x R2`, `R2 ::= x R1 | ε`, `R1 ::= x | ε`), so the
//! recognizer knows only two kinds of element.

use std::collections::HashMap;

use regex_syntax::hir::{Class, ClassUnicode, Hir, HirKind};
use regex_syntax::utf8::Utf8Sequences;

use super::parse::{parse, unicode_class, Expr, RuleDef};
use super::{GrammarError, MAX_GRAMMAR_BYTES};

/// Most elements a compiled grammar may hold (repetitions copy their operand).
const MAX_ELEMENTS: usize = 200_000;

/// One element of an alternative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Elem {
    /// One byte in `lo..=hi`.
    Bytes(u8, u8),
    /// A sentence of rule `id`.
    Rule(u32),
    /// The alternative ends.
    End,
}

/// A compiled grammar: what [`GrammarStates`](super::GrammarStates) reads.
#[derive(Debug)]
pub struct Grammar {
    /// The text this was compiled from.
    text: String,
    /// Every alternative's elements, each run closed by `End`.
    pub(super) elems: Vec<Elem>,
    /// Per rule, where each of its alternatives starts in `elems`.
    pub(super) alts: Vec<Vec<u32>>,
    /// The rule a whole output is a sentence of (`root`, or Lark's `start`).
    pub(super) root: u32,
}

struct Compiler<'a> {
    text: &'a str,
    ids: HashMap<String, u32>,
    /// Per rule: its name (an anonymous rule has the name of the rule it came from), where it
    /// was defined, and its alternatives.
    names: Vec<String>,
    defined_at: Vec<usize>,
    rules: Vec<Vec<Vec<Elem>>>,
    size: usize,
}

/// Grammars are the same when their texts are.
impl PartialEq for Grammar {
    fn eq(&self, other: &Grammar) -> bool {
        self.text == other.text
    }
}

impl Grammar {
    /// The text this was compiled from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Bytes the compiled form holds.
    pub fn memory_usage(&self) -> usize {
        let alts: usize = self.alts.iter().map(|a| 24 + 4 * a.len()).sum();
        self.elems.len() * std::mem::size_of::<Elem>() + alts + self.text.len()
    }

    /// Parses and compiles GBNF `text`.
    pub fn compile(text: &str) -> Result<Grammar, GrammarError> {
        if text.len() > MAX_GRAMMAR_BYTES {
            return Err(GrammarError::at(
                text,
                MAX_GRAMMAR_BYTES,
                format!(
                    "the grammar is {} bytes long; at most {MAX_GRAMMAR_BYTES} are allowed",
                    text.len()
                ),
            ));
        }
        let defs = parse(text)?;
        let mut c = Compiler {
            text,
            ids: HashMap::new(),
            names: Vec::new(),
            defined_at: Vec::new(),
            rules: Vec::new(),
            size: 0,
        };
        for def in &defs {
            if c.ids.contains_key(&def.name) {
                return Err(GrammarError::at(
                    text,
                    def.at,
                    format!("rule `{}` is defined twice", def.name),
                ));
            }
            let id = c.new_rule(&def.name, def.at);
            c.ids.insert(def.name.clone(), id);
        }
        let root = ["root", "start"]
            .iter()
            .find_map(|name| c.ids.get(*name).copied())
            .ok_or_else(|| GrammarError::at(text, 0, "the grammar has no `root` rule"))?;
        for RuleDef { name, expr, .. } in &defs {
            let id = c.ids[name];
            let alts = c.alternatives(expr, id)?;
            c.rules[id as usize] = alts;
        }
        c.drop_unproductive(root)?;
        c.refuse_left_recursion()?;
        let mut elems = Vec::with_capacity(c.size);
        let alts = c
            .rules
            .iter()
            .map(|rule| {
                rule.iter()
                    .map(|alt| {
                        let start = elems.len() as u32;
                        elems.extend_from_slice(alt);
                        elems.push(Elem::End);
                        start
                    })
                    .collect()
            })
            .collect();
        let grammar = Grammar {
            text: text.to_string(),
            elems,
            alts,
            root,
        };
        let at = c.defined_at[root as usize];
        match super::recognizer::start_stacks(&grammar) {
            None => return Err(GrammarError::at(
                text,
                at,
                "the root rule opens too many alternatives or nests too deep before its first byte",
            )),
            // Generation writes at least one token.
            Some(stacks) if stacks.iter().all(Vec::is_empty) => {
                return Err(GrammarError::at(
                    text,
                    at,
                    "the grammar's only sentence is the empty string",
                ))
            }
            Some(_) => {}
        }
        Ok(grammar)
    }
}

impl Compiler<'_> {
    fn new_rule(&mut self, name: &str, at: usize) -> u32 {
        self.names.push(name.to_string());
        self.defined_at.push(at);
        self.rules.push(Vec::new());
        (self.rules.len() - 1) as u32
    }

    /// A new rule made of `alts`, named after rule `parent`.
    fn anonymous(&mut self, parent: u32, alts: Vec<Vec<Elem>>) -> Result<Elem, GrammarError> {
        let name = self.names[parent as usize].clone();
        let id = self.new_rule(&name, self.defined_at[parent as usize]);
        self.grow(alts.iter().map(|a| a.len() + 1).sum())?;
        self.rules[id as usize] = alts;
        Ok(Elem::Rule(id))
    }

    fn grow(&mut self, elements: usize) -> Result<(), GrammarError> {
        self.size += elements;
        if self.size > MAX_ELEMENTS {
            let at = self.text.len();
            return Err(GrammarError::at(
                self.text,
                at,
                format!("the grammar compiles to more than {MAX_ELEMENTS} elements (large repetition counts multiply)"),
            ));
        }
        Ok(())
    }

    fn alternatives(&mut self, expr: &Expr, parent: u32) -> Result<Vec<Vec<Elem>>, GrammarError> {
        match expr {
            Expr::Alt(alts) => alts.iter().map(|a| self.sequence(a, parent)).collect(),
            _ => Ok(vec![self.sequence(expr, parent)?]),
        }
    }

    fn sequence(&mut self, expr: &Expr, parent: u32) -> Result<Vec<Elem>, GrammarError> {
        let mut out = Vec::new();
        self.append(expr, parent, &mut out)?;
        self.grow(out.len() + 1)?;
        Ok(out)
    }

    /// Appends `expr`'s elements to a sequence.
    fn append(
        &mut self,
        expr: &Expr,
        parent: u32,
        out: &mut Vec<Elem>,
    ) -> Result<(), GrammarError> {
        match expr {
            Expr::Seq(items) => {
                for item in items {
                    self.append(item, parent, out)?;
                }
            }
            Expr::Literal(bytes) => out.extend(bytes.iter().map(|&b| Elem::Bytes(b, b))),
            Expr::Ref { name, at } => match self.ids.get(name) {
                Some(&id) => out.push(Elem::Rule(id)),
                None => {
                    return Err(GrammarError::at(
                        self.text,
                        *at,
                        format!("rule `{name}` is not defined"),
                    ))
                }
            },
            Expr::Alt(_) => {
                let alts = self.alternatives(expr, parent)?;
                out.push(self.anonymous(parent, alts)?);
            }
            Expr::Class { ranges, negated } => {
                let class = unicode_class(ranges, *negated);
                out.push(self.class(&class, parent)?);
            }
            Expr::Repeat { inner, min, max } => {
                let one = self.one_element(inner, parent)?;
                self.repeat(one, *min, *max, parent, out)?;
            }
            Expr::Regex(hir) => self.append_hir(hir, parent, out)?,
        }
        Ok(())
    }

    /// `expr` as one element (a rule of its own unless it is one already).
    fn one_element(&mut self, expr: &Expr, parent: u32) -> Result<Elem, GrammarError> {
        let mut seq = Vec::new();
        self.append(expr, parent, &mut seq)?;
        match seq[..] {
            [one] => Ok(one),
            _ => self.anonymous(parent, vec![seq]),
        }
    }

    fn repeat(
        &mut self,
        one: Elem,
        min: u32,
        max: Option<u32>,
        parent: u32,
        out: &mut Vec<Elem>,
    ) -> Result<(), GrammarError> {
        self.grow(min as usize)?;
        out.extend((0..min).map(|_| one));
        match max {
            None => {
                // R ::= one R | ε: the rule refers to itself, so it is made first.
                let Elem::Rule(id) = self.anonymous(parent, Vec::new())? else {
                    unreachable!("anonymous rules are rule references")
                };
                self.grow(3)?;
                self.rules[id as usize] = vec![vec![one, Elem::Rule(id)], vec![]];
                out.push(Elem::Rule(id));
            }
            Some(max) if max > min => {
                let mut optional = self.anonymous(parent, vec![vec![one], vec![]])?;
                for _ in 1..max - min {
                    optional = self.anonymous(parent, vec![vec![one, optional], vec![]])?;
                }
                out.push(optional);
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// A character class as a rule of its UTF-8 byte sequences (or one range of ASCII).
    fn class(&mut self, class: &ClassUnicode, parent: u32) -> Result<Elem, GrammarError> {
        let mut alts = Vec::new();
        for range in class.iter() {
            for seq in Utf8Sequences::new(range.start(), range.end()) {
                alts.push(
                    seq.as_slice()
                        .iter()
                        .map(|r| Elem::Bytes(r.start, r.end))
                        .collect::<Vec<_>>(),
                );
            }
        }
        match &alts[..] {
            [one] if one.len() == 1 => Ok(one[0]),
            _ => self.anonymous(parent, alts),
        }
    }

    /// A `/regex/` terminal's elements.
    fn append_hir(
        &mut self,
        hir: &Hir,
        parent: u32,
        out: &mut Vec<Elem>,
    ) -> Result<(), GrammarError> {
        match hir.kind() {
            HirKind::Empty => {}
            HirKind::Literal(lit) => out.extend(lit.0.iter().map(|&b| Elem::Bytes(b, b))),
            HirKind::Class(Class::Unicode(class)) => out.push(self.class(class, parent)?),
            HirKind::Class(Class::Bytes(class)) => {
                let alts = class
                    .iter()
                    .map(|r| vec![Elem::Bytes(r.start(), r.end())])
                    .collect();
                out.push(self.anonymous(parent, alts)?);
            }
            HirKind::Look(_) => {
                let at = self.defined_at[parent as usize];
                return Err(GrammarError::at(
                    self.text,
                    at,
                    "anchors and word boundaries are not supported in a grammar's regex",
                ));
            }
            HirKind::Repetition(rep) => {
                let mut seq = Vec::new();
                self.append_hir(&rep.sub, parent, &mut seq)?;
                let one = match seq[..] {
                    [one] => one,
                    _ => self.anonymous(parent, vec![seq])?,
                };
                let max = rep.max.map(|m| m.min(super::parse::MAX_REPEAT));
                self.repeat(one, rep.min.min(super::parse::MAX_REPEAT), max, parent, out)?;
            }
            HirKind::Capture(cap) => self.append_hir(&cap.sub, parent, out)?,
            HirKind::Concat(items) => {
                for item in items {
                    self.append_hir(item, parent, out)?;
                }
            }
            HirKind::Alternation(items) => {
                let mut alts = Vec::new();
                for item in items {
                    let mut seq = Vec::new();
                    self.append_hir(item, parent, &mut seq)?;
                    alts.push(seq);
                }
                out.push(self.anonymous(parent, alts)?);
            }
        }
        Ok(())
    }

    /// Drops the alternatives that can never be written whole (they use a rule with no
    /// sentence: an empty character class, a rule that only recurs), so no prefix the
    /// recognizer takes is a dead end; a root with no sentence is an error.
    fn drop_unproductive(&mut self, root: u32) -> Result<(), GrammarError> {
        let mut productive = vec![false; self.rules.len()];
        let writable = |alt: &[Elem], productive: &[bool]| {
            alt.iter().all(|e| match *e {
                Elem::Rule(r) => productive[r as usize],
                _ => true,
            })
        };
        loop {
            let mut changed = false;
            for (id, alts) in self.rules.iter().enumerate() {
                if !productive[id] && alts.iter().any(|alt| writable(alt, &productive)) {
                    productive[id] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !productive[root as usize] {
            return Err(GrammarError::at(
                self.text,
                self.defined_at[root as usize],
                "the grammar has no sentence: its rules never end in text (an empty character \
                 class, or rules that only refer to each other)",
            ));
        }
        for alts in &mut self.rules {
            alts.retain(|alt| writable(alt, &productive));
        }
        Ok(())
    }

    /// Refuses a rule that can reach itself without reading a byte in a way that deepens the
    /// stack each round (`expr ::= expr "+" term`): expanding it would never end.
    fn refuse_left_recursion(&self) -> Result<(), GrammarError> {
        match super::left_recursion::growing_loop(&self.rules) {
            None => Ok(()),
            Some(r) => Err(GrammarError::at(
                self.text,
                self.defined_at[r as usize],
                format!(
                    "rule `{}` is left-recursive: it can reach itself without reading a byte",
                    self.names[r as usize]
                ),
            )),
        }
    }
}
