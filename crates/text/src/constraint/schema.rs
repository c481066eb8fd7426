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
//! one it is.

use std::collections::HashMap;

use serde_json::Value;
use thiserror::Error;

use super::lex::{between_tokens, Expect, InString, Number, StringByte, Whitespace};
use super::masks::Recognizer;

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

/// A list of strings (`type`, `required`), or `error` at `path`.
fn strings<'v>(value: &'v Value, path: &str, error: &str) -> Result<Vec<&'v str>, SchemaError> {
    let list = match value {
        Value::Array(items) => items.iter().map(Value::as_str).collect::<Option<Vec<_>>>(),
        _ => None,
    };
    list.ok_or_else(|| SchemaError::at(path, error))
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

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    literals: Vec<Vec<Vec<u8>>>,
    refs: HashMap<String, NodeId>,
    /// `$ref` targets being compiled, by their reserved id (a recursive union asks their kinds).
    pending: HashMap<NodeId, &'a Value>,
}

impl Schema {
    /// Compiles `schema`; its root must describe an object.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        let mut c = Compiler {
            root: schema,
            nodes: Vec::new(),
            // Set 0: the literals of a value under no schema.
            literals: vec![vec![b"false".to_vec(), b"null".to_vec(), b"true".to_vec()]],
            refs: HashMap::new(),
            pending: HashMap::new(),
        };
        let root = c.node(schema, "#")?;
        if c.nodes.iter().any(|n| matches!(n, Node::Pending)) {
            return Err(SchemaError::at(
                "#",
                "a $ref refers to itself without describing a value",
            ));
        }
        let min_depth = min_depths(&c.nodes);
        if min_depth[root as usize] as usize > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::at(
                "#",
                format!(
                    "every document of the schema nests deeper than {MAX_SCHEMA_DEPTH} levels \
                     (or without end)"
                ),
            ));
        }
        if !matches!(
            c.nodes[root as usize],
            Node::Object { .. } | Node::AnyObject
        ) {
            return Err(SchemaError::at(
                "#",
                "the schema must describe an object (\"type\": \"object\")",
            ));
        }
        Ok(Schema {
            nodes: c.nodes,
            literals: c.literals,
            min_depth,
            root,
        })
    }
}

impl<'a> Compiler<'a> {
    fn push(&mut self, node: Node) -> Result<NodeId, SchemaError> {
        if self.nodes.len() >= NodeId::MAX as usize {
            return Err(SchemaError::at("#", "the schema is too large"));
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as NodeId)
    }

    fn literal_set(&mut self, values: &[Value], path: &str) -> Result<Node, SchemaError> {
        let mut texts: Vec<Vec<u8>> = values
            .iter()
            .map(|v| serde_json::to_vec(v).expect("a Value serializes"))
            .collect();
        texts.sort();
        texts.dedup();
        self.add_literals(texts, path)?;
        Ok(Node::Literals(self.literals.len() - 1))
    }

    /// Adds a literal set; its positions are kept in 16 bits.
    fn add_literals(&mut self, texts: Vec<Vec<u8>>, path: &str) -> Result<(), SchemaError> {
        let limit = u16::MAX as usize;
        if texts.len() > limit
            || texts.iter().any(|t| t.len() > limit)
            || self.literals.len() >= limit
        {
            return Err(SchemaError::at(
                path,
                "an enum, const or property list is too large",
            ));
        }
        self.literals.push(texts);
        Ok(())
    }

