//! What both JSON recognizers share: the structural expectations, strings (escapes and UTF-8
//! validated), numbers and the whitespace allowed between tokens.

/// Most spaces or tabs accepted after a newline between tokens, at any depth.
pub const MAX_INDENT: u8 = 20;
/// Most spaces or tabs a newline may be followed by per level of nesting: a document indented by
/// 2 or 4 spaces (or a tab) a level fits, but no run of whitespace beyond what its depth needs.
pub const INDENT_PER_LEVEL: u8 = 4;

/// The whitespace read since the last token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Whitespace {
    /// None yet.
    None,
    /// One space: no more whitespace may follow.
    Space,
    /// A newline and this many spaces or tabs.
    Newline(u8),
}

/// Where a number is, by the grammar `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Number {
    /// After `-`: a digit must follow.
    Minus,
    /// A leading `0`: no more integer digits.
    Zero,
    /// Integer digits after a nonzero first digit.
    Integer,
    /// After `.`: a digit must follow.
    Dot,
    /// Fraction digits.
    Fraction,
    /// After `e`/`E`: a sign or digit must follow.
    Exponent,
    /// After the exponent's sign: a digit must follow.
    ExponentSign,
    /// Exponent digits.
    ExponentDigits,
}

impl Number {
    /// Whether the number may end here.
    pub(super) fn complete(self) -> bool {
        matches!(
            self,
            Number::Zero | Number::Integer | Number::Fraction | Number::ExponentDigits
        )
    }

    /// The state after `byte`, or `None` when `byte` is not part of the number.
    pub(super) fn next(self, byte: u8) -> Option<Number> {
        use Number::*;
        let digit = byte.is_ascii_digit();
        Some(match (self, byte) {
            (Minus, b'0') => Zero,
            (Minus, _) if digit => Integer,
            (Integer, _) if digit => Integer,
            (Zero | Integer, b'.') => Dot,
            (Dot | Fraction, _) if digit => Fraction,
            (Zero | Integer | Fraction, b'e' | b'E') => Exponent,
            (Exponent, b'+' | b'-') => ExponentSign,
            (Exponent | ExponentSign | ExponentDigits, _) if digit => ExponentDigits,
            _ => return None,
        })
    }
}

/// Inside a string: what the next byte must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum InString {
    /// Plain characters, `\` or the closing `"`.
    Text,
    /// After `\`: one of `"\/bfnrtu`.
    Escape,
    /// `\u` with `left` hex digits still to come (4..=1).
    Hex { left: u8, surrogate: Surrogate },
    /// A high surrogate escape (`\ud800`-`\udbff`) ended: its low half's `\` must follow.
    AfterHigh,
    /// The `\` of a low surrogate escape: `u` must follow.
    LowEscape,
    /// A multi-byte UTF-8 character with `left` continuation bytes to come, the next in
    /// `lo..=hi` (the first continuation's range excludes overlong forms and surrogates).
    Utf8 { left: u8, lo: u8, hi: u8 },
}

/// What the recognizer expects at the structural level (outside any string, number or literal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Expect {
    /// The opening `{` of the document.
    Start,
    /// Just after `{`: a key or `}`.
    KeyOrClose,
    /// Just after `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:` or `,` in an array: a value.
    Value,
    /// Just after `[`: a value or `]`.
    ValueOrClose,
    /// After a value inside a container: `,` or the container's closing bracket.
    CommaOrClose,
    /// The top-level object is closed; nothing more may follow.
    Done,
}

/// What a `\u` escape's digits so far say about UTF-16 surrogates: JSON's grammar allows a lone
/// half, but most parsers (serde_json among them) refuse one, so halves must come in pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Surrogate {
    /// No digit read yet.
    Unknown,
    /// Not a surrogate.
    No,
    /// First digit `d`: the second decides.
    D,
    /// `\ud800`-`\udbff` so far: a low half must follow.
    High,
    /// The low half of a pair, no digit read yet: must be `\udc00`-`\udfff`.
    NeedLow,
    /// The low half, first digit `d` read.
    NeedLowD,
}

/// What a byte inside a string does.
pub(super) enum StringByte {
    /// The string goes on, now at this point.
    Inside(InString),
    /// The closing quote.
    Close,
}

