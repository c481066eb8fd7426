//! Qwen3-Coder and Qwen3.5 (also Nemotron 3, Step 3.5): calls as XML-ish parameter lists,
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! The arguments object is built from the parameters: `{"city": "Paris"}`, each value typed by
//! the tool's JSON Schema. A parameter reaches the stream once its `</parameter>` is seen. A
//! Hermes JSON object inside `<tool_call>` is accepted too (what a JSON grammar forces).

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::hermes::{json_body, CLOSE, OPEN};
use super::json_scan::skip_ws;
use super::markup::{after_marker, may_become, resume_after, scan_tagged, Markup};
use super::snapshot::Snapshot;
use super::syntax::{ConstrainedCall, ToolCallSyntax};
use super::ToolCallFormat;
use crate::constraint::{ToolCallFraming, ToolCallMode};

const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";

/// Content and Qwen XML calls from `start` on.
pub(super) fn parse(
    s: &str,
    start: usize,
    finished: bool,
    schemas: &BTreeMap<String, Json>,
    snapshot: &mut Snapshot,
) {
    scan_tagged(
        s,
        start,
        finished,
        OPEN,
        snapshot,
        |body, snapshot| match json_body(s, body, finished, snapshot) {
            Ok(markup) => markup,
            Err(at) if s[at..].starts_with(FUNCTION) => {
                function(s, at + FUNCTION.len(), finished, schemas, snapshot)
            }
            Err(at) if may_become(&s[at..], FUNCTION, finished) => Markup::Pending,
            Err(at) => Markup::NotCall {
                content_end: after_marker(s, at, CLOSE),
            },
        },
    );
}

/// The call whose name starts at `name_start` (just after `<function=`).
fn function(
    s: &str,
    name_start: usize,
    finished: bool,
    schemas: &BTreeMap<String, Json>,
    snapshot: &mut Snapshot,
) -> Markup {
    let Some(name_end) = s[name_start..]
        .find(['>', '<', '\n'])
        .map(|at| name_start + at)
    else {
        return if finished {
            Markup::NotCall { content_end: None }
        } else {
            Markup::Pending
        };
    };
    let name = s[name_start..name_end].trim();
    if !s[name_end..].starts_with('>') || name.is_empty() {
        return Markup::NotCall {
            content_end: after_marker(s, name_end, CLOSE),
        };
    }
    let schema = schemas.get(name);
    let mut arguments = String::from("{");
    let mut pos = name_end + 1;
    // (closed, where content resumes)
    let (closed, resume) = loop {
        let at = skip_ws(s, pos);
        let rest = &s[at..];
        if let Some(after) = rest.strip_prefix(PARAMETER) {
            let key_start = at + PARAMETER.len();
            let Some(key_end) = after.find('>').map(|k| key_start + k) else {
                break (finished, None);
            };
            let value_start = key_end + 1;
            let (value, next) = match s[value_start..].find(PARAMETER_END) {
                Some(v) => (
                    &s[value_start..value_start + v],
                    Some(value_start + v + PARAMETER_END.len()),
                ),
                None if finished => (&s[value_start..], None),
                None => break (false, None),
            };
            let key = s[key_start..key_end].trim();
            if arguments.len() > 1 {
                arguments.push_str(", ");
            }
            arguments.push_str(&Json::from(key).to_string());
            arguments.push_str(": ");
            arguments.push_str(&typed_value(schema, key, value));
            match next {
                Some(next) => pos = next,
                None => break (true, None),
            }
        } else if rest.starts_with(FUNCTION_END) {
            let end = at + FUNCTION_END.len();
            break (true, resume_after(s, end, Some(CLOSE), finished));
        } else if rest.is_empty()
            || may_become(rest, PARAMETER, finished)
            || may_become(rest, FUNCTION_END, finished)
        {
            break (finished, None);
        } else {
            // Stray text inside the function: the call ends here, at its closing marker.
            snapshot.malformed();
            break (true, after_marker(s, at, CLOSE));
        }
    };
    if closed {
        arguments.push('}');
    }
    snapshot.call(name.to_string(), arguments, closed);
    Markup::Calls { resume }
}

/// A parameter's value as JSON text: typed by the schema's `type` for `key` (a non-string type
/// parses as JSON, falling back to a string), or for an unknown parameter JSON when it parses.
/// One newline at each end is the markup's, not the value's.
fn typed_value(schema: Option<&Json>, key: &str, raw: &str) -> String {
    let raw = raw.strip_prefix('\n').unwrap_or(raw);
    let raw = raw.strip_suffix('\n').unwrap_or(raw);
    let declared = schema
        .and_then(|schema| schema.get("properties"))
        .and_then(|properties| properties.get(key))
        .and_then(|property| property.get("type"));
    let is_string = match declared {
        Some(Json::String(kind)) => kind == "string",
        Some(Json::Array(kinds)) => kinds.iter().any(|kind| kind == "string"),
        _ => false,
    };
    if !is_string {
        if let Ok(value) = serde_json::from_str::<Json>(raw) {
            return value.to_string();
        }
    }
    Json::from(raw).to_string()
}

/// Qwen XML's framing: a forced call is written as Hermes JSON inside `<tool_call>` (the
/// parser reads both); `auto` is free, since XML parameters are not JSON.
pub(super) struct QwenXml;

impl ToolCallSyntax for QwenXml {
    fn markers(&self) -> &'static [&'static str] {
        &[OPEN, CLOSE]
    }

    fn constrained_call(&self, mode: &ToolCallMode) -> Option<ConstrainedCall> {
        ConstrainedCall::forced_only(mode, ToolCallFraming::hermes, ToolCallFormat::QwenXml)
    }
}
