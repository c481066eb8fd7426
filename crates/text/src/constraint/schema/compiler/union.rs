//! Compiling unions (`anyOf`, `oneOf`, a list of types): alternatives told apart by the first
//! byte of a value, and objects told apart by a discriminator key that must come first.

use serde_json::Value;

use super::*;

/// Most `$ref` hops followed to find the object an alternative describes.
const MAX_REF_HOPS: usize = 32;

impl<'a> Compiler<'a> {
    /// A union of `options` (compiled, with their schema values where they come from
    /// `anyOf`/`oneOf`). Alternatives that can begin with the same byte are refused, except
    /// objects with a discriminator; in relaxed mode, they become any value of that kind and
    /// `keyword` (the union's own path) is reported.
    pub(super) fn union(
        &mut self,
        options: Vec<(NodeId, Option<&'a Value>)>,
        path: &str,
        keyword: &str,
    ) -> Result<NodeId, SchemaError> {
        let mut by_kind: [Option<NodeId>; 6] = [None; 6];
        let mut widened = false;
        for (kind, slot) in by_kind.iter_mut().enumerate() {
            let mut claims: Vec<(NodeId, Option<&'a Value>)> = Vec::new();
            for &(id, raw) in &options {
                if self.kinds(id).contains(&kind) && !claims.iter().any(|c| c.0 == id) {
                    claims.push((id, raw));
                }
            }
            *slot = match claims.as_slice() {
                [] => None,
                [(one, _)] => Some(*one),
                _ => match (kind == OBJECT).then(|| self.tagged(&claims, keyword)) {
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Some(tagged))) => Some(tagged),
                    _ if self.relaxed => {
                        widened = true;
                        Some(self.any_of_kind(kind, path)?)
                    }
                    _ => {
                        return Err(SchemaError::at(
                            path,
                            "alternatives must begin with different JSON types (two of them \
                             can start with the same character), or be objects told apart by \
                             a key whose value is a distinct const in each",
                        ))
                    }
                },
            };
        }
        if widened {
            self.ignored.push(keyword.to_string());
        }
        self.push(Node::Union(by_kind))
    }

    /// Any value of one kind (a union that cannot tell its alternatives apart, relaxed).
    fn any_of_kind(&mut self, kind: usize, path: &str) -> Result<NodeId, SchemaError> {
        let node = match kind {
            OBJECT => Node::AnyObject,
            ARRAY => Node::AnyArray,
            STRING => ANY_STRING,
            NUMBER => Node::Number {
                integer: false,
                range: IntRange::ANY,
                decimal: None,
            },
            TRUE_FALSE => self.literal_set(&[Value::Bool(false), Value::Bool(true)], path)?,
            _ => self.literal_set(&[Value::Null], path)?,
        };
        self.push(node)
    }

