//! Mistral's `[TOOL_CALLS]` calls, both spellings (either format name reads both, since the
//! family is easier to know than the tokenizer version):
//!
//! - list (v0.3, Nemo, Small before 2503): `[TOOL_CALLS][{"name": "f", "arguments": {...}}]`;
//! - name and arguments (Small 3.2, Devstral, Magistral, Ministral 3):
//!   `[TOOL_CALLS]f[ARGS]{...}`, repeated for several calls.
//!
//! No closing marker: arguments that break run to the next `[TOOL_CALLS]` or the end.

use super::call_list::call_list;
use super::generic_json::GenericJson;
use super::json_scan::{scan_value, skip_ws, Scan};
use super::markup::{json_call, may_become, partial_marker_len, scan_tagged, Markup};
use super::snapshot::Snapshot;
use super::syntax::{CallIdForm, ConstrainedCall, ToolCallSyntax};
use crate::constraint::ToolCallMode;

const OPEN: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";

/// Content and Mistral calls from `start` on.
pub(super) fn parse(s: &str, start: usize, finished: bool, snapshot: &mut Snapshot) {
    scan_tagged(s, start, finished, OPEN, snapshot, |body, snapshot| {
        let at = skip_ws(s, body);
        match s.as_bytes().get(at) {
            None if finished => Markup::NotCall { content_end: None },
            None => Markup::Pending,
            Some(b'[') => call_list(s, at, finished, None, snapshot),
            Some(b'{') => json_call(s, at, finished, None, snapshot),
            Some(_) => named_call(s, at, finished, snapshot),
        }
    });
}

/// `name[ARGS]{...}` from `start`.
fn named_call(s: &str, start: usize, finished: bool, snapshot: &mut Snapshot) -> Markup {
    let name_end = s[start..]
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map_or(s.len(), |at| start + at);
    let rest = &s[name_end..];
    if rest.is_empty() || may_become(rest, ARGS, finished) {
        return if finished {
            Markup::NotCall { content_end: None }
        } else {
            Markup::Pending
        };
    }
    if !rest.starts_with(ARGS) || name_end == start {
        return Markup::NotCall {
            content_end: Some(name_end),
        };
    }
    let name = s[start..name_end].to_string();
    let value_start = skip_ws(s, name_end + ARGS.len());
    let (arguments, closed, resume, malformed) = if value_start >= s.len() {
        ("", finished, None, finished)
    } else {
        match scan_value(s, value_start) {
            Scan::Complete(end) => (
                &s[value_start..end],
                true,
                Some(end),
                s.as_bytes()[value_start] != b'{',
            ),
            Scan::Incomplete => (&s[value_start..], finished, None, finished),
            Scan::Invalid(broke_at) => {
                // Raw up to the next call, looked for only where the JSON broke (see
                // `raw_until`); the next call's marker starts content again.
                let tail = &s[broke_at..];
                match tail.find(OPEN) {
                    Some(at) => (
                        &s[value_start..broke_at + at],
                        true,
                        Some(broke_at + at),
                        true,
                    ),
                    None if finished => (&s[value_start..], true, None, true),
                    None => (
                        &s[value_start..s.len() - partial_marker_len(tail, &[OPEN])],
                        false,
                        None,
                        true,
                    ),
                }
            }
        }
    };
    if malformed {
        snapshot.malformed();
    }
    snapshot.call(name, arguments.to_string(), closed);
    Markup::Calls { resume }
}

/// Mistral's framing, both spellings. `[TOOL_CALLS]` is a control token, and control tokens
/// never appear in constrained output, so a forced call is the generic envelope, read as such.
pub(super) struct Mistral;

impl ToolCallSyntax for Mistral {
    fn markers(&self) -> &'static [&'static str] {
        &[OPEN, ARGS, "[CALL_ID]"]
    }

    fn constrained_call(&self, mode: &ToolCallMode) -> Option<ConstrainedCall> {
        GenericJson.constrained_call(mode)
    }

    fn call_ids(&self) -> CallIdForm {
        CallIdForm::NineAlphanumerics
    }
}