    fn node(&mut self, schema: &'a Value, path: &str) -> Result<NodeId, SchemaError> {
        let map = match schema {
            Value::Bool(true) => return self.push(Node::Any),
            Value::Object(map) => map,
            _ => return Err(SchemaError::at(path, "a schema must be an object or true")),
        };
        if let Some(reference) = map.get("$ref") {
            let reference = reference
                .as_str()
                .ok_or_else(|| SchemaError::at(path, "$ref must be a string"))?;
            if map
                .keys()
                .any(|k| k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
            {
                return Err(SchemaError::at(
                    path,
                    "keywords beside $ref are not supported",
                ));
            }
            return self.reference(reference, path);
        }
        for key in map.keys() {
            let known = [
                "type",
                "properties",
                "required",
                "additionalProperties",
                "items",
                "minItems",
                "maxItems",
                "enum",
                "const",
                "anyOf",
                "oneOf",
                "allOf",
            ];
            if !known.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
                return Err(SchemaError::at(
                    path,
                    format!("keyword \"{key}\" is not supported"),
                ));
            }
        }
        // A keyword that decides the value alone takes no other constraint beside it (`type` is
        // allowed beside `enum` / `const` when every value has that type).
        let deciding = ["const", "enum", "anyOf", "oneOf", "allOf"];
        if let Some(first) = deciding.iter().find(|k| map.contains_key(**k)) {
            for key in map.keys() {
                let annotation = ANNOTATIONS.contains(&key.as_str());
                let typed = key == "type" && matches!(*first, "const" | "enum");
                if key != first && !annotation && !typed {
                    return Err(SchemaError::at(
                        path,
                        format!("keyword \"{key}\" beside \"{first}\" is not supported"),
                    ));
                }
            }
            if let Some(types) = map
                .get("type")
                .filter(|_| matches!(*first, "const" | "enum"))
            {
                let values: Vec<&Value> = match (map.get("const"), map.get("enum")) {
                    (Some(c), _) => vec![c],
                    (None, Some(Value::Array(e))) => e.iter().collect(),
                    _ => Vec::new(),
                };
                if let Some(bad) = values.iter().find(|v| !has_type(v, types)) {
                    return Err(SchemaError::at(
                        path,
                        format!("{bad} does not have the schema's type"),
                    ));
                }
            }
        }
        if let Some(value) = map.get("const") {
            let node = self.literal_set(std::slice::from_ref(value), path)?;
            return self.push(node);
        }
        if let Some(values) = map.get("enum") {
            let values = values
                .as_array()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| SchemaError::at(path, "enum must be a non-empty array"))?;
            let node = self.literal_set(values, path)?;
            return self.push(node);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(options) = map.get(key) {
                let options = options
                    .as_array()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        SchemaError::at(path, format!("{key} must be a non-empty array"))
                    })?;
                let mut ids = Vec::new();
                for (i, option) in options.iter().enumerate() {
                    ids.push(self.node(option, &format!("{path}/{key}/{i}"))?);
                }
                return self.union(ids, path);
            }
        }
        if let Some(all) = map.get("allOf") {
            return match all.as_array().map(Vec::as_slice) {
                Some([only]) => self.node(only, &format!("{path}/allOf/0")),
                _ => Err(SchemaError::at(
                    path,
                    "allOf is supported with exactly one schema",
                )),
            };
        }
        let is = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
        let mut types: Vec<&str> = match map.get("type") {
            // Without a type, object or array keywords still say what the value is.
            None if is(&["properties", "required", "additionalProperties"]) => vec!["object"],
            None if is(&["items", "minItems", "maxItems"]) => vec!["array"],
            None => return self.push(Node::Any),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(list) => strings(list, path, "type must be a string or a list of strings")?,
        };
        types.sort_unstable();
        types.dedup();
        if types.contains(&"number") {
            types.retain(|t| *t != "integer");
        }
        let mut ids = Vec::new();
        for t in types {
            let node = match t {
                "object" => self.object(map, path)?,
                "array" => self.array(map, path)?,
                "string" => Node::String,
                "number" => Node::Number { integer: false },
                "integer" => Node::Number { integer: true },
                "boolean" => self.literal_set(&[Value::Bool(false), Value::Bool(true)], path)?,
                "null" => self.literal_set(&[Value::Null], path)?,
                other => return Err(SchemaError::at(path, format!("unknown type \"{other}\""))),
            };
            ids.push(self.push(node)?);
        }
        match ids.as_slice() {
            [] => Err(SchemaError::at(path, "type lists no type")),
            [one] => Ok(*one),
            _ => self.union(ids, path),
        }
    }

    fn reference(&mut self, reference: &str, path: &str) -> Result<NodeId, SchemaError> {
        if let Some(&id) = self.refs.get(reference) {
            return Ok(id);
        }
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| self.root.pointer(pointer))
            .ok_or_else(|| {
                SchemaError::at(
                    path,
                    format!("$ref \"{reference}\" does not point into this schema"),
                )
            })?;
        // Reserve the id first, so a recursive reference finds it.
        let id = self.push(Node::Pending)?;
        self.refs.insert(reference.to_string(), id);
        self.pending.insert(id, target);
        let compiled = self.node(target, reference)?;
        self.nodes[id as usize] = self.nodes[compiled as usize].clone();
        self.pending.remove(&id);
        Ok(id)
    }

    fn object(
        &mut self,
        map: &'a serde_json::Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaError> {
        let additional = map.get("additionalProperties");
        let required = match map.get("required") {
            None => Vec::new(),
            Some(list) => strings(list, path, "required must be a list of strings")?,
        };
        static NO_PROPERTIES: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        let properties = match (map.get("properties"), additional) {
            (Some(p), _) => p,
            (None, None | Some(Value::Bool(true))) if required.is_empty() => {
                return Ok(Node::AnyObject)
            }
            (None, None | Some(Value::Bool(true))) => {
                return Err(SchemaError::at(
                    path,
                    "required keys need properties describing them",
                ))
            }
            // No keys at all: `{}`.
            (None, Some(Value::Bool(false))) => {
                NO_PROPERTIES.get_or_init(|| Value::Object(Default::default()))
            }
            (None, Some(_)) => {
                return Err(SchemaError::at(
                    path,
                    "additionalProperties with a schema is not supported",
                ))
            }
        };
        if !matches!(additional, None | Some(Value::Bool(false))) {
            return Err(SchemaError::at(
                path,
                "an object with properties takes no other keys: additionalProperties must be \
                 false or absent",
            ));
        }
        let properties = properties
            .as_object()
            .ok_or_else(|| SchemaError::at(path, "properties must be an object"))?;
        if properties.len() > MAX_PROPERTIES {
            return Err(SchemaError::at(
                path,
                format!(
                    "at most {MAX_PROPERTIES} properties are supported, got {}",
                    properties.len()
                ),
            ));
        }
        // Keys are matched as their JSON texts (quotes and escapes included), sorted.
        let mut keyed: Vec<(Vec<u8>, &String, &'a Value)> = properties
            .iter()
            .map(|(k, v)| (serde_json::to_vec(k).expect("a string serializes"), k, v))
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut values = Vec::new();
        for (_, name, schema) in &keyed {
            values.push(self.node(schema, &format!("{path}/properties/{name}"))?);
        }
        let mut required_bits = 0u64;
        for name in required {
            let index = keyed
                .iter()
                .position(|(_, k, _)| k.as_str() == name)
                .ok_or_else(|| {
                    SchemaError::at(path, format!("required \"{name}\" is not in properties"))
                })?;
            required_bits |= 1 << index;
        }
        self.literals
            .push(keyed.into_iter().map(|(text, _, _)| text).collect());
        Ok(Node::Object {
            keys: self.literals.len() - 1,
            values,
            required: required_bits,
        })
    }

    fn array(
        &mut self,
        map: &'a serde_json::Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaError> {
        let bound = |key: &str, default: u32| -> Result<u32, SchemaError> {
            match map.get(key) {
                None => Ok(default),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        SchemaError::at(path, format!("{key} must be a non-negative integer"))
                    }),
            }
        };
        let (min, max) = (bound("minItems", 0)?, bound("maxItems", u32::MAX)?);
        if min > max {
            return Err(SchemaError::at(
                path,
                format!("minItems {min} exceeds maxItems {max}"),
            ));
        }
        let items = match map.get("items") {
            None => self.push(Node::Any)?,
            Some(items) => self.node(items, &format!("{path}/items"))?,
        };
        Ok(Node::Array { items, min, max })
    }

    fn union(&mut self, ids: Vec<NodeId>, path: &str) -> Result<NodeId, SchemaError> {
        let mut by_kind: [Option<NodeId>; 6] = [None; 6];
        for id in ids {
            for kind in self.kinds(id) {
                if by_kind[kind].is_some_and(|other| other != id) {
                    return Err(SchemaError::at(
                        path,
                        "alternatives must begin with different JSON types (two of \
                                  them can start with the same character)",
                    ));
                }
                by_kind[kind] = Some(id);
            }
        }
        self.push(Node::Union(by_kind))
    }

    /// The kinds of first byte a node's values can start with.
    fn kinds(&self, id: NodeId) -> Vec<usize> {
        match &self.nodes[id as usize] {
            Node::Pending => match self.pending.get(&id) {
                Some(target) => raw_kinds(target),
                None => (0..6).collect(),
            },
            Node::Nothing => Vec::new(),
            Node::Any => (0..6).collect(),
            Node::AnyObject | Node::Object { .. } => vec![OBJECT],
            Node::AnyArray | Node::Array { .. } => vec![ARRAY],
            Node::String => vec![STRING],
            Node::Number { .. } => vec![NUMBER],
            Node::Literals(set) => {
                let mut kinds: Vec<usize> = self.literals[*set]
                    .iter()
                    .filter_map(|t| kind_of_first_byte(t[0]))
                    .collect();
                kinds.dedup();
                kinds
            }
            Node::Union(by_kind) => (0..6).filter(|&k| by_kind[k].is_some()).collect(),
        }
    }
}

