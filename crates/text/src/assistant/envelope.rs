//! The `{"name": ..., "arguments": ...}` object that most JSON tool-call formats wrap a call in,
//! read from a prefix of the text: is it a call yet, which, and how much of its arguments.

use super::json_scan::{scan_string, scan_value, skip_ws, Scan};

/// What a call envelope's text so far amounts to.
#[derive(Debug, PartialEq)]
pub(super) enum EnvelopeCall {
    /// Not decided: nothing of it may be shown yet.
    Pending,
    /// It cannot become a call; found out at this byte (the envelope's end when it closed
    /// without a name).
    NotCall { fail_at: usize },
    /// A call: the name is known and its arguments value has begun.
    Call(StartedCall),
}

/// A call whose name is known, with its arguments so far.
#[derive(Debug, PartialEq)]
pub(super) struct StartedCall {
    pub name: String,
    /// The arguments text so far (empty while a string-encoded arguments value is unfinished).
    pub arguments: String,
    /// The arguments value is finished (or the text is).
    pub closed: bool,
    /// The arguments are not a JSON object.
    pub malformed: bool,
    /// The arguments value (starting at `.0`) broke at byte `.1`: the caller takes the raw text
    /// from `.0` up to the format's end of a call (looked for from `.1` on) as the arguments.
    pub raw_from: Option<(usize, usize)>,
    /// How far the envelope object itself reaches.
    pub envelope: Scan,
}

/// Keys that hold a call's arguments: `arguments` (OpenAI, Hermes), `parameters` (Llama 3).
fn is_arguments_key(key: &str) -> bool {
    key == "arguments" || key == "parameters"
}

/// Reads the envelope object at `start` (`s[start] == '{'`). With `require_arguments`, an
/// envelope with a name but no arguments key is not a call (Llama 3, where a plain JSON answer
/// may have a `name`); otherwise it is a call with `{}`.
pub(super) fn envelope_call(
    s: &str,
    start: usize,
    finished: bool,
    require_arguments: bool,
) -> EnvelopeCall {
    let (name, arguments, envelope) = scan_envelope(s, start);
    match (name, arguments) {
        (Some(name), Some((value_start, value))) => EnvelopeCall::Call(started_call(
            s,
            name,
            value_start,
            value,
            envelope,
            finished,
        )),
        (Some(name), None) if !require_arguments && matches!(envelope, Scan::Complete(_)) => {
            EnvelopeCall::Call(StartedCall {
                name,
                arguments: "{}".to_string(),
                closed: true,
                malformed: false,
                raw_from: None,
                envelope,
            })
        }
        // The text ended after the name, before any arguments (`max_tokens` cut the call): a
        // call with the arguments generated so far, none.
        (Some(name), None) if !require_arguments && finished && envelope == Scan::Incomplete => {
            EnvelopeCall::Call(StartedCall {
                name,
                arguments: String::new(),
                closed: true,
                malformed: true,
                raw_from: None,
                envelope,
            })
        }
        _ => match envelope {
            Scan::Complete(end) => EnvelopeCall::NotCall { fail_at: end },
            Scan::Invalid(at) => EnvelopeCall::NotCall { fail_at: at },
            Scan::Incomplete if finished => EnvelopeCall::NotCall { fail_at: s.len() },
            Scan::Incomplete => EnvelopeCall::Pending,
        },
    }
}

fn started_call(
    s: &str,
    name: String,
    value_start: usize,
    value: Scan,
    envelope: Scan,
    finished: bool,
) -> StartedCall {
    let mut call = StartedCall {
        name,
        arguments: String::new(),
        closed: true,
        malformed: false,
        raw_from: None,
        envelope,
    };
    let quoted = s.as_bytes()[value_start] == b'"';
    match value {
        Scan::Complete(end) if quoted => {
            // Arguments sent as a string holding the object: shown only when whole, as the
            // object it holds, so the stream never shows text the final answer lacks.
            let raw = &s[value_start..end];
            match decode_json_string(raw) {
                Some(inner) if is_json_object(&inner) => call.arguments = inner,
                _ => {
                    call.arguments = raw.to_string();
                    call.malformed = true;
                }
            }
        }
        Scan::Complete(end) => {
            call.arguments = s[value_start..end].to_string();
            call.malformed = s.as_bytes()[value_start] != b'{';
        }
        Scan::Incomplete if finished => {
            call.arguments = s[value_start..].to_string();
            call.malformed = true;
        }
        Scan::Incomplete => {
            if !quoted {
                call.arguments = s[value_start..].to_string();
            }
            call.closed = false;
        }
        Scan::Invalid(at) => {
            call.malformed = true;
            call.closed = false;
            call.raw_from = Some((value_start, at));
        }
    }
    call
}

type ArgumentsValue = (usize, Scan);

/// The first `name` (when a whole string), the first arguments value (start and scan, once
/// begun) and the scan of the whole object at `start`.
fn scan_envelope(s: &str, start: usize) -> (Option<String>, Option<ArgumentsValue>, Scan) {
    let b = s.as_bytes();
    let mut name = None;
    let mut arguments = None;
    let mut i = skip_ws(s, start + 1);
    if b.get(i) == Some(&b'}') {
        return (name, arguments, Scan::Complete(i + 1));
    }
    loop {
        match b.get(i) {
            None => return (name, arguments, Scan::Incomplete),
            Some(b'"') => {}
            Some(_) => return (name, arguments, Scan::Invalid(i)),
        }
        let key_end = match scan_string(s, i) {
            Scan::Complete(end) => end,
            other => return (name, arguments, other),
        };
        let key = decode_json_string(&s[i..key_end]);
        i = skip_ws(s, key_end);
        match b.get(i) {
            None => return (name, arguments, Scan::Incomplete),
            Some(b':') => {}
            Some(_) => return (name, arguments, Scan::Invalid(i)),
        }
        let value_start = skip_ws(s, i + 1);
        if value_start >= b.len() {
            return (name, arguments, Scan::Incomplete);
        }
        let value = scan_value(s, value_start);
        match key.as_deref() {
            Some("name") if name.is_none() => {
                if let (Scan::Complete(end), b'"') = (value, b[value_start]) {
                    name = decode_json_string(&s[value_start..end]);
                }
            }
            Some(key) if is_arguments_key(key) && arguments.is_none() => {
                arguments = Some((value_start, value));
            }
            _ => {}
        }
        let Scan::Complete(value_end) = value else {
            return (name, arguments, value);
        };
        i = skip_ws(s, value_end);
        match b.get(i) {
            None => return (name, arguments, Scan::Incomplete),
            Some(b',') => i = skip_ws(s, i + 1),
            Some(b'}') => return (name, arguments, Scan::Complete(i + 1)),
            Some(_) => return (name, arguments, Scan::Invalid(i)),
        }
    }
}

/// The text of a whole JSON string literal (quotes included), decoded.
pub(super) fn decode_json_string(literal: &str) -> Option<String> {
    serde_json::from_str(literal).ok()
}

/// Whether `text` is one JSON object (surrounding whitespace allowed).
pub(super) fn is_json_object(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|value| value.is_object())
}
