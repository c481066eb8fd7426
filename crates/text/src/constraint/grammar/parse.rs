//! The grammar text into rules of expressions: GBNF (llama.cpp's: `name ::= ...`, `|`,
//! grouping, `*` `+` `?` `{m,n}`, string literals, `[...]` classes with `^` and ranges, `.`,
//! rule references, `#` comments) and the Lark-like forms vLLM and Codex send where they are
//! the same idea (`name: ...`, `//` comments, `/regex/` terminals, `-> alias`, `%import` of
//! Lark's common terminals; see `lark.rs`).
//!
//! Newlines separate nothing: a rule ends where the next `name ::=` (or `name:`) begins.

use super::GrammarError;

/// One rule's right-hand side.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    /// One of the alternatives (at least two).
    Alt(Vec<Expr>),
    /// Each in turn (possibly none: the empty string).
    Seq(Vec<Expr>),
    /// These bytes exactly.
    Literal(Vec<u8>),
    /// One character in (or, `negated`, not in) the inclusive code-point ranges.
    Class {
        ranges: Vec<(u32, u32)>,
        negated: bool,
    },
    /// Another rule, by name, referenced at byte `at` of the text.
    Ref { name: String, at: usize },
    /// `min` to `max` (unbounded when `None`) repetitions.
    Repeat {
        inner: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
    /// A `/regex/` terminal.
    Regex(regex_syntax::hir::Hir),
}

/// The characters of an [`Expr::Class`].
pub(super) fn unicode_class(
    ranges: &[(u32, u32)],
    negated: bool,
) -> regex_syntax::hir::ClassUnicode {
    use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
    let ranges = ranges.iter().filter_map(|&(lo, hi)| {
        Some(ClassUnicodeRange::new(
            char::from_u32(lo)?,
            char::from_u32(hi)?,
        ))
    });
    let mut class = ClassUnicode::new(ranges);
    if negated {
        class.negate();
    }
    class
}

/// A parsed rule: its name, where its definition starts and its expression.
#[derive(Debug, Clone)]
pub(super) struct RuleDef {
    pub name: String,
    pub at: usize,
    pub expr: Expr,
}

/// Most repetitions one `{m,n}` may ask for.
pub(super) const MAX_REPEAT: u32 = 1000;
/// Deepest nesting of groups.
const MAX_NESTING: usize = 64;

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    nesting: usize,
}

/// Parses every rule of `text`.
pub(super) fn parse(text: &str) -> Result<Vec<RuleDef>, GrammarError> {
    let mut p = Parser {
        text,
        pos: 0,
        nesting: 0,
    };
    let mut rules = Vec::new();
    let mut imports = Vec::new();
    p.skip_space();
    while p.pos < text.len() {
        let at = p.pos;
        if p.peek() == Some(b'%') {
            let line = p.rest().split('\n').next().unwrap_or("");
            p.pos += line.len();
            imports.extend(super::lark::directive(text, at, line)?);
            p.skip_space();
            continue;
        }
        // Lark's `?rule:` and `!rule:` shape its parse tree, not its language.
        if matches!(p.peek(), Some(b'?' | b'!')) {
            p.pos += 1;
        }
        let name = p.name().ok_or_else(|| p.error("expected a rule name"))?;
        p.skip_space();
        if !p.definition_operator() {
            return Err(p.error(format!("expected `::=` after rule name `{name}`")));
        }
        let expr = p.alternatives()?;
        rules.push(RuleDef { name, at, expr });
        p.skip_space();
    }
    for (name, alias, at) in imports {
        if !rules.iter().any(|r| r.name == alias) {
            let mut def = super::lark::common_terminal(at, &name);
            def.name = alias;
            rules.push(def);
        }
    }
    Ok(rules)
}

