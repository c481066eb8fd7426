//! The recognizer of documents that conform to a compiled [`Schema`].

use super::super::lex::{between_tokens, Expect, InString, Number, Whitespace};
use super::super::masks::Recognizer;
use super::rules::*;

mod scalars;

use super::super::regex::RegexRecognizer;
use scalars::{string_bounds, string_pattern};

/// The token being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lexeme {
    None,
    /// A string; `key` for a key of an object under no schema. For a string with length
    /// bounds (`node`'s), the characters so far (0 otherwise, so unbounded strings share
    /// states).
    String {
        key: bool,
        at: InString,
        node: NodeId,
        len: u32,
        /// Where the string's characters so far (escapes decoded) leave `node`'s pattern.
        pattern: Option<RegexRecognizer>,
    },
    /// A number; for a bounded integer (`node`'s range), its sign and the magnitude of its
    /// digits so far (0 and unsigned otherwise, so unbounded numbers share states); for a
    /// bounded non-integer number, where its bytes leave `node`'s range expression.
    Number {
        at: Number,
        integer: bool,
        node: NodeId,
        negative: bool,
        magnitude: u64,
        decimal: Option<RegexRecognizer>,
    },
    /// A literal of set `set`: entries `lo..hi` share the `read` bytes read so far. `key` when
    /// it is a key of the object on top of the stack (keys written already are then excluded).
    Literal {
        set: u16,
        lo: u16,
        hi: u16,
        read: u16,
        key: bool,
    },
}

/// One open container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Frame {
    node: NodeId,
    /// Object: the set of key indexes written. Array: the number of items written.
    seen: u64,
}

/// Node ids for values under no schema (inside `{}` or `true` schemas).
const ANY: NodeId = NodeId::MAX;
const ANY_OBJECT: NodeId = NodeId::MAX - 1;
const ANY_ARRAY: NodeId = NodeId::MAX - 2;
/// No value may come (an array with `maxItems: 0`).
const NOTHING: NodeId = NodeId::MAX - 3;
/// Literal set 0: `false`, `null`, `true`.
const ANY_LITERALS: u16 = 0;

impl Schema {
    /// The fewest containers a value of `id` must open.
    fn min_depth(&self, id: NodeId) -> usize {
        match id {
            ANY | NOTHING => 0,
            ANY_OBJECT | ANY_ARRAY => 1,
            _ => self.min_depth[id as usize] as usize,
        }
    }

    fn node(&self, id: NodeId) -> &Node {
        match id {
            ANY => &Node::Any,
            ANY_OBJECT => &Node::AnyObject,
            ANY_ARRAY => &Node::AnyArray,
            NOTHING => &Node::Nothing,
            _ => &self.nodes[id as usize],
        }
    }
}

/// The state of a recognizer of documents that conform to a [`Schema`]: `Copy`, compared and
/// hashed like [`JsonRecognizer`](crate::constraint::json::JsonRecognizer)'s, with the open containers' schema
/// nodes and the keys or items written in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemaRecognizer {
    frames: [Frame; MAX_SCHEMA_DEPTH],
    depth: u8,
    expect: Expect,
    /// The schema of the value expected next.
    next: NodeId,
    lexeme: Lexeme,
    whitespace: Whitespace,
}

impl Recognizer for SchemaRecognizer {
    type Rules = Schema;

    fn start(schema: &Schema) -> Self {
        SchemaRecognizer::new(schema)
    }

    fn advance(&mut self, s: &Schema, byte: u8) -> bool {
        match self.lexeme {
            Lexeme::None => self.structural(s, byte),
            Lexeme::String {
                key,
                at,
                node,
                len,
                pattern,
            } => self.string_byte(s, byte, (key, at, node, len, pattern)),
            Lexeme::Number {
                at,
                integer,
                node,
                negative,
                magnitude,
                decimal,
            } => self.number_byte(s, byte, (at, integer, node, negative, magnitude), decimal),
            Lexeme::Literal { .. } => self.literal_byte(s, byte),
        }
    }

    fn is_complete(&self) -> bool {
        self.expect == Expect::Done
    }
}

impl SchemaRecognizer {
    /// A recognizer at the start of a document for `schema`.
    pub fn new(schema: &Schema) -> Self {
        SchemaRecognizer {
            frames: [Frame::default(); MAX_SCHEMA_DEPTH],
            depth: 0,
            expect: Expect::Start,
            next: schema.root,
            lexeme: Lexeme::None,
            whitespace: Whitespace::None,
        }
    }

    fn top(&self) -> Frame {
        self.frames[self.depth as usize - 1]
    }

