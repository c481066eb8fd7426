//! Llama 3.1/3.2/3.3 JSON calls: the whole message is `{"name": "f", "parameters": {...}}`
//! (or `"arguments"`), maybe after `<|python_tag|>`, several joined by `;`.
//!
//! A message is read as calls only when it begins (after whitespace) with `<|python_tag|>` or
//! with `{"name"`; anything else is content, and text is held back only while its beginning can
//! still become one of those. A JSON answer that has a `name` but no arguments key is content.
//! After the calls, text other than `;` and whitespace is content.

use super::envelope::{envelope_call, EnvelopeCall};
use super::json_scan::{scan_value, skip_ws, Scan};
use super::markup::{may_become, push_call};
use super::snapshot::Snapshot;
use super::syntax::{ConstrainedCall, ToolCallSyntax};
use super::ToolCallFormat;
use crate::constraint::{ToolCallFraming, ToolCallMode};

const PYTHON_TAG: &str = "<|python_tag|>";
const NAME_KEY: &str = "\"name\"";

/// Content and Llama 3 calls from `start` on.
pub(super) fn parse(s: &str, start: usize, finished: bool, snapshot: &mut Snapshot) {
    let at = skip_ws(s, start);
    let rest = &s[at..];
    let tagged = rest.starts_with(PYTHON_TAG);
    let body = if let Some(after) = rest.strip_prefix(PYTHON_TAG) {
        s.len() - after.len()
    } else if rest.starts_with('{') {
        let key = &s[skip_ws(s, at + 1)..];
        if key.starts_with(NAME_KEY) {
            at
        } else if may_become(key, NAME_KEY, finished) {
            return;
        } else {
            return snapshot.content(&s[start..]);
        }
    } else if rest.is_empty() || may_become(rest, PYTHON_TAG, finished) {
        if finished {
            snapshot.content(&s[start..]);
        }
        return;
    } else {
        return snapshot.content(&s[start..]);
    };
    let mut pos = body;
    let mut first = true;
    loop {
        let at = skip_ws(s, pos);
        let Some(&byte) = s.as_bytes().get(at) else {
            if first && finished {
                snapshot.malformed();
                snapshot.content(&s[start..]);
            }
            return;
        };
        let call = match (byte, first) {
            (b'{', _) => envelope_call(s, at, finished, true),
            (_, true) => EnvelopeCall::NotCall { fail_at: at },
            (_, false) => return snapshot.content(&s[at..]),
        };
        let call = match call {
            EnvelopeCall::Pending => return,
            EnvelopeCall::NotCall { .. } => {
                // A whole JSON object that is no call is an answer, not a broken call.
                let answer = first && !tagged && matches!(scan_value(s, at), Scan::Complete(_));
                if !answer {
                    snapshot.malformed();
                }
                return snapshot.content(if first { &s[start..] } else { &s[at..] });
            }
            EnvelopeCall::Call(call) => call,
        };
        first = false;
        let envelope = call.envelope;
        let raw = call.raw_from.is_some();
        push_call(s, call, finished, None, snapshot);
        let end = match envelope {
            _ if raw => return,
            Scan::Complete(end) => end,
            Scan::Incomplete => return,
            Scan::Invalid(at) => return snapshot.content(&s[at..]),
        };
        let next = skip_ws(s, end);
        match s.as_bytes().get(next) {
            None => return,
            Some(b';') => pos = next + 1,
            Some(_) => return snapshot.content(&s[next..]),
        }
    }
}

/// Llama 3's framing: a forced call is the bare `{"name", "parameters"}` object; `auto` is
/// free, since nothing marks where a call begins.
pub(super) struct Llama3Json;

impl ToolCallSyntax for Llama3Json {
    fn markers(&self) -> &'static [&'static str] {
        &[PYTHON_TAG]
    }

    fn constrained_call(&self, mode: &ToolCallMode) -> Option<ConstrainedCall> {
        ConstrainedCall::forced_only(
            mode,
            ToolCallFraming::llama3_json,
            ToolCallFormat::Llama3Json,
        )
    }
}
