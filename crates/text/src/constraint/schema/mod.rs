//! `response_format: {"type": "json_schema"}`: a JSON Schema compiled into rules a byte-level
//! recognizer follows, so every token keeps the output a valid prefix of a conforming document.
//!
//! The subset is what structured-output clients send (the OpenAI SDK from pydantic models):
//! `type` (one or a list), `properties` / `required` / `additionalProperties: false`, `items` /
//! `minItems` / `maxItems`, `enum`, `const`, `anyOf` / `oneOf`, a single-element `allOf`, and
//! `$ref` into `$defs` / `definitions` (recursion allowed). As in strict structured outputs,
//! an object with `properties` takes no other keys. Annotations (`title`, `description`,
//! `default`, `examples`, `format`, ...) are ignored; any other keyword is refused with its
//! path, never silently dropped. Alternatives of a union must begin with different JSON types
//! (a string or null, an object or an array, ...), so the first byte of a value decides which
//! one it is, except objects that share a key whose value is a distinct `const` (or one-value
//! `enum`) in each: that discriminator must then come first in the object, and its value
//! picks the alternative.
//!
//! [`Schema::compile_relaxed`] takes the schemas agents send as tool parameters: what the
//! subset cannot enforce is left out and reported by path (see `relax.rs`).

use thiserror::Error;

mod compiler;
mod recognizer;
mod relax;
mod tool_union;

pub use recognizer::SchemaRecognizer;

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
    fn at(path: &str, message: impl Into<String>) -> Self {
        SchemaError {
            path: path.to_string(),
            message: message.into(),
        }
    }
}

type NodeId = u16;

/// The kinds of JSON value, by the first byte that starts one.
const OBJECT: usize = 0;
const ARRAY: usize = 1;
const STRING: usize = 2;
const NUMBER: usize = 3;
const TRUE_FALSE: usize = 4;
const NULL: usize = 5;

fn kind_of_first_byte(byte: u8) -> Option<usize> {
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

/// One compiled schema node.
#[derive(Debug, Clone, PartialEq)]
enum Node {
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
    /// Any string.
    String,
    /// Any number; `integer` refuses a fraction or exponent.
    Number { integer: bool },
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

/// A compiled schema: the rules a [`SchemaRecognizer`] follows.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    nodes: Vec<Node>,
    /// Sorted, deduplicated JSON texts.
    literals: Vec<Vec<Vec<u8>>>,
    /// By node: the fewest containers a value of it must open (`u8::MAX`: no finite value).
    /// The recognizer starts a value only where it fits under [`MAX_SCHEMA_DEPTH`], so a long
    /// optional path can never lead into a dead end.
    min_depth: Vec<u8>,
    root: NodeId,
}

const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
    "strict",
    "discriminator",
];

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "schema/relax_tests.rs"]
mod relax_tests;

#[cfg(test)]
#[path = "schema/tagged_tests.rs"]
mod tagged_tests;