/// Whether `value` has one of the JSON Schema `types` (a string or a list of them).
fn has_type(value: &Value, types: &Value) -> bool {
    let matches = |t: &str| match (t, value) {
        ("object", Value::Object(_)) | ("array", Value::Array(_)) => true,
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    match types {
        Value::String(t) => matches(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(matches),
        _ => false,
    }
}

/// The fewest containers a value of each node must open, by fixpoint (values only fall; a
/// recursion that every value must take stays at `u8::MAX`).
fn min_depths(nodes: &[Node]) -> Vec<u8> {
    let mut depth = vec![u8::MAX; nodes.len()];
    loop {
        let mut changed = false;
        for (i, node) in nodes.iter().enumerate() {
            let d = match node {
                Node::Any | Node::String | Node::Number { .. } | Node::Literals(_) => 0,
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

/// The kinds of first byte a schema not compiled yet allows, read from its `type` (all when it
/// says nothing simpler).
fn raw_kinds(schema: &Value) -> Vec<usize> {
    let kind = |t: &str| match t {
        "object" => Some(OBJECT),
        "array" => Some(ARRAY),
        "string" => Some(STRING),
        "number" | "integer" => Some(NUMBER),
        "boolean" => Some(TRUE_FALSE),
        "null" => Some(NULL),
        _ => None,
    };
    match schema.get("type") {
        Some(Value::String(t)) if schema.get("enum").is_none() && schema.get("const").is_none() => {
            kind(t).into_iter().collect()
        }
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| kind(t.as_str()?)).collect(),
        _ => (0..6).collect(),
    }
}

/// The token being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lexeme {
    None,
    /// A free string; `key` for a key of an object under no schema.
    String {
        key: bool,
        at: InString,
    },
    Number {
        at: Number,
        integer: bool,
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
/// hashed like [`JsonRecognizer`](super::JsonRecognizer)'s, with the open containers' schema
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

    fn advance(&mut self, s: &Schema, byte: u8) -> bool {
        match self.lexeme {
            Lexeme::None => self.structural(s, byte),
            Lexeme::String { key, at } => match at.next(byte) {
                None => false,
                Some(StringByte::Inside(at)) => {
                    self.lexeme = Lexeme::String { key, at };
                    true
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
            },
            Lexeme::Number { at, integer } => {
                let fraction = matches!(byte, b'.' | b'e' | b'E');
                match at.next(byte).filter(|_| !(integer && fraction)) {
                    Some(at) => {
                        self.lexeme = Lexeme::Number { at, integer };
                        true
                    }
                    None if at.complete() => {
                        self.lexeme = Lexeme::None;
                        self.item_done(s);
                        self.structural(s, byte)
                    }
                    None => false,
                }
            }
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
        if let Some(accepted) = between_tokens(self.expect, &mut self.whitespace, byte) {
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
                STRING => self.start_string(false),
                NUMBER => self.start_number(false, byte),
                _ => self.literal_start(s, ANY_LITERALS, false, byte),
            },
            Node::AnyObject | Node::Object { .. } | Node::AnyArray | Node::Array { .. }
                if kind == OBJECT || kind == ARRAY =>
            {
                let object = matches!(s.node(node), Node::AnyObject | Node::Object { .. });
                (object == (kind == OBJECT)) && self.open(s, node)
            }
            Node::String if kind == STRING => self.start_string(false),
            Node::Number { integer } if kind == NUMBER => self.start_number(*integer, byte),
            Node::Literals(set) => self.literal_start(s, *set as u16, false, byte),
            _ => false,
        }
    }

    fn start_string(&mut self, key: bool) -> bool {
        self.lexeme = Lexeme::String {
            key,
            at: InString::Text,
        };
        true
    }

    fn start_number(&mut self, integer: bool, byte: u8) -> bool {
        let at = match byte {
            b'-' => Number::Minus,
            b'0' => Number::Zero,
            _ => Number::Integer,
        };
        self.lexeme = Lexeme::Number { at, integer };
        true
    }

    fn open(&mut self, s: &Schema, node: NodeId) -> bool {
        if self.depth as usize >= MAX_SCHEMA_DEPTH {
            return false;
        }
        self.frames[self.depth as usize] = Frame { node, seen: 0 };
        self.depth += 1;
        match s.node(node) {
            Node::Object { .. } | Node::AnyObject => {
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
            _ => self.start_string(true),
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
            if let Node::Object { values, .. } = s.node(top.node) {
                self.next = values[index];
            }
            self.expect = Expect::Colon;
        } else {
            self.item_done(s);
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
