//! What a tool-call format says of itself beyond parsing: the markers its parser reads, the
//! framing a call is held to when calls are constrained, and the ids its templates accept.
//! Each format implements [`ToolCallSyntax`] in its own file; [`ToolCallFormat::syntax`] finds
//! it, so callers ask the format instead of matching over formats.
//!
//! | format | `required` / named | `auto` |
//! |---|---|---|
//! | Hermes (`<tool_call>{json}</tool_call>`) | one framed call | free text; a call the model opens is held to the schemas |
//! | Qwen XML | one call as Hermes JSON inside `<tool_call>` (its parser reads both) | free (XML is not JSON) |
//! | Llama 3 JSON | one `{"name", "parameters"}` object | free |
//! | Mistral, generic | the generic envelope `{"tool_calls": [...]}`, parsed as such | free |

use super::ToolCallFormat;
use crate::constraint::{ToolCallFraming, ToolCallMode};

/// A format's framing and markers, as the server needs them around the parser.
pub trait ToolCallSyntax: Sync {
    /// The markers its parser reads that a tokenizer may hold as single tokens: they must stay
    /// in the generated text even when they are special tokens, which output otherwise leaves
    /// out (Mistral's `[TOOL_CALLS]`, Llama 3's `<|python_tag|>`).
    fn markers(&self) -> &'static [&'static str];

    /// How calls are held to the tools in `mode`; `None`: that mode is not constrained.
    fn constrained_call(&self, mode: &ToolCallMode) -> Option<ConstrainedCall>;

    /// The ids its chat templates accept for calls.
    fn call_ids(&self) -> CallIdForm {
        CallIdForm::Any
    }
}

/// A constrained call: the framing the output is held to and the format it is then read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstrainedCall {
    /// The framing of the call object.
    pub framing: ToolCallFraming,
    /// The format the constrained output is parsed in.
    pub parse_as: ToolCallFormat,
}

/// What a format's templates accept as a tool-call id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallIdForm {
    /// Any id (the protocol's own form).
    Any,
    /// Exactly 9 alphanumerics (Mistral's templates refuse any other).
    NineAlphanumerics,
}

impl ConstrainedCall {
    /// `framing` read as `parse_as` when `mode` forces a call; `None` in `auto`, which formats
    /// without a textual trigger leave free.
    pub(super) fn forced_only(
        mode: &ToolCallMode,
        framing: fn() -> ToolCallFraming,
        parse_as: ToolCallFormat,
    ) -> Option<ConstrainedCall> {
        let forced = matches!(mode, ToolCallMode::Forced { .. });
        forced.then(|| ConstrainedCall {
            framing: framing(),
            parse_as,
        })
    }
}
