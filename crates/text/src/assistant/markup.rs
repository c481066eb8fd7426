//! What the tag-delimited formats share: finding an opening marker in content, holding back a
//! partial one, and ending a call at its closing marker.

use super::envelope::{envelope_call, EnvelopeCall, StartedCall};
use super::json_scan::{skip_ws, Scan};
use super::snapshot::Snapshot;

/// What the markup after an opening marker amounts to so far.
pub(super) enum Markup {
    /// Undecided; nothing pushed, and whitespace before the marker is held back with it.
    Pending,
    /// Calls were pushed; content resumes at this byte (`None`: nothing after is certain yet,
    /// or the text is used up).
    Calls { resume: Option<usize> },
    /// Not a call: the markup from the opening marker up to this byte is content (`None`: it
    /// runs unclosed to the end of the text and is dropped); counts as one malformed call.
    NotCall { content_end: Option<usize> },
}

/// Length of the longest end of `text` that is a proper beginning of one of `markers`.
pub(super) fn partial_marker_len(text: &str, markers: &[&str]) -> usize {
    markers
        .iter()
        .flat_map(|marker| (1..marker.len()).rev().map(move |k| &marker[..k]))
        .filter(|prefix| text.ends_with(prefix))
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// Whether `text` (what is left) could still grow into `marker`.
pub(super) fn may_become(text: &str, marker: &str, finished: bool) -> bool {
    !finished && marker.starts_with(text)
}

/// Content from `pos` on, with calls opened by `open` parsed by `parse` (given the byte after
/// the marker). Whitespace just before an opening marker and just after a call is dropped;
/// until the text is finished, trailing whitespace and a partial marker are held back.
pub(super) fn scan_tagged(
    s: &str,
    mut pos: usize,
    finished: bool,
    open: &str,
    snapshot: &mut Snapshot,
    mut parse: impl FnMut(usize, &mut Snapshot) -> Markup,
) {
    loop {
        let Some(found) = s[pos..].find(open) else {
            let rest = &s[pos..];
            if finished {
                snapshot.content(rest);
            } else {
                let keep = rest.len() - partial_marker_len(rest, &[open]);
                snapshot.content(rest[..keep].trim_end());
            }
            return;
        };
        let marker = pos + found;
        let before = s[pos..marker].trim_end();
        snapshot.content(before);
        match parse(marker + open.len(), snapshot) {
            Markup::Pending | Markup::Calls { resume: None } => return,
            Markup::Calls {
                resume: Some(resume),
            } => pos = skip_ws(s, resume),
            Markup::NotCall { content_end } => {
                snapshot.malformed();
                // Closed markup that is no call is the model's text; markup that runs to the
                // end unclosed (a call cut off before its name) is dropped, never shown.
                match content_end {
                    Some(end) => {
                        snapshot.content(&s[pos + before.len()..end]);
                        pos = end;
                    }
                    None => return,
                }
            }
        }
    }
}

/// The byte after the first `close` at or after `from`.
pub(super) fn after_marker(s: &str, from: usize, close: &str) -> Option<usize> {
    s[from..].find(close).map(|at| from + at + close.len())
}

/// Where content resumes after a call's JSON ended at `end`: after `close` when only whitespace
/// comes before it, else right at `end` (a missing closing marker). `None` while undecided. A
/// text that ends inside `close` (`max_tokens` cut it) ends there: the part is never content.
pub(super) fn resume_after(
    s: &str,
    end: usize,
    close: Option<&str>,
    finished: bool,
) -> Option<usize> {
    let Some(close) = close else {
        return Some(end);
    };
    let next = skip_ws(s, end);
    if s[next..].starts_with(close) {
        Some(next + close.len())
    } else if may_become(&s[next..], close, finished) {
        None
    } else if finished && next < s.len() && close.starts_with(&s[next..]) {
        Some(s.len())
    } else {
        Some(end)
    }
}

/// The call in a JSON envelope at `start`, ended by `close` (`None`: the end of the text).
pub(super) fn json_call(
    s: &str,
    start: usize,
    finished: bool,
    close: Option<&str>,
    snapshot: &mut Snapshot,
) -> Markup {
    match envelope_call(s, start, finished, false) {
        EnvelopeCall::Pending => Markup::Pending,
        EnvelopeCall::NotCall { fail_at } => Markup::NotCall {
            content_end: close.and_then(|close| after_marker(s, fail_at, close)),
        },
        EnvelopeCall::Call(call) => Markup::Calls {
            resume: push_call(s, call, finished, close, snapshot),
        },
    }
}

/// Pushes a started call and says where content resumes after it. Arguments that broke are
/// taken raw up to `close` (or the end of the text).
pub(super) fn push_call(
    s: &str,
    call: StartedCall,
    finished: bool,
    close: Option<&str>,
    snapshot: &mut Snapshot,
) -> Option<usize> {
    if call.malformed {
        snapshot.malformed();
    }
    if let Some((from, broke_at)) = call.raw_from {
        let (arguments, closed, resume) = raw_until(s, from, broke_at, finished, close);
        snapshot.call(call.name, arguments.to_string(), closed);
        return resume;
    }
    snapshot.call(call.name, call.arguments, call.closed);
    match call.envelope {
        Scan::Complete(end) => resume_after(s, end, close, finished),
        Scan::Incomplete => None,
        Scan::Invalid(at) => match close {
            Some(close) => after_marker(s, at, close),
            None => Some(at),
        },
    }
}

/// The raw text from `from` up to the first `close` at or after `search_from` (or the end of
/// the text; a partial `close` held back until finished), whether it is closed, and where
/// content resumes. Looking only from `search_from` (where the JSON broke) keeps what was
/// already shown as valid JSON: a `close` inside a JSON string before it is text.
pub(super) fn raw_until<'s>(
    s: &'s str,
    from: usize,
    search_from: usize,
    finished: bool,
    close: Option<&str>,
) -> (&'s str, bool, Option<usize>) {
    let tail = &s[search_from..];
    if let Some(close) = close {
        if let Some(at) = tail.find(close) {
            let end = search_from + at;
            return (&s[from..end], true, Some(end + close.len()));
        }
        if !finished {
            let end = s.len() - partial_marker_len(tail, &[close]);
            return (&s[from..end], false, None);
        }
    }
    (&s[from..], finished, None)
}
