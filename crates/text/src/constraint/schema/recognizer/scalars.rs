//! Strings and numbers inside a schema document: their bytes, and the bounds a schema puts on
//! them (a string's length in code points, an integer's range), checked as each byte comes so
//! that no output can leave the bounds and no prefix is a dead end.

use super::super::super::lex::{Expect, InString, Number, StringByte};
use super::super::rules::*;
use super::{Lexeme, SchemaRecognizer, ANY};
use crate::constraint::masks::Recognizer;
use crate::constraint::regex::{Regex, RegexRecognizer};

impl SchemaRecognizer {
    /// A byte inside a string: `(key, at, node, len, pattern)` is the string lexeme.
    pub(super) fn string_byte(
        &mut self,
        s: &Schema,
        byte: u8,
        (key, at, node, len, pattern): (bool, InString, NodeId, u32, Option<RegexRecognizer>),
    ) -> bool {
        match at.next(byte) {
            None => false,
            Some(StringByte::Inside(next)) => {
                let mut pattern = pattern;
                if let (Some(state), Some(regex)) = (pattern.as_mut(), string_pattern(s, node)) {
                    // The characters the length bounds leave after this one: room for at
                    // most so many, and a need for at least so many.
                    let after = len + u32::from(at == InString::Text);
                    let bounds = string_bounds(s, node);
                    let room = bounds.map(|(_, max)| max.saturating_sub(after));
                    let need = bounds.map_or(0, |(min, _)| min.saturating_sub(after));
                    if !pattern_byte(state, regex, at, byte, (room, need)) {
                        return false;
                    }
                }
                let mut len = len;
                if let Some((_, max)) = string_bounds(s, node) {
                    // A character starts with any byte read in plain text (the `\` of a
                    // low surrogate comes after its high half: no new character).
                    if at == InString::Text {
                        if len >= max {
                            return false;
                        }
                        len += 1;
                    }
                }
                self.lexeme = Lexeme::String {
                    key,
                    at: next,
                    node,
                    len,
                    pattern,
                };
                true
            }
            Some(StringByte::Close) if string_bounds(s, node).is_some_and(|(min, _)| len < min) => {
                false
            }
            Some(StringByte::Close)
                if pattern.is_some_and(|state| {
                    string_pattern(s, node).is_some_and(|regex| !state.matches(regex))
                }) =>
            {
                false
            }
            Some(StringByte::Close) => {
                self.lexeme = Lexeme::None;
                if key {
                    self.expect = Expect::Colon;
                    self.next = ANY;
                } else {
                    self.item_done(s);
                }
                true
            }
        }
    }

    /// A byte inside a number: `(at, integer, node, negative, magnitude)` and `decimal` are
    /// the number lexeme.
    pub(super) fn number_byte(
        &mut self,
        s: &Schema,
        byte: u8,
        (at, integer, node, negative, magnitude): (Number, bool, NodeId, bool, u64),
        decimal: Option<RegexRecognizer>,
    ) -> bool {
        let fraction = matches!(byte, b'.' | b'e' | b'E');
        let range = number_range(s, node);
        match at.next(byte).filter(|_| !(integer && fraction)) {
            Some(next) => {
                let mut decimal = decimal;
                if let (Some(state), Some(regex)) = (decimal.as_mut(), number_pattern(s, node)) {
                    if !state.advance(regex, byte) {
                        return false;
                    }
                }
                let mut magnitude = magnitude;
                if let Some(range) = range {
                    let digit = u64::from(byte - b'0');
                    magnitude = magnitude.saturating_mul(10).saturating_add(digit);
                    if !range.reachable(negative, magnitude, next == Number::Zero) {
                        return false;
                    }
                }
                self.lexeme = Lexeme::Number {
                    at: next,
                    integer,
                    node,
                    negative,
                    magnitude,
                    decimal,
                };
                true
            }
            None if at.complete()
                && range.is_none_or(|r| r.contains(negative, magnitude))
                && decimal.is_none_or(|state| {
                    number_pattern(s, node).is_none_or(|regex| state.matches(regex))
                }) =>
            {
                self.lexeme = Lexeme::None;
                self.item_done(s);
                self.structural(s, byte)
            }
            None => false,
        }
    }

