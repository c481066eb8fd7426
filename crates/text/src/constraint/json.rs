//! A byte-at-a-time recognizer of one JSON object (RFC 8259), for `response_format:
//! {"type": "json_object"}`.
//!
//! The state is a small `Copy` value, so the token mask can try a byte on a copy and throw it
//! away. Every prefix of a valid object is accepted; a byte that no valid object could continue
//! with is refused.
//!
//! Where JSON allows unbounded whitespace, a model can emit nothing else until its token budget
//! runs out (random-weight models do it at once). So whitespace is limited as llama.cpp's JSON
//! grammar limits it: none before the opening `{`, and between tokens either one space or one
//! newline followed by at most [`INDENT_PER_LEVEL`](super::lex::INDENT_PER_LEVEL) spaces or tabs
//! per open container (and never more than [`MAX_INDENT`](super::MAX_INDENT)), which allows
//! compact and conventionally indented output and no more. Nesting is limited to [`MAX_DEPTH`] containers.

/// Deepest nesting of objects and arrays accepted (the top-level object counts as one).
pub const MAX_DEPTH: u8 = 64;

use super::lex::{between_tokens, Expect, InString, Number, StringByte, Whitespace};
use super::masks::Recognizer;

/// The token being read, when the recognizer is inside one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lexeme {
    /// Between tokens.
    None,
    /// In a string; `key` when it is an object key.
    String { key: bool, at: InString },
    /// In a number.
    Number(Number),
    /// In `true`, `false` or `null`: the literal and how many of its bytes were read.
    Literal { word: u8, read: u8 },
}

const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// The state of a JSON-object recognizer; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JsonRecognizer {
    /// Bit `i` set: open container `i` (0 = outermost) is an object; clear: an array.
    objects: u64,
    depth: u8,
    expect: Expect,
    lexeme: Lexeme,
    whitespace: Whitespace,
}

impl Default for JsonRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonRecognizer {
    /// A recognizer that expects one JSON object.
    pub fn new() -> Self {
        JsonRecognizer {
            objects: 0,
            depth: 0,
            expect: Expect::Start,
            lexeme: Lexeme::None,
            whitespace: Whitespace::None,
        }
    }

    /// True once the top-level object is closed; no byte is accepted after that.
    pub fn is_complete(&self) -> bool {
        self.expect == Expect::Done
    }

    /// The state after `bytes`, or `None` if some byte is refused.
    pub fn after(self, bytes: &[u8]) -> Option<Self> {
        Recognizer::after(self, &(), bytes)
    }

    /// Consumes one byte. Returns false when no JSON object could continue with it; the state
    /// is then meaningless (callers try bytes on a copy).
    pub fn advance(&mut self, byte: u8) -> bool {
        match self.lexeme {
            Lexeme::None => self.structural(byte),
            Lexeme::String { key, at } => self.string(key, at, byte),
            Lexeme::Number(n) => match n.next(byte) {
                Some(next) => {
                    self.lexeme = Lexeme::Number(next);
                    true
                }
                // The byte ends the number (when it may end) and is read as what follows it.
                None if n.complete() => {
                    self.lexeme = Lexeme::None;
                    self.value_done();
                    self.structural(byte)
                }
                None => false,
            },
            Lexeme::Literal { word, read } => {
                let literal = LITERALS[word as usize];
                if literal[read as usize] != byte {
                    return false;
                }
                if read as usize + 1 == literal.len() {
                    self.lexeme = Lexeme::None;
                    self.value_done();
                } else {
                    self.lexeme = Lexeme::Literal {
                        word,
                        read: read + 1,
                    };
                }
                true
            }
        }
    }

    fn structural(&mut self, byte: u8) -> bool {
        if let Some(accepted) = between_tokens(self.expect, &mut self.whitespace, self.depth, byte)
        {
            return accepted;
        }
        match (self.expect, byte) {
            (Expect::Start, b'{') => self.open(true),
            (Expect::KeyOrClose | Expect::Key, b'"') => {
                self.lexeme = Lexeme::String {
                    key: true,
                    at: InString::Text,
                };
                true
            }
            (Expect::KeyOrClose, b'}') => self.close(),
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                true
            }
            (Expect::ValueOrClose, b']') => self.close(),
            (Expect::Value | Expect::ValueOrClose, _) => self.value_start(byte),
            (Expect::CommaOrClose, b',') => {
                self.expect = if self.in_object() {
                    Expect::Key
                } else {
                    Expect::Value
                };
                true
            }
            (Expect::CommaOrClose, b'}') if self.in_object() => self.close(),
            (Expect::CommaOrClose, b']') if !self.in_object() => self.close(),
            _ => false,
        }
    }

    fn value_start(&mut self, byte: u8) -> bool {
        match byte {
            b'{' => self.open(true),
            b'[' => self.open(false),
            b'"' => {
                self.lexeme = Lexeme::String {
                    key: false,
                    at: InString::Text,
                };
                true
            }
            b'-' => {
                self.lexeme = Lexeme::Number(Number::Minus);
                true
            }
            b'0' => {
                self.lexeme = Lexeme::Number(Number::Zero);
                true
            }
            b'1'..=b'9' => {
                self.lexeme = Lexeme::Number(Number::Integer);
                true
            }
            _ => match LITERALS.iter().position(|l| l[0] == byte) {
                Some(word) => {
                    self.lexeme = Lexeme::Literal {
                        word: word as u8,
                        read: 1,
                    };
                    true
                }
                None => false,
            },
        }
    }

    fn string(&mut self, key: bool, at: InString, byte: u8) -> bool {
        match at.next(byte) {
            None => false,
            Some(StringByte::Close) => {
                self.lexeme = Lexeme::None;
                if key {
                    self.expect = Expect::Colon;
                } else {
                    self.value_done();
                }
                true
            }
            Some(StringByte::Inside(next)) => {
                self.lexeme = Lexeme::String { key, at: next };
                true
            }
        }
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.objects & (1 << (self.depth - 1)) != 0
    }

    fn open(&mut self, object: bool) -> bool {
        if self.depth >= MAX_DEPTH {
            return false;
        }
        let bit = 1u64 << self.depth;
        if object {
            self.objects |= bit;
        } else {
            self.objects &= !bit;
        }
        self.depth += 1;
        self.expect = if object {
            Expect::KeyOrClose
        } else {
            Expect::ValueOrClose
        };
        true
    }

    fn close(&mut self) -> bool {
        self.depth -= 1;
        // Bits above the depth are cleared, so equal positions are equal states (one cache
        // entry for `{"a":{}` and `{"a":[]`).
        self.objects &= !(1u64 << self.depth);
        if self.depth == 0 {
            self.expect = Expect::Done;
        } else {
            self.value_done();
        }
        true
    }

    /// A value inside a container ended.
    fn value_done(&mut self) {
        self.expect = Expect::CommaOrClose;
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
