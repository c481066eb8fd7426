//! The envelope the server forces by grammar for templates with no known call format:
//! `{"tool_calls": [{"name": "f", "arguments": {...}}, ...]}` or `{"response": "text"}`.
//!
//! Read only when the output (after whitespace) begins with one of those two keys; anything
//! else is content. The response string streams as content, decoded. Text after the envelope
//! is content too (a grammar never lets it happen). A text that ends inside the envelope
//! before a call's name is whole (a forced call cut by `max_tokens`) shows none of it.

use super::call_list::call_list;
use super::json_scan::{scan_string, scan_value, skip_ws, Scan};
use super::markup::Markup;
use super::snapshot::Snapshot;
use super::syntax::{ConstrainedCall, ToolCallSyntax};
use super::ToolCallFormat;
use crate::constraint::{ToolCallFraming, ToolCallMode};

/// Content and calls from `start` on.
pub(super) fn parse(s: &str, start: usize, finished: bool, snapshot: &mut Snapshot) {
    let open = skip_ws(s, start);
    let whole = |snapshot: &mut Snapshot| {
        if finished || !s[start..].trim().is_empty() {
            snapshot.content(&s[start..]);
        }
    };
    if !s[open..].starts_with('{') {
        if !s[open..].is_empty() || finished {
            whole(snapshot);
        }
        return;
    }
    let key_start = skip_ws(s, open + 1);
    let (key, value) = match (
        value_of(s, key_start, "tool_calls"),
        value_of(s, key_start, "response"),
    ) {
        (Key::Value(at), _) => ("tool_calls", at),
        (_, Key::Value(at)) => ("response", at),
        (Key::Maybe, _) | (_, Key::Maybe) if !finished => return,
        // The text ended inside the envelope's opening (`max_tokens` cut a forced call before
        // its name): the envelope is dropped, never shown.
        (Key::Maybe, _) | (_, Key::Maybe) => return snapshot.malformed(),
        _ => return whole(snapshot),
    };
    let end = match (key, s.as_bytes()[value]) {
        ("tool_calls", b'[') => match call_list(s, value, finished, None, snapshot) {
            Markup::Pending => return,
            Markup::NotCall { .. } => {
                snapshot.malformed();
                // Cut before the first call's name: dropped as above; else it is text.
                if scan_value(s, open) != Scan::Incomplete {
                    whole(snapshot);
                }
                return;
            }
            Markup::Calls { resume: None } => return,
            Markup::Calls { resume: Some(end) } => end,
        },
        ("response", b'"') => match response(s, value, snapshot) {
            Some(end) => end,
            None => return,
        },
        _ => return whole(snapshot),
    };
    let close = skip_ws(s, end);
    let tail = match s[close..].strip_prefix('}') {
        Some(_) => skip_ws(s, close + 1),
        None => close,
    };
    if tail < s.len() {
        snapshot.content(&s[tail..]);
    }
}

enum Key {
    /// The key matched; its value starts at this byte.
    Value(usize),
    /// The text ends while still matching.
    Maybe,
    No,
}

/// Whether `"key"` then `:` start at `at`, and where the value starts.
fn value_of(s: &str, at: usize, key: &str) -> Key {
    let quoted = format!("\"{key}\"");
    let rest = &s[at..];
    if !rest.starts_with(&quoted) {
        return if quoted.starts_with(rest) {
            Key::Maybe
        } else {
            Key::No
        };
    }
    let colon = skip_ws(s, at + quoted.len());
    match s.as_bytes().get(colon) {
        None => Key::Maybe,
        Some(b':') => {
            let value = skip_ws(s, colon + 1);
            if value < s.len() {
                Key::Value(value)
            } else {
                Key::Maybe
            }
        }
        Some(_) => Key::No,
    }
}

/// Streams the decoded response string at `start` as content; the byte after it once whole.
/// From a bad escape on, the text is content as written.
fn response(s: &str, start: usize, snapshot: &mut Snapshot) -> Option<usize> {
    match scan_string(s, start) {
        Scan::Complete(end) => {
            snapshot.content(&decode_prefix(&s[start + 1..end - 1]));
            Some(end)
        }
        Scan::Incomplete => {
            snapshot.content(&decode_prefix(&s[start + 1..]));
            None
        }
        Scan::Invalid(at) => {
            snapshot.content(&decode_prefix(&s[start + 1..at]));
            snapshot.content(&s[at..]);
            None
        }
    }
}

/// Decodes the inside of a JSON string so far, stopping before an escape that is not whole
/// yet (a high surrogate waits for its low half). Lone surrogates become U+FFFD, except a
/// high one at the very end, which is dropped.
fn decode_prefix(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(slash) = rest.find('\\') {
        out.push_str(&rest[..slash]);
        rest = &rest[slash..];
        let Some(&kind) = rest.as_bytes().get(1) else {
            return out;
        };
        if kind != b'u' {
            out.push(match kind {
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                other => other as char,
            });
            rest = &rest[2..];
            continue;
        }
        let Some(unit) = hex4(rest, 2) else {
            return out;
        };
        if (0xD800..0xDC00).contains(&unit) {
            let after = &rest[6..];
            if "\\u".starts_with(after) || (after.starts_with("\\u") && after.len() < 6) {
                return out;
            }
            if let Some(low) = after.strip_prefix("\\u").and_then(|_| hex4(after, 2)) {
                if (0xDC00..0xE000).contains(&low) {
                    let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    rest = &rest[12..];
                    continue;
                }
            }
        }
        out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
        rest = &rest[6..];
    }
    out.push_str(rest);
    out
}

/// The four hex digits at `at` of `text`, when all there.
fn hex4(text: &str, at: usize) -> Option<u32> {
    text.get(at..at + 4)
        .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|digits| u32::from_str_radix(digits, 16).ok())
}

/// The generic framing: a forced call is the envelope `{"tool_calls": [...]}`; `auto` is free.
pub(super) struct GenericJson;

impl ToolCallSyntax for GenericJson {
    fn markers(&self) -> &'static [&'static str] {
        &[]
    }

    fn constrained_call(&self, mode: &ToolCallMode) -> Option<ConstrainedCall> {
        ConstrainedCall::forced_only(mode, ToolCallFraming::envelope, ToolCallFormat::GenericJson)
    }
}
