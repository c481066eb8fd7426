//! Compiling a JSON Schema value into [`Schema`] nodes.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::super::regex::Regex;
use super::formats;
use super::relax::relax_root;
use super::rules::*;
use super::vocabulary::{has_type, ANNOTATIONS, KEYWORDS};
use bounds::{count_bounds, int_range, string_node, RANGE_KEYWORDS};

mod bounds;
mod decimal_range;
mod union;

/// A list of strings (`type`, `required`), or `error` at `path`.
fn strings<'v>(value: &'v Value, path: &str, error: &str) -> Result<Vec<&'v str>, SchemaError> {
    let list = match value {
        Value::Array(items) => items.iter().map(Value::as_str).collect::<Option<Vec<_>>>(),
        _ => None,
    };
    list.ok_or_else(|| SchemaError::at(path, error))
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    literals: Vec<Vec<Vec<u8>>>,
    refs: HashMap<String, NodeId>,
    /// `$ref` targets being compiled, by their reserved id (a recursive union asks their kinds).
    pending: HashMap<NodeId, &'a Value>,
    /// `Tagged` nodes whose alternatives are resolved at the end, with their paths.
    tagged: Vec<(NodeId, String)>,
    /// Relaxed mode: a union that cannot tell objects (or other values of one kind) apart
    /// takes any value of that kind, and `false` schemas describe no value.
    relaxed: bool,
    /// Paths of what relaxed mode does not enforce.
    ignored: Vec<String>,
    /// Compiled `pattern`s, by the index string nodes hold.
    patterns: Vec<Arc<Regex>>,
}

impl Schema {
    /// Compiles `schema` strictly (`response_format` `json_schema`): every keyword outside
    /// the subset is an error with its path. Its root must describe an object.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        Compiler::new(schema, false).finish(schema)
    }

    /// Compiles `schema` leniently (tool parameters, as agents send them): what the subset
    /// cannot enforce is left out and its path returned (as `#/properties/x/pattern`), so the
    /// schema's documents are all accepted but some others may be too. See the `relax`
    /// module for what is left out. A root saying nothing about its kind is any object. Only
    /// a broken schema is an error: one not an object or boolean, a `$ref` leading nowhere,
    /// an unknown type, impossible bounds, or a root that is not an object.
    pub fn compile_relaxed(schema: &Value) -> Result<(Schema, Vec<String>), SchemaError> {
        let mut ignored = Vec::new();
        let relaxed = relax_root(schema, &mut ignored)?;
        let mut c = Compiler::new(&relaxed, true);
        c.ignored = ignored;
        let root = c.node(&relaxed, "#")?;
        let ignored = std::mem::take(&mut c.ignored);
        Ok((c.finish_at(root)?, ignored))
    }
}

impl<'a> Compiler<'a> {
    fn new(root: &'a Value, relaxed: bool) -> Self {
        Compiler {
            root,
            nodes: Vec::new(),
            // Set 0: the literals of a value under no schema.
            literals: vec![vec![b"false".to_vec(), b"null".to_vec(), b"true".to_vec()]],
            refs: HashMap::new(),
            pending: HashMap::new(),
            tagged: Vec::new(),
            relaxed,
            ignored: Vec::new(),
            patterns: Vec::new(),
        }
    }

    fn finish(mut self, schema: &'a Value) -> Result<Schema, SchemaError> {
        let root = self.node(schema, "#")?;
        self.finish_at(root)
    }

