//! A JSON array of call envelopes, `[{"name": ..., "arguments": ...}, ...]`: Mistral's
//! `[TOOL_CALLS][...]`, the generic envelope's `tool_calls`, a list inside `<tool_call>`.

use super::envelope::{envelope_call, EnvelopeCall};
use super::json_scan::{scan_value, skip_ws, Scan};
use super::markup::{push_call, Markup};
use super::snapshot::Snapshot;

/// Parses the array whose `[` is at `start`; calls end at `close` when their arguments break
/// (`None`: the end of the text). `Markup::Calls { resume }` points just after the `]` (or at
/// whatever broke the array after its first call); a first element that is no call makes the
/// whole array `NotCall` (ending after `close`, or at the end of the text).
pub(super) fn call_list(
    s: &str,
    start: usize,
    finished: bool,
    close: Option<&str>,
    snapshot: &mut Snapshot,
) -> Markup {
    let b = s.as_bytes();
    let mut pushed = false;
    let mut pos = start + 1;
    loop {
        let at = skip_ws(s, pos);
        match b.get(at) {
            None => return held(s, pushed, finished),
            Some(b']') if !pushed => {
                return Markup::Calls {
                    resume: Some(at + 1),
                }
            }
            Some(b'{') => {}
            Some(_) if pushed => return Markup::Calls { resume: Some(at) },
            Some(_) => {
                return Markup::NotCall {
                    content_end: close.and_then(|close| super::markup::after_marker(s, at, close)),
                }
            }
        }
        let call = match envelope_call(s, at, finished, false) {
            EnvelopeCall::Pending => return held(s, pushed, finished),
            EnvelopeCall::NotCall { fail_at } if !pushed => {
                return Markup::NotCall {
                    content_end: close
                        .and_then(|close| super::markup::after_marker(s, fail_at, close)),
                }
            }
            EnvelopeCall::NotCall { .. } => {
                snapshot.malformed();
                // A later element cut off before its name (the text ends inside it) is
                // dropped, never shown; one that is no call: it and what follows are content.
                if finished && scan_value(s, at) == Scan::Incomplete {
                    return Markup::Calls {
                        resume: Some(s.len()),
                    };
                }
                return Markup::Calls { resume: Some(at) };
            }
            EnvelopeCall::Call(call) => call,
        };
        pushed = true;
        let envelope = call.envelope;
        if call.raw_from.is_some() {
            return Markup::Calls {
                resume: push_call(s, call, finished, close, snapshot),
            };
        }
        push_call(s, call, finished, None, snapshot);
        let end = match envelope {
            Scan::Complete(end) => end,
            Scan::Incomplete => return held(s, pushed, finished),
            Scan::Invalid(at) => return Markup::Calls { resume: Some(at) },
        };
        let next = skip_ws(s, end);
        match b.get(next) {
            None => return held(s, pushed, finished),
            Some(b',') => pos = next + 1,
            Some(b']') => {
                return Markup::Calls {
                    resume: Some(next + 1),
                }
            }
            Some(_) => return Markup::Calls { resume: Some(next) },
        }
    }
}

/// The outcome when the text ends inside the array.
fn held(s: &str, pushed: bool, finished: bool) -> Markup {
    match (pushed, finished) {
        (true, true) => Markup::Calls {
            resume: Some(s.len()),
        },
        (true, false) => Markup::Calls { resume: None },
        (false, true) => Markup::NotCall { content_end: None },
        (false, false) => Markup::Pending,
    }
}
