//! What a compiled schema is: its nodes, their literal sets and the depth bounds the
//! recognizer walks; the compiler writes them and the recognizer reads them.

use std::sync::Arc;

use thiserror::Error;

use super::super::regex::Regex;

/// Deepest nesting of objects and arrays accepted (the top-level object counts as one).
pub const MAX_SCHEMA_DEPTH: usize = 12;

/// Most properties an object schema may list (seen keys are a 64-bit set).
pub const MAX_PROPERTIES: usize = 64;

/// A schema that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message} (at {path})")]
pub struct SchemaError {
    /// Where in the schema, as a JSON pointer.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl SchemaError {
    /// An error at `path`.
    pub(super) fn at(path: &str, message: impl Into<String>) -> Self {
        SchemaError {
            path: path.to_string(),
            message: message.into(),
        }
    }
}

/// A node's index in [`Schema::nodes`].
pub(super) type NodeId = u16;

/// The kinds of JSON value, by the first byte that starts one.
pub(super) const OBJECT: usize = 0;
pub(super) const ARRAY: usize = 1;
pub(super) const STRING: usize = 2;
pub(super) const NUMBER: usize = 3;
pub(super) const TRUE_FALSE: usize = 4;
pub(super) const NULL: usize = 5;

/// The kind of value `byte` starts, if it starts one.
pub(super) fn kind_of_first_byte(byte: u8) -> Option<usize> {
    Some(match byte {
        b'{' => OBJECT,
        b'[' => ARRAY,
        b'"' => STRING,
        b'-' | b'0'..=b'9' => NUMBER,
        b't' | b'f' => TRUE_FALSE,
        b'n' => NULL,
        _ => return None,
    })
}

/// Any string: no length bounds.
pub(super) const ANY_STRING: Node = Node::String {
    min: 0,
    max: u32::MAX,
    pattern: None,
};

/// Inclusive bounds on an integer's value (`minimum`, `maximum`, `exclusiveMinimum`,
/// `exclusiveMaximum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct IntRange {
    pub min: i64,
    pub max: i64,
}

impl IntRange {
    /// No bound.
    pub const ANY: IntRange = IntRange {
        min: i64::MIN,
        max: i64::MAX,
    };

    /// Whether some integer whose digits start with `magnitude` (more digits may follow,
    /// unless `last`) and whose sign is `negative` lies in the range. The digits `magnitude`
    /// stands for have no leading zero (a leading `0` is the whole number, `last`).
    pub fn reachable(self, negative: bool, magnitude: u64, last: bool) -> bool {
        let (min, max) = (i128::from(self.min), i128::from(self.max));
        let mut low = i128::from(magnitude);
        let mut span: i128 = 1;
        // k more digits: magnitudes low·10^k ..= low·10^k + 10^k − 1.
        loop {
            let high = low + span - 1;
            let (lo, hi) = match negative {
                true => (-high, -low),
                false => (low, high),
            };
            if lo <= max && hi >= min {
                return true;
            }
            if last || low > i128::from(i64::MAX) || magnitude == 0 {
                return false;
            }
            low *= 10;
            span *= 10;
        }
    }

    /// Whether the finished integer is in the range.
    pub fn contains(self, negative: bool, magnitude: u64) -> bool {
        let value = match negative {
            true => -i128::from(magnitude),
            false => i128::from(magnitude),
        };
        (i128::from(self.min)..=i128::from(self.max)).contains(&value)
    }
}

/// One compiled schema node.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// Any JSON value.
    Any,
    /// Any object (keys free, values `Any`).
    AnyObject,
    /// Any array (items `Any`).
    AnyArray,
    /// An object with exactly these keys allowed (literal set of `"key"` texts, sorted) whose
    /// values follow `values` (by key index), and a set of required key indexes.
    Object {
        keys: usize,
        values: Vec<NodeId>,
        required: u64,
    },
    /// An array of `items`, with bounds on its length.
    Array { items: NodeId, min: u32, max: u32 },
    /// A string of `min..=max` characters (Unicode code points; an escape is one, a surrogate
    /// pair one), matching `pattern` (an index into [`Schema::patterns`]) when it has one.
    String {
        min: u32,
        max: u32,
        pattern: Option<u16>,
    },
    /// Any number; `integer` refuses a fraction or exponent, and an integer's value stays
    /// within `range`.
    Number {
        integer: bool,
        range: IntRange,
        /// For a bounded non-integer number, the expression its digits must match (an index
        /// into [`Schema::patterns`]; no exponent).
        decimal: Option<u16>,
    },
    /// One of a set of JSON texts (literal set index): `enum`, `const`, booleans, null.
    Literals(usize),
    /// Alternatives told apart by the kind of their first byte.
    Union([Option<NodeId>; 6]),
    /// Objects told apart by one key (the discriminator) whose value is a distinct literal in
    /// each: the key (literal set `key`, its one text) must come first, and its value (node
    /// `values`, a `Literals` node) picks the alternative by its index in the set. An
    /// alternative is an `Object` node and the discriminator's key index in it.
    Tagged {
        key: usize,
        values: NodeId,
        alternatives: Vec<(NodeId, u8)>,
    },
    /// A `$ref` not yet resolved (only during compilation).
    Pending,
    /// No value (what may follow `[` in an array with `maxItems: 0`).
    Nothing,
}

/// A compiled schema: the rules a [`SchemaRecognizer`](super::SchemaRecognizer) follows.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub(super) nodes: Vec<Node>,
    /// Sorted, deduplicated JSON texts.
    pub(super) literals: Vec<Vec<Vec<u8>>>,
    /// By node: the fewest containers a value of it must open (`u8::MAX`: no finite value).
    /// The recognizer starts a value only where it fits under [`MAX_SCHEMA_DEPTH`], so a long
    /// optional path can never lead into a dead end.
    pub(super) min_depth: Vec<u8>,
    pub(super) root: NodeId,
    /// The `pattern`s of string nodes, compiled (a node holds its index).
    pub(super) patterns: Vec<Arc<Regex>>,
}

/// The fewest containers a value of each node must open, by fixpoint (values only fall; a
/// recursion that every value must take stays at `u8::MAX`).
pub(super) fn min_depths(nodes: &[Node]) -> Vec<u8> {
    let mut depth = vec![u8::MAX; nodes.len()];
    loop {
        let mut changed = false;
        for (i, node) in nodes.iter().enumerate() {
            let d = match node {
                Node::Any | Node::String { .. } | Node::Number { .. } | Node::Literals(_) => 0,
                Node::AnyObject | Node::AnyArray => 1,
                Node::Object {
                    values, required, ..
                } => values
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| required & (1 << k) != 0)
                    .map(|(_, &v)| depth[v as usize])
                    .max()
                    .unwrap_or(0)
                    .saturating_add(1),
                Node::Array { items, min, .. } => match min {
                    0 => 1,
                    _ => depth[*items as usize].saturating_add(1),
                },
                Node::Union(options) => options
                    .iter()
                    .flatten()
                    .map(|&o| depth[o as usize])
                    .min()
                    .unwrap_or(u8::MAX),
                Node::Tagged { alternatives, .. } => alternatives
                    .iter()
                    .map(|&(o, _)| depth[o as usize])
                    .min()
                    .unwrap_or(u8::MAX),
                Node::Pending | Node::Nothing => u8::MAX,
            };
            if d < depth[i] {
                depth[i] = d;
                changed = true;
            }
        }
        if !changed {
            return depth;
        }
    }
}