    /// The schema rooted at `root`, once checked: no `$ref` left pending, a finite document
    /// within the depth limit, an object at the root.
    fn finish_at(mut self, root: NodeId) -> Result<Schema, SchemaError> {
        if self.nodes.iter().any(|n| matches!(n, Node::Pending)) {
            return Err(SchemaError::at(
                "#",
                "a $ref refers to itself without describing a value",
            ));
        }
        self.resolve_tagged()?;
        let min_depth = min_depths(&self.nodes);
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
            self.nodes[root as usize],
            Node::Object { .. } | Node::AnyObject | Node::Tagged { .. }
        ) {
            return Err(SchemaError::at(
                "#",
                "the schema must describe an object (\"type\": \"object\")",
            ));
        }
        Ok(Schema {
            nodes: self.nodes,
            literals: self.literals,
            min_depth,
            root,
            patterns: self.patterns,
        })
    }

    /// A string node: its length bounds, and its `pattern` compiled, or else its `format`
    /// where the decoder enforces it (`formats.rs`; a pattern and such a format together are
    /// not supported). A pattern the regex engine cannot take is an error, or in relaxed mode
    /// left out and reported.
    fn string(
        &mut self,
        map: &serde_json::Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaError> {
        let mut node = string_node(map, path)?;
        let format = (map.get("format").and_then(Value::as_str)).and_then(formats::regex);
        let (at, compiled) = match (map.get("pattern"), format) {
            (Some(_), Some(_)) if !self.relaxed => {
                let error = "a pattern beside an enforced format is not supported";
                return Err(SchemaError::at(&format!("{path}/format"), error));
            }
            (Some(pattern), format) => {
                if format.is_some() {
                    self.ignored.push(format!("{path}/format"));
                }
                let compiled = match pattern.as_str() {
                    Some(p) => Regex::compile_search(p).map_err(|e| e.to_string()),
                    None => Err("pattern must be a string".to_string()),
                };
                (format!("{path}/pattern"), compiled)
            }
            (None, Some(format)) => {
                let compiled = Regex::compile(&format).map_err(|e| e.to_string());
                (format!("{path}/format"), compiled)
            }
            (None, None) => return Ok(node),
        };
        // A pattern whose matches are all longer than maxLength, or all shorter than
        // minLength, allows no string at all.
        let compiled = compiled.and_then(|regex| match &node {
            Node::String { max, .. } if regex.shortest_match_chars() > *max => Err(format!(
                "the pattern needs at least {} characters, more than maxLength {max}",
                regex.shortest_match_chars()
            )),
            Node::String { min, .. } if regex.longest_match_chars() < *min => Err(format!(
                "the pattern allows at most {} characters, fewer than minLength {min}",
                regex.longest_match_chars()
            )),
            _ => Ok(regex),
        });
        match compiled {
            Ok(regex) if self.patterns.len() < usize::from(u16::MAX) => {
                if let Node::String { pattern, .. } = &mut node {
                    *pattern = Some(self.patterns.len() as u16);
                }
                self.patterns.push(Arc::new(regex));
            }
            _ if self.relaxed => self.ignored.push(at),
            Ok(_) => return Err(SchemaError::at(&at, "the schema has too many patterns")),
            Err(e) => return Err(SchemaError::at(&at, e)),
        }
        Ok(node)
    }

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
            Value::Bool(false) if self.relaxed => return self.push(Node::Nothing),
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
            if !KEYWORDS.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
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
                    ids.push((
                        self.node(option, &format!("{path}/{key}/{i}"))?,
                        Some(option),
                    ));
                }
                return self.union(ids, path, &format!("{path}/{key}"));
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
            None if is(&RANGE_KEYWORDS) => vec!["number"],
            None if is(&["minLength", "maxLength", "pattern"]) => vec!["string"],
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
                "string" => self.string(map, path)?,
                "number" => self.number(map, path)?,
                "integer" => Node::Number {
                    integer: true,
                    range: int_range(map, path)?,
                    decimal: None,
                },
                "boolean" => self.literal_set(&[Value::Bool(false), Value::Bool(true)], path)?,
                "null" => self.literal_set(&[Value::Null], path)?,
                other => return Err(SchemaError::at(path, format!("unknown type \"{other}\""))),
            };
            ids.push(self.push(node)?);
        }
        match ids.as_slice() {
            [] => Err(SchemaError::at(path, "type lists no type")),
            [one] => Ok(*one),
            _ => {
                let options = ids.into_iter().map(|id| (id, None)).collect();
                self.union(options, path, &format!("{path}/type"))
            }
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
        let (min, max) = count_bounds(map, path, "minItems", "maxItems")?;
        let items = match map.get("items") {
            None => self.push(Node::Any)?,
            Some(items) => self.node(items, &format!("{path}/items"))?,
        };
        Ok(Node::Array { items, min, max })
    }
}