    pub(super) fn start_string(&mut self, s: &Schema, key: bool, node: NodeId) -> bool {
        self.lexeme = Lexeme::String {
            key,
            at: InString::Text,
            node,
            len: 0,
            pattern: string_pattern(s, node).map(RegexRecognizer::start),
        };
        true
    }

    pub(super) fn start_number(
        &mut self,
        s: &Schema,
        node: NodeId,
        integer: bool,
        byte: u8,
    ) -> bool {
        let at = match byte {
            b'-' => Number::Minus,
            b'0' => Number::Zero,
            _ => Number::Integer,
        };
        let negative = byte == b'-';
        let magnitude = match byte {
            b'0'..=b'9' => u64::from(byte - b'0'),
            _ => 0,
        };
        if let Some(range) = number_range(s, node) {
            // After `-` no digit is read yet: some negative integer must be in range.
            let fits = match negative {
                true => range.min < 0,
                false => range.reachable(false, magnitude, at == Number::Zero),
            };
            if !fits {
                return false;
            }
        }
        let (negative, magnitude) = match number_range(s, node) {
            Some(_) => (negative, magnitude),
            None => (false, 0),
        };
        let mut decimal = None;
        if let Some(regex) = number_pattern(s, node) {
            let mut state = RegexRecognizer::start(regex);
            if !state.advance(regex, byte) {
                return false;
            }
            decimal = Some(state);
        }
        self.lexeme = Lexeme::Number {
            at,
            integer,
            node,
            negative,
            magnitude,
            decimal,
        };
        true
    }
}

/// The bounds of an integer `node`, when it has any.
fn number_range(s: &Schema, node: NodeId) -> Option<IntRange> {
    match s.node(node) {
        Node::Number { range, .. } if *range != IntRange::ANY => Some(*range),
        _ => None,
    }
}

/// The range expression of a bounded non-integer number `node`, when it has one.
fn number_pattern(s: &Schema, node: NodeId) -> Option<&Regex> {
    match s.node(node) {
        Node::Number {
            decimal: Some(i), ..
        } => Some(&s.patterns[usize::from(*i)]),
        _ => None,
    }
}

/// The `(min, max)` length of a string `node`, when it has bounds.
pub(super) fn string_bounds(s: &Schema, node: NodeId) -> Option<(u32, u32)> {
    match s.node(node) {
        Node::String { min, max, .. } if (*min, *max) != (0, u32::MAX) => Some((*min, *max)),
        _ => None,
    }
}

/// The compiled `pattern` of a string `node`, when it has one.
pub(super) fn string_pattern(s: &Schema, node: NodeId) -> Option<&Regex> {
    match s.node(node) {
        Node::String {
            pattern: Some(i), ..
        } => Some(&s.patterns[usize::from(*i)]),
        _ => None,
    }
}

/// Feeds a string's byte, read in state `at`, to its pattern: characters as they are, escapes
/// as the character they stand for. A `\u` escape is refused in a string with a pattern (the
/// character can be written as itself). With `room` (the most characters a length limit
/// leaves after this one) and `need` (the fewest), the pattern must stay matchable within them:
/// without that, a pattern that could go on would be cut short by `maxLength`, or one that must
/// end would end before `minLength`, a dead end either way.
fn pattern_byte(
    state: &mut RegexRecognizer,
    regex: &Regex,
    at: InString,
    byte: u8,
    (room, need): (Option<u32>, u32),
) -> bool {
    let fits = |next: &RegexRecognizer| {
        room.is_none_or(|r| regex.chars_to_match(next) <= r)
            && regex.most_chars_to_match(next) >= need
    };
    let decoded = match at {
        // An escape opens only where some escaped character can continue the pattern.
        InString::Text if byte == b'\\' => {
            return [b'"', b'\\', b'/', 0x08, 0x0c, b'\n', b'\r', b'\t']
                .iter()
                .any(|&c| {
                    let mut next = *state;
                    next.advance(regex, c) && fits(&next)
                })
        }
        InString::Text | InString::Utf8 { .. } => byte,
        InString::Escape => match byte {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return false,
            other => other,
        },
        _ => return false,
    };
    state.advance(regex, decoded) && fits(state)
}
