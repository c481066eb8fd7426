//! One schema for a call to one of several tools: `{"<name key>": "<tool>", "<arguments
//! key>": <that tool's arguments>}`, the name first, built from the tools' compiled schemas.

use super::rules::*;

impl Schema {
    /// The schema of a call object: `name_key` (first) holds one of the tools' names and
    /// `args_key` an object conforming to that tool's schema, both required, no other key.
    /// Fails on an empty or repeated name list, or when a tool's arguments would nest too deep.
    pub fn tool_call(
        name_key: &str,
        args_key: &str,
        tools: &[(&str, &Schema)],
    ) -> Result<Schema, SchemaError> {
        if tools.is_empty() {
            return Err(SchemaError::at("#", "no tool to call"));
        }
        if name_key == args_key {
            return Err(SchemaError::at(
                "#",
                "the name and arguments keys are the same",
            ));
        }
        let text = |s: &str| serde_json::to_vec(s).expect("a string serializes");
        // Set 0 is the same in every schema: the literals of a value under no schema.
        let mut literals = vec![tools[0].1.literals[0].clone()];
        let mut nodes: Vec<Node> = Vec::new();
        let mut by_name: Vec<(Vec<u8>, NodeId)> = Vec::new();
        let mut patterns = Vec::new();
        let (name_text, args_text) = (text(name_key), text(args_key));
        let name_first = name_text < args_text;
        for (name, schema) in tools {
            let node_offset = nodes.len();
            let set_offset = literals.len() - 1;
            let pattern_offset = patterns.len();
            if pattern_offset + schema.patterns.len() > usize::from(u16::MAX) {
                return Err(SchemaError::at(
                    "#",
                    "the tools' schemas have too many patterns",
                ));
            }
            patterns.extend(schema.patterns.iter().cloned());
            if node_offset + schema.nodes.len() + 3 >= (NodeId::MAX - 4) as usize {
                return Err(SchemaError::at("#", "the tools' schemas are too large"));
            }
            let id = |n: NodeId| n + node_offset as NodeId;
            let set = |s: usize| if s == 0 { 0 } else { s + set_offset };
            nodes.extend(schema.nodes.iter().map(|node| match node {
                Node::Object {
                    keys,
                    values,
                    required,
                } => Node::Object {
                    keys: set(*keys),
                    values: values.iter().map(|&v| id(v)).collect(),
                    required: *required,
                },
                Node::Array { items, min, max } => Node::Array {
                    items: id(*items),
                    min: *min,
                    max: *max,
                },
                Node::Literals(s) => Node::Literals(set(*s)),
                Node::String { min, max, pattern } => Node::String {
                    min: *min,
                    max: *max,
                    pattern: pattern.map(|p| p + pattern_offset as u16),
                },
                Node::Number {
                    integer,
                    range,
                    decimal,
                } => Node::Number {
                    integer: *integer,
                    range: *range,
                    decimal: decimal.map(|p| p + pattern_offset as u16),
                },
                Node::Union(by_kind) => Node::Union(by_kind.map(|o| o.map(id))),
                Node::Tagged {
                    key,
                    values,
                    alternatives,
                } => Node::Tagged {
                    key: set(*key),
                    values: id(*values),
                    alternatives: alternatives.iter().map(|&(a, k)| (id(a), k)).collect(),
                },
                other => other.clone(),
            }));
            literals.extend(schema.literals[1..].iter().cloned());
            literals.push(vec![text(name)]);
            nodes.push(Node::Literals(literals.len() - 1));
            let name_node = (nodes.len() - 1) as NodeId;
            let args_node = id(schema.root);
            let (keys, values) = if name_first {
                (
                    vec![name_text.clone(), args_text.clone()],
                    vec![name_node, args_node],
                )
            } else {
                (
                    vec![args_text.clone(), name_text.clone()],
                    vec![args_node, name_node],
                )
            };
            literals.push(keys);
            nodes.push(Node::Object {
                keys: literals.len() - 1,
                values,
                required: 0b11,
            });
            by_name.push((text(name), (nodes.len() - 1) as NodeId));
        }
        by_name.sort();
        if by_name.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(SchemaError::at("#", "two tools have the same name"));
        }
        if literals.len() >= u16::MAX as usize {
            return Err(SchemaError::at("#", "the tools' schemas are too large"));
        }
        literals.push(vec![name_text]);
        let key = literals.len() - 1;
        literals.push(by_name.iter().map(|(t, _)| t.clone()).collect());
        nodes.push(Node::Literals(literals.len() - 1));
        let values = (nodes.len() - 1) as NodeId;
        let name_index = if name_first { 0 } else { 1 };
        nodes.push(Node::Tagged {
            key,
            values,
            alternatives: by_name.iter().map(|&(_, o)| (o, name_index)).collect(),
        });
        let root = (nodes.len() - 1) as NodeId;
        let min_depth = min_depths(&nodes);
        if min_depth[root as usize] as usize > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::at(
                "#",
                format!("a tool's arguments must nest less than {MAX_SCHEMA_DEPTH} levels"),
            ));
        }
        Ok(Schema {
            nodes,
            literals,
            min_depth,
            root,
            patterns,
        })
    }
}