    /// Pushes a `Tagged` node when every alternative is an object schema with a property
    /// whose value is a single literal (`const` or a one-value `enum`) distinct in each;
    /// `None` when they are not. The alternatives' key indexes are found once `$ref`s are
    /// resolved ([`Compiler::resolve_tagged`]).
    fn tagged(
        &mut self,
        claims: &[(NodeId, Option<&'a Value>)],
        path: &str,
    ) -> Result<Option<NodeId>, SchemaError> {
        let mut tags: Vec<serde_json::Map<String, Value>> = Vec::new();
        for (_, raw) in claims {
            let Some(schema) = raw.and_then(|raw| self.resolve_refs(raw)) else {
                return Ok(None);
            };
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return Ok(None);
            };
            let only_objects = match schema.get("type") {
                Some(Value::String(t)) => t == "object",
                _ => false,
            };
            if !only_objects && schema.get("type").is_some() {
                return Ok(None);
            }
            let literal = |s: &Value| {
                let s = self.resolve_refs(s)?;
                match (s.get("const"), s.get("enum").and_then(Value::as_array)) {
                    (Some(c), _) => Some(c.clone()),
                    (None, Some(values)) if values.len() == 1 => Some(values[0].clone()),
                    _ => None,
                }
            };
            tags.push(
                properties
                    .iter()
                    .filter_map(|(name, s)| Some((name.clone(), literal(s)?)))
                    .collect(),
            );
        }
        let mut names: Vec<&String> = tags[0].keys().collect();
        names.sort();
        let key = names.into_iter().find(|name| {
            let mut texts: Vec<Option<String>> = tags
                .iter()
                .map(|t| t.get(*name).map(Value::to_string))
                .collect();
            let all = texts.iter().all(Option::is_some);
            texts.sort();
            texts.dedup();
            all && texts.len() == tags.len()
        });
        let Some(key) = key.cloned() else {
            return Ok(None);
        };
        let mut by_text: Vec<(Vec<u8>, NodeId)> = tags
            .iter()
            .zip(claims)
            .map(|(t, (id, _))| (serde_json::to_vec(&t[&key]).expect("serializes"), *id))
            .collect();
        by_text.sort();
        let key_text = serde_json::to_vec(&key).expect("a string serializes");
        self.add_literals(vec![key_text], path)?;
        let key_set = self.literals.len() - 1;
        self.add_literals(by_text.iter().map(|(t, _)| t.clone()).collect(), path)?;
        let values = self.push(Node::Literals(self.literals.len() - 1))?;
        let alternatives = by_text.into_iter().map(|(_, id)| (id, 0)).collect();
        let id = self.push(Node::Tagged {
            key: key_set,
            values,
            alternatives,
        })?;
        self.tagged.push((id, path.to_string()));
        Ok(Some(id))
    }

    /// The schema a value names once its `$ref`s are followed, if they lead into this schema.
    fn resolve_refs(&self, mut schema: &'a Value) -> Option<&'a Value> {
        for _ in 0..MAX_REF_HOPS {
            match schema.get("$ref") {
                None => return Some(schema),
                Some(r) => schema = self.root.pointer(r.as_str()?.strip_prefix('#')?)?,
            }
        }
        None
    }

    /// Once every `$ref` is resolved: each `Tagged` alternative's object node and the
    /// discriminator's index among its keys. A `Tagged` node whose alternatives turned out not
    /// to be such objects is an error, or any object in relaxed mode.
    pub(super) fn resolve_tagged(&mut self) -> Result<(), SchemaError> {
        for (id, path) in std::mem::take(&mut self.tagged) {
            let Node::Tagged {
                key, alternatives, ..
            } = &self.nodes[id as usize]
            else {
                continue;
            };
            let key_text = &self.literals[*key][0];
            let resolved: Option<Vec<(NodeId, u8)>> = alternatives
                .iter()
                .map(|&(alt, _)| {
                    let alt = match &self.nodes[alt as usize] {
                        Node::Union(by_kind) => by_kind[OBJECT]?,
                        _ => alt,
                    };
                    let Node::Object { keys, .. } = &self.nodes[alt as usize] else {
                        return None;
                    };
                    let index = self.literals[*keys].iter().position(|k| k == key_text)?;
                    Some((alt, index as u8))
                })
                .collect();
            match resolved {
                Some(resolved) => {
                    if let Node::Tagged { alternatives, .. } = &mut self.nodes[id as usize] {
                        *alternatives = resolved;
                    }
                }
                None if self.relaxed => {
                    self.nodes[id as usize] = Node::AnyObject;
                    self.ignored.push(path);
                }
                None => {
                    return Err(SchemaError::at(
                        &path,
                        "the alternatives told apart by a key must be objects with that key",
                    ))
                }
            }
        }
        Ok(())
    }

    /// The kinds of first byte a node's values can start with.
    pub(super) fn kinds(&self, id: NodeId) -> Vec<usize> {
        match &self.nodes[id as usize] {
            Node::Pending => match self.pending.get(&id) {
                Some(target) => raw_kinds(target),
                None => (0..6).collect(),
            },
            Node::Nothing => Vec::new(),
            Node::Any => (0..6).collect(),
            Node::AnyObject | Node::Object { .. } | Node::Tagged { .. } => vec![OBJECT],
            Node::AnyArray | Node::Array { .. } => vec![ARRAY],
            Node::String { .. } => vec![STRING],
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