    fn structural(&mut self, s: &Schema, byte: u8) -> bool {
        if let Some(accepted) = between_tokens(self.expect, &mut self.whitespace, self.depth, byte)
        {
            return accepted;
        }
        match (self.expect, byte) {
            (Expect::ValueOrClose | Expect::CommaOrClose, b']') => self.close_array(s),
            (Expect::Start | Expect::Value | Expect::ValueOrClose, _) => {
                self.value_start(s, self.next, byte)
            }
            (Expect::KeyOrClose | Expect::CommaOrClose, b'}') => self.close_object(s),
            (Expect::KeyOrClose | Expect::Key, b'"') => self.key_start(s),
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                true
            }
            (Expect::CommaOrClose, b',') => self.comma(s),
            _ => false,
        }
    }

    /// Whether a value of `node` can still be written inside the open containers.
    fn fits(&self, s: &Schema, node: NodeId) -> bool {
        self.depth as usize + s.min_depth(node) <= MAX_SCHEMA_DEPTH
    }

    fn value_start(&mut self, s: &Schema, node: NodeId, byte: u8) -> bool {
        let Some(kind) = kind_of_first_byte(byte) else {
            return false;
        };
        if let Node::Union(by_kind) = s.node(node) {
            return match by_kind[kind] {
                Some(inner) => self.value_start(s, inner, byte),
                None => false,
            };
        }
        if !self.fits(s, node) {
            return false;
        }
        match s.node(node) {
            Node::Any => match kind {
                OBJECT => self.open(s, ANY_OBJECT),
                ARRAY => self.open(s, ANY_ARRAY),
                STRING => self.start_string(s, false, ANY),
                NUMBER => self.start_number(s, ANY, false, byte),
                _ => self.literal_start(s, ANY_LITERALS, false, byte),
            },
            Node::AnyObject
            | Node::Object { .. }
            | Node::Tagged { .. }
            | Node::AnyArray
            | Node::Array { .. }
                if kind == OBJECT || kind == ARRAY =>
            {
                let object = matches!(
                    s.node(node),
                    Node::AnyObject | Node::Object { .. } | Node::Tagged { .. }
                );
                (object == (kind == OBJECT)) && self.open(s, node)
            }
            Node::String { .. } if kind == STRING => {
                // Unbounded strings go as `ANY`'s, so they share their states (and masks).
                let bounded = string_bounds(s, node).is_some() || string_pattern(s, node).is_some();
                self.start_string(s, false, if bounded { node } else { ANY })
            }
            Node::Number { integer, .. } if kind == NUMBER => {
                self.start_number(s, node, *integer, byte)
            }
            Node::Literals(set) => self.literal_start(s, *set as u16, false, byte),
            _ => false,
        }
    }

    fn open(&mut self, s: &Schema, node: NodeId) -> bool {
        if self.depth as usize >= MAX_SCHEMA_DEPTH {
            return false;
        }
        self.frames[self.depth as usize] = Frame { node, seen: 0 };
        self.depth += 1;
        match s.node(node) {
            Node::Object { .. } | Node::AnyObject | Node::Tagged { .. } => {
                self.expect = Expect::KeyOrClose;
                self.next = 0;
            }
            Node::Array { items, max, .. } => {
                self.expect = Expect::ValueOrClose;
                self.next = if *max == 0 { NOTHING } else { *items };
            }
            _ => {
                self.expect = Expect::ValueOrClose;
                self.next = ANY;
            }
        }
        true
    }

    fn key_start(&mut self, s: &Schema) -> bool {
        match s.node(self.top().node) {
            Node::Object { keys, .. } => self.literal_start(s, *keys as u16, true, b'"'),
            // The discriminator first, alone.
            Node::Tagged { key, .. } => self.literal_start(s, *key as u16, true, b'"'),
            _ => self.start_string(s, true, ANY),
        }
    }

    fn comma(&mut self, s: &Schema) -> bool {
        let top = self.top();
        match s.node(top.node) {
            // Another key must be left to write.
            Node::Object { keys, .. } => {
                if !(0..s.literals[*keys].len()).any(|i| self.key_allowed(s, i)) {
                    return false;
                }
                self.expect = Expect::Key;
            }
            Node::AnyObject => self.expect = Expect::Key,
            // Left as soon as the discriminator's value is read: no comma comes before it.
            Node::Tagged { .. } => return false,
            Node::Array { items, max, .. } => {
                if top.seen >= *max as u64 || !self.fits(s, *items) {
                    return false;
                }
                self.expect = Expect::Value;
                self.next = *items;
            }
            _ => {
                self.expect = Expect::Value;
                self.next = ANY;
            }
        }
        true
    }

    fn close_object(&mut self, s: &Schema) -> bool {
        let top = self.top();
        match s.node(top.node) {
            Node::Object { required, .. } => top.seen & required == *required && self.pop(s),
            Node::AnyObject => self.pop(s),
            _ => false,
        }
    }

    fn close_array(&mut self, s: &Schema) -> bool {
        let top = self.top();
        match s.node(top.node) {
            Node::Array { min, .. } => top.seen >= *min as u64 && self.pop(s),
            Node::AnyArray => self.pop(s),
            _ => false,
        }
    }

    fn pop(&mut self, s: &Schema) -> bool {
        self.depth -= 1;
        // Cleared, so equal positions are equal states.
        self.frames[self.depth as usize] = Frame::default();
        if self.depth == 0 {
            self.expect = Expect::Done;
        } else {
            self.item_done(s);
        }
        true
    }

    /// A value inside the top container ended: count it in an array, expect `,` or the close.
    fn item_done(&mut self, s: &Schema) {
        let top = &mut self.frames[self.depth as usize - 1];
        if matches!(s.node(top.node), Node::Array { .. } | Node::AnyArray) {
            top.seen += 1;
        }
        self.next = 0;
        self.expect = Expect::CommaOrClose;
    }

    fn literal_start(&mut self, s: &Schema, set: u16, key: bool, byte: u8) -> bool {
        self.lexeme = Lexeme::Literal {
            set,
            lo: 0,
            hi: s.literals[set as usize].len() as u16,
            read: 0,
            key,
        };
        self.literal_byte(s, byte)
    }

    /// Whether entry `i` of a literal set may still be written: a key only once per object,
    /// and only if its value fits.
    fn unseen(&self, s: &Schema, key: bool, i: usize) -> bool {
        !key || self.key_allowed(s, i)
    }

    fn key_allowed(&self, s: &Schema, i: usize) -> bool {
        let top = self.top();
        let Node::Object { values, .. } = s.node(top.node) else {
            return true;
        };
        top.seen & (1 << i) == 0 && self.fits(s, values[i])
    }

    fn literal_byte(&mut self, s: &Schema, byte: u8) -> bool {
        let Lexeme::Literal {
            set,
            lo,
            hi,
            read,
            key,
        } = self.lexeme
        else {
            return false;
        };
        let texts = &s.literals[set as usize];
        let pos = read as usize;
        let (lo, hi) = (lo as usize, hi as usize);
        // Entries continuing with `byte` are contiguous: they share the prefix read so far.
        let Some(first) = (lo..hi).find(|&i| texts[i].get(pos) == Some(&byte)) else {
            // The byte may end a whole entry (numbers are not self-delimiting).
            return match (lo..hi).find(|&i| texts[i].len() == pos) {
                Some(i) if self.unseen(s, key, i) => {
                    self.lexeme = Lexeme::None;
                    self.literal_done(s, key, i);
                    self.structural(s, byte)
                }
                _ => false,
            };
        };
        let end = (first..hi)
            .find(|&i| texts[i].get(pos) != Some(&byte))
            .unwrap_or(hi);
        let read = pos + 1;
        let whole = (first..end).find(|&i| texts[i].len() == read && self.unseen(s, key, i));
        let longer = (first..end).any(|i| texts[i].len() > read && self.unseen(s, key, i));
        match (whole, longer) {
            (None, false) => false,
            (Some(i), false) => {
                self.lexeme = Lexeme::None;
                self.literal_done(s, key, i);
                true
            }
            _ => {
                self.lexeme = Lexeme::Literal {
                    set,
                    lo: first as u16,
                    hi: end as u16,
                    read: read as u16,
                    key,
                };
                true
            }
        }
    }

    fn literal_done(&mut self, s: &Schema, key: bool, index: usize) {
        if key {
            let top = &mut self.frames[self.depth as usize - 1];
            top.seen |= 1 << index;
            match s.node(top.node) {
                Node::Object { values, .. } => self.next = values[index],
                Node::Tagged { values, .. } => self.next = *values,
                _ => {}
            }
            self.expect = Expect::Colon;
            return;
        }
        if self.depth > 0 {
            // The discriminator's value: the object is now the alternative it names, with
            // the discriminator written.
            let top = &mut self.frames[self.depth as usize - 1];
            if let Node::Tagged { alternatives, .. } = s.node(top.node) {
                let (object, key) = alternatives[index];
                *top = Frame {
                    node: object,
                    seen: 1 << key,
                };
            }
        }
        self.item_done(s);
    }
}
