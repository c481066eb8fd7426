//! Strings and numbers inside a schema document: their bytes, and the bounds a schema puts on
//! them (a string's length in code points, an integer's range), checked as each byte comes so
//! that no output can leave the bounds and no prefix is a dead end.

use super::super::super::lex::{Expect, InString, Number, StringByte};
use super::super::rules::*;
use super::{Lexeme, SchemaRecognizer, ANY};

impl SchemaRecognizer {
    /// A byte inside a string: `(key, at, node, len)` is the string lexeme.
    pub(super) fn string_byte(
        &mut self,
        s: &Schema,
        byte: u8,
        (key, at, node, len): (bool, InString, NodeId, u32),
    ) -> bool {
        match at.next(byte) {
            None => false,
            Some(StringByte::Inside(next)) => {
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
                };
                true
            }
            Some(StringByte::Close) if string_bounds(s, node).is_some_and(|(min, _)| len < min) => {
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

    /// A byte inside a number: `(at, integer, node, negative, magnitude)` is the number lexeme.
    pub(super) fn number_byte(
        &mut self,
        s: &Schema,
        byte: u8,
        (at, integer, node, negative, magnitude): (Number, bool, NodeId, bool, u64),
    ) -> bool {
        let fraction = matches!(byte, b'.' | b'e' | b'E');
        let range = number_range(s, node);
        match at.next(byte).filter(|_| !(integer && fraction)) {
            Some(next) => {
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
                };
                true
            }
            None if at.complete() && range.is_none_or(|r| r.contains(negative, magnitude)) => {
                self.lexeme = Lexeme::None;
                self.item_done(s);
                self.structural(s, byte)
            }
            None => false,
        }
    }

    pub(super) fn start_string(&mut self, key: bool, node: NodeId) -> bool {
        self.lexeme = Lexeme::String {
            key,
            at: InString::Text,
            node,
            len: 0,
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
        self.lexeme = Lexeme::Number {
            at,
            integer,
            node,
            negative,
            magnitude,
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

/// The `(min, max)` length of a string `node`, when it has bounds.
pub(super) fn string_bounds(s: &Schema, node: NodeId) -> Option<(u32, u32)> {
    match s.node(node) {
        Node::String { min, max } if (*min, *max) != (0, u32::MAX) => Some((*min, *max)),
        _ => None,
    }
}