impl InString {
    /// The effect of `byte`, or `None` when no string continues with it.
    pub(super) fn next(self, byte: u8) -> Option<StringByte> {
        let utf8 = |left, lo, hi| InString::Utf8 { left, lo, hi };
        let next = match self {
            InString::Text => match byte {
                b'"' => return Some(StringByte::Close),
                b'\\' => InString::Escape,
                0x00..=0x1f => return None,
                0x20..=0x7f => InString::Text,
                0xc2..=0xdf => utf8(1, 0x80, 0xbf),
                0xe0 => utf8(2, 0xa0, 0xbf),
                0xed => utf8(2, 0x80, 0x9f),
                0xe1..=0xef => utf8(2, 0x80, 0xbf),
                0xf0 => utf8(3, 0x90, 0xbf),
                0xf1..=0xf3 => utf8(3, 0x80, 0xbf),
                0xf4 => utf8(3, 0x80, 0x8f),
                _ => return None,
            },
            InString::Escape => match byte {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => InString::Text,
                b'u' => InString::Hex {
                    left: 4,
                    surrogate: Surrogate::Unknown,
                },
                _ => return None,
            },
            InString::Hex { left, surrogate } if byte.is_ascii_hexdigit() => {
                let digit = byte.to_ascii_lowercase();
                let surrogate = match (surrogate, left, digit) {
                    (Surrogate::Unknown, 4, b'd') => Surrogate::D,
                    (Surrogate::Unknown, 4, _) => Surrogate::No,
                    (Surrogate::NeedLow, 4, b'd') => Surrogate::NeedLowD,
                    (Surrogate::NeedLow, _, _) => return None,
                    (Surrogate::D, 3, b'8'..=b'b') => Surrogate::High,
                    // A low half with no high half before it.
                    (Surrogate::D, 3, b'c'..=b'f') => return None,
                    (Surrogate::D, 3, _) => Surrogate::No,
                    (Surrogate::NeedLowD, 3, b'c'..=b'f') => Surrogate::No,
                    (Surrogate::NeedLowD, _, _) => return None,
                    (s, _, _) => s,
                };
                match (left, surrogate) {
                    (1, Surrogate::High) => InString::AfterHigh,
                    (1, _) => InString::Text,
                    _ => InString::Hex {
                        left: left - 1,
                        surrogate,
                    },
                }
            }
            InString::Hex { .. } => return None,
            InString::AfterHigh if byte == b'\\' => InString::LowEscape,
            InString::LowEscape if byte == b'u' => InString::Hex {
                left: 4,
                surrogate: Surrogate::NeedLow,
            },
            InString::AfterHigh | InString::LowEscape => return None,
            InString::Utf8 { left, lo, hi } if (lo..=hi).contains(&byte) => match left {
                1 => InString::Text,
                _ => utf8(left - 1, 0x80, 0xbf),
            },
            InString::Utf8 { .. } => return None,
        };
        Some(StringByte::Inside(next))
    }
}

/// Between tokens at nesting `depth` (containers open): `None` when `byte` is not whitespace
/// (the run of whitespace then ends); otherwise whether the whitespace is accepted here (none
/// before the document or after it, and at most [`Whitespace::then`]'s run), counted into
/// `whitespace`.
pub(super) fn between_tokens(
    expect: Expect,
    whitespace: &mut Whitespace,
    depth: u8,
    byte: u8,
) -> Option<bool> {
    if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
        *whitespace = Whitespace::None;
        return None;
    }
    if matches!(expect, Expect::Start | Expect::Done) {
        return Some(false);
    }
    Some(match whitespace.then(byte, depth) {
        Some(w) => {
            *whitespace = w;
            true
        }
        None => false,
    })
}

impl Whitespace {
    /// The whitespace after one more whitespace `byte` at nesting `depth`, or `None` past the
    /// limit: one space, or a newline and at most [`INDENT_PER_LEVEL`] spaces or tabs a level
    /// (never more than [`MAX_INDENT`]).
    pub(super) fn then(self, byte: u8, depth: u8) -> Option<Whitespace> {
        let indent = depth.saturating_mul(INDENT_PER_LEVEL).min(MAX_INDENT);
        match (self, byte) {
            (Whitespace::None, b' ') => Some(Whitespace::Space),
            (Whitespace::None, b'\n') => Some(Whitespace::Newline(0)),
            (Whitespace::Newline(n), b' ' | b'\t') if n < indent => {
                Some(Whitespace::Newline(n + 1))
            }
            _ => None,
        }
    }
}