/// The one rule of `definition` (GBNF written here, not by a client).
pub(super) fn parse_definition(definition: &str) -> RuleDef {
    let mut rules = parse(definition).expect("built-in definitions parse");
    rules.pop().expect("one rule")
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

impl<'a> Parser<'a> {
    fn error(&self, message: impl Into<String>) -> GrammarError {
        GrammarError::at(self.text, self.pos, message)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    /// Skips whitespace (newlines included) and comments.
    fn skip_space(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with('#') || trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else {
                return;
            }
        }
    }

    fn name(&mut self) -> Option<String> {
        let len = self.rest().bytes().take_while(|&b| is_name_byte(b)).count();
        (len > 0).then(|| {
            let name = self.rest()[..len].to_string();
            self.pos += len;
            name
        })
    }

    /// `::=`, or Lark's `:` (not `::`).
    fn definition_operator(&mut self) -> bool {
        if self.rest().starts_with("::=") {
            self.pos += 3;
            true
        } else if self.rest().starts_with(':') && !self.rest().starts_with("::") {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Whether a rule definition starts here (`name ::=`), which ends the current rule.
    fn at_definition(&self) -> bool {
        let rest = self.rest().strip_prefix(['?', '!']).unwrap_or(self.rest());
        let len = rest.bytes().take_while(|&b| is_name_byte(b)).count();
        if len == 0 {
            return false;
        }
        let after = rest[len..].trim_start_matches([' ', '\t']);
        after.starts_with("::=") || (after.starts_with(':') && !after.starts_with("::"))
    }

    fn alternatives(&mut self) -> Result<Expr, GrammarError> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            alts.push(self.sequence()?);
        }
        Ok(match alts.len() {
            1 => alts.pop().unwrap_or(Expr::Seq(Vec::new())),
            _ => Expr::Alt(alts),
        })
    }

    fn sequence(&mut self) -> Result<Expr, GrammarError> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                None | Some(b'|') | Some(b')') | Some(b'%') => break,
                Some(_) if self.at_definition() => break,
                // Lark's `-> alias` names an alternative's tree node: no change to the language.
                Some(b'-') if self.rest().starts_with("->") => {
                    self.pos += 2;
                    self.skip_space();
                    if self.name().is_none() {
                        return Err(self.error("expected a name after `->`"));
                    }
                    continue;
                }
                Some(_) => {}
            }
            let atom = self.atom()?;
            items.push(self.postfix(atom)?);
        }
        Ok(match items.len() {
            1 => items.pop().unwrap_or(Expr::Seq(Vec::new())),
            _ => Expr::Seq(items),
        })
    }

    fn atom(&mut self) -> Result<Expr, GrammarError> {
        let at = self.pos;
        match self.peek() {
            Some(b'"') | Some(b'\'') => self.literal(),
            Some(b'[') => self.class(),
            Some(b'/') => self.regex(),
            Some(b'.') => {
                self.pos += 1;
                Ok(Expr::Class {
                    ranges: Vec::new(),
                    negated: true,
                })
            }
            Some(b'(') => {
                self.nesting += 1;
                if self.nesting > MAX_NESTING {
                    return Err(self.error(format!("groups nest deeper than {MAX_NESTING}")));
                }
                self.pos += 1;
                let inner = self.alternatives()?;
                self.skip_space();
                if self.peek() != Some(b')') {
                    return Err(self.error("expected `)`"));
                }
                self.pos += 1;
                self.nesting -= 1;
                Ok(inner)
            }
            _ => match self.name() {
                Some(name) => Ok(Expr::Ref { name, at }),
                None => {
                    Err(self.error("expected a string, a character class, a group or a rule name"))
                }
            },
        }
    }

    /// Repetition operators after an atom, on its line (llama.cpp allows `"a" *`).
    fn postfix(&mut self, mut expr: Expr) -> Result<Expr, GrammarError> {
        loop {
            let blanks = self.rest().len() - self.rest().trim_start_matches([' ', '\t']).len();
            let next = self.text.as_bytes().get(self.pos + blanks).copied();
            if matches!(next, Some(b'*' | b'+' | b'?' | b'{')) {
                self.pos += blanks;
            }
            let (min, max) = match self.peek() {
                Some(b'*') => (0, None),
                Some(b'+') => (1, None),
                Some(b'?') => (0, Some(1)),
                Some(b'{') => {
                    let (min, max) = self.braces()?;
                    expr = Expr::Repeat {
                        inner: Box::new(expr),
                        min,
                        max,
                    };
                    continue;
                }
                _ => return Ok(expr),
            };
            self.pos += 1;
            expr = Expr::Repeat {
                inner: Box::new(expr),
                min,
                max,
            };
        }
    }

    /// `{m}`, `{m,}`, `{m,n}`, `{,n}`.
    fn braces(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        let start = self.pos;
        let end = self
            .rest()
            .find('}')
            .ok_or_else(|| self.error("expected `}`"))?;
        let body = &self.rest()[1..end];
        let number = |s: &str| -> Result<Option<u32>, GrammarError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse::<u32>() {
                Ok(n) if n <= MAX_REPEAT => Ok(Some(n)),
                _ => Err(GrammarError::at(
                    self.text,
                    start,
                    format!("a repetition count must be a number up to {MAX_REPEAT}"),
                )),
            }
        };
        let (min, max) = match body.split_once(',') {
            None => {
                let n = number(body)?.ok_or_else(|| self.error("expected a number"))?;
                (n, Some(n))
            }
            Some((lo, hi)) => (number(lo)?.unwrap_or(0), number(hi)?),
        };
        if max.is_some_and(|max| max < min) {
            return Err(self.error(format!(
                "repetition {{{body}}}: the maximum is below the minimum"
            )));
        }
        self.pos += end + 1;
        Ok((min, max))
    }

    /// A quoted string with GBNF's escapes; Lark's `i` suffix (case-insensitive) is refused.
    fn literal(&mut self) -> Result<Expr, GrammarError> {
        let (quote, open) = (self.peek().unwrap_or(b'"'), self.pos);
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            let c = self.char_or_escape(quote, open)?;
            match c {
                None => break,
                Some(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        Ok(Expr::Literal(bytes))
    }

    /// The next character of a literal or class, escapes decoded; `None` at the closing
    /// `end` (consumed).
    fn char_or_escape(&mut self, end: u8, open: usize) -> Result<Option<char>, GrammarError> {
        let at = self.pos;
        let mut chars = self.rest().chars();
        let c = chars
            .next()
            .ok_or_else(|| GrammarError::at(self.text, open, "unterminated string or class"))?;
        self.pos += c.len_utf8();
        if c as u32 == u32::from(end) {
            return Ok(None);
        }
        if c != '\\' {
            return Ok(Some(c));
        }
        let e = chars
            .next()
            .ok_or_else(|| GrammarError::at(self.text, at, "unterminated escape"))?;
        self.pos += e.len_utf8();
        let hex = |p: &mut Self, digits: usize| -> Result<char, GrammarError> {
            let s = p.rest().get(..digits).unwrap_or("");
            let c = u32::from_str_radix(s, 16)
                .ok()
                .filter(|_| s.len() == digits)
                .and_then(char::from_u32)
                .ok_or_else(|| GrammarError::at(p.text, at, "invalid hexadecimal escape"))?;
            p.pos += digits;
            Ok(c)
        };
        Ok(Some(match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '0' => '\0',
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            '\\' | '"' | '\'' | '[' | ']' | '-' | '^' | '/' => e,
            _ => {
                return Err(GrammarError::at(
                    self.text,
                    at,
                    format!("unknown escape `\\{e}`"),
                ))
            }
        }))
    }

    fn class(&mut self) -> Result<Expr, GrammarError> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        while let Some(lo) = self.char_or_escape(b']', open)? {
            let mut hi = lo;
            if self.peek() == Some(b'-') && self.rest().as_bytes().get(1) != Some(&b']') {
                self.pos += 1;
                hi = self
                    .char_or_escape(b']', open)?
                    .ok_or_else(|| self.error("a range needs an end"))?;
                if hi < lo {
                    return Err(self.error("a range's end is below its start"));
                }
            }
            ranges.push((u32::from(lo), u32::from(hi)));
        }
        Ok(Expr::Class { ranges, negated })
    }

    /// `/regex/` (Lark): the regex as an expression; flags after it are refused.
    fn regex(&mut self) -> Result<Expr, GrammarError> {
        let start = self.pos + 1;
        let mut end = start;
        let bytes = self.text.as_bytes();
        while end < bytes.len() && bytes[end] != b'/' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        if end >= bytes.len() {
            return Err(self.error("unterminated `/regex/`"));
        }
        let pattern = &self.text[start..end];
        let hir = regex_syntax::ParserBuilder::new()
            .nest_limit(MAX_NESTING as u32)
            .build()
            .parse(pattern)
            .map_err(|e| {
                let (offset, message) = match &e {
                    regex_syntax::Error::Parse(e) => (e.span().start.offset, e.kind().to_string()),
                    regex_syntax::Error::Translate(e) => {
                        (e.span().start.offset, e.kind().to_string())
                    }
                    _ => (0, e.to_string()),
                };
                GrammarError::at(
                    self.text,
                    start + offset,
                    format!("invalid regex: {message}"),
                )
            })?;
        self.pos = end + 1;
        Ok(Expr::Regex(hir))
    }
}
