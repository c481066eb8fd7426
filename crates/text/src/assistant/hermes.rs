//! Hermes (Hermes 2 Pro and 3, Qwen2.5, Qwen3, QwQ, Granite 4):
//! `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, any number of times, with
//! content around them. A JSON array of such objects inside one `<tool_call>` is read as
//! several calls (Apriel).

use super::call_list::call_list;
use super::json_scan::skip_ws;
use super::markup::{after_marker, json_call, resume_after, scan_tagged, Markup};
use super::snapshot::Snapshot;
use super::syntax::{ConstrainedCall, ToolCallSyntax};
use super::ToolCallFormat;
use crate::constraint::{ToolCallFraming, ToolCallMode};

/// The opening marker of a call.
pub(super) const OPEN: &str = "<tool_call>";
/// The closing marker of a call.
pub(super) const CLOSE: &str = "</tool_call>";

/// Content and Hermes calls from `start` on.
pub(super) fn parse(s: &str, start: usize, finished: bool, snapshot: &mut Snapshot) {
    scan_tagged(s, start, finished, OPEN, snapshot, |body, snapshot| {
        json_body(s, body, finished, snapshot).unwrap_or_else(|at| Markup::NotCall {
            content_end: after_marker(s, at, CLOSE),
        })
    });
}

/// The JSON inside `<tool_call>` from `body` on; `Err(at)` when it does not begin with `{` or
/// `[` (at `at`).
pub(super) fn json_body(
    s: &str,
    body: usize,
    finished: bool,
    snapshot: &mut Snapshot,
) -> Result<Markup, usize> {
    let at = skip_ws(s, body);
    match s.as_bytes().get(at) {
        None if finished => Ok(Markup::NotCall { content_end: None }),
        None => Ok(Markup::Pending),
        Some(b'{') => Ok(json_call(s, at, finished, Some(CLOSE), snapshot)),
        Some(b'[') => Ok(match call_list(s, at, finished, Some(CLOSE), snapshot) {
            Markup::Calls { resume: Some(end) } => Markup::Calls {
                resume: resume_after(s, end, Some(CLOSE), finished),
            },
            other => other,
        }),
        Some(_) => Err(at),
    }
}

/// Hermes' framing: a call the model opens with `<tool_call>` is held to the schemas in
/// `auto` mode too, since the marker is text the constraint sees.
pub(super) struct Hermes;

impl ToolCallSyntax for Hermes {
    fn markers(&self) -> &'static [&'static str] {
        &[OPEN, CLOSE]
    }

    fn constrained_call(&self, _mode: &ToolCallMode) -> Option<ConstrainedCall> {
        Some(ConstrainedCall {
            framing: ToolCallFraming::hermes(),
            parse_as: ToolCallFormat::Hermes,
        })
    }
}
