//! The reasoning block at the start of a turn: `<think>...</think>` (or `[THINK]...[/THINK]`).

use super::markup::partial_marker_len;
use super::snapshot::Snapshot;

/// The markers around a model's reasoning, `<think>`/`</think>` for most reasoning models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningSyntax {
    /// The marker that opens reasoning, e.g. `<think>`.
    pub open: String,
    /// The marker that closes it, e.g. `</think>`.
    pub close: String,
}

impl ReasoningSyntax {
    /// `<think>`/`</think>`.
    pub fn think_tags() -> Self {
        ReasoningSyntax {
            open: "<think>".to_string(),
            close: "</think>".to_string(),
        }
    }

    /// The syntax a chat template shows, if any: `</think>` (Qwen3, QwQ, DeepSeek-R1 and its
    /// distills, SmolLM3, GLM, MiniMax...) or `[/THINK]` (Magistral, Ministral 3 reasoning).
    /// The closing marker decides: templates that never write reasoning back still split
    /// earlier answers at it.
    pub fn detect(template_source: &str) -> Option<ReasoningSyntax> {
        if template_source.contains("</think>") {
            Some(Self::think_tags())
        } else if template_source.contains("[/THINK]") {
            Some(ReasoningSyntax {
                open: "[THINK]".to_string(),
                close: "[/THINK]".to_string(),
            })
        } else {
            None
        }
    }
}

/// Whether a rendered prompt ends inside an open reasoning block of `syntax`: its last opening
/// marker comes after its last closing marker (trailing whitespace aside), as when the template
/// put `<think>\n` into the generation prompt.
pub fn prompt_opens_reasoning(prompt: &str, syntax: &ReasoningSyntax) -> bool {
    let prompt = prompt.trim_end();
    match (prompt.rfind(&syntax.open), prompt.rfind(&syntax.close)) {
        (Some(open), Some(close)) => open > close,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Pushes the reasoning at the start of `s` and returns where the rest (content and calls)
/// begins, or `None` while that is not known. Reasoning is trimmed of whitespace at both ends;
/// the rest starts after the whitespace that follows the closing marker. A block is recognised
/// only at the very start (whitespace aside) or, with `starts_inside`, the whole text until the
/// closing marker is reasoning. An unclosed block stays reasoning.
pub(super) fn split(
    s: &str,
    syntax: &ReasoningSyntax,
    starts_inside: bool,
    finished: bool,
    snapshot: &mut Snapshot,
) -> Option<usize> {
    let body = if starts_inside {
        0
    } else {
        let lead = s.len() - s.trim_start().len();
        let rest = &s[lead..];
        if let Some(after) = rest.strip_prefix(syntax.open.as_str()) {
            s.len() - after.len()
        } else if !finished && syntax.open.starts_with(rest) {
            return None;
        } else {
            return Some(0);
        }
    };
    match s[body..].find(syntax.close.as_str()) {
        Some(at) => {
            snapshot.reasoning(s[body..body + at].trim());
            let after = body + at + syntax.close.len();
            Some(s.len() - s[after..].trim_start().len())
        }
        None if finished => {
            snapshot.reasoning(s[body..].trim());
            Some(s.len())
        }
        None => {
            let rest = &s[body..];
            let keep = rest.len() - partial_marker_len(rest, &[syntax.close.as_str()]);
            snapshot.reasoning(rest[..keep].trim());
            None
        }
    }
}
