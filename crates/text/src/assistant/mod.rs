//! One assistant turn from the text a model generated: its reasoning, its content and its tool
//! calls, all at once ([`parse_turn`]) or as a stream ([`TurnStream`]).
//!
//! The stream keeps the whole text so far and parses it again after each push into a
//! *snapshot*, an ordered list of reasoning, content and call segments in which only what is
//! certain appears; it emits the difference from the previous snapshot. A later snapshot only
//! ever extends an earlier one (checked in debug builds), so folding the events of any split of
//! a text gives exactly [`parse_turn`] of the whole text.
//!
//! Rules every format keeps (see each format's module for its syntax):
//!
//! - Reasoning is recognised only at the start of the turn (after whitespace), or from the
//!   start with [`TurnOptions::starts_in_reasoning`]; it is trimmed of whitespace at both ends
//!   and the content after it starts after whitespace. An unclosed block stays reasoning. Tool
//!   calls are only read after the reasoning, so markup inside it is reasoning text.
//! - Text that may be the start of a marker (`<tool_`, `</thi`, `[TOOL_CA`...) is held back
//!   until it resolves; so is trailing whitespace of content while tools are parsed, because
//!   whitespace around a call is dropped.
//! - A call starts (its name reaches the stream) once its name is known and its arguments have
//!   begun; its arguments stream as the raw JSON text that the model writes (for Qwen XML, one
//!   built parameter at a time). Arguments sent as a JSON string holding an object appear
//!   only once whole, as the object's text.
//! - Markup that opened but cannot give a name (`<tool_call>garbage</tool_call>`) is content,
//!   up to and including its closing marker; without a closing marker (a call cut off before
//!   its name) it is dropped, so markup never shows as text. Either way it counts in
//!   [`AssistantTurn::malformed_calls`]. A started call whose arguments break stays a call
//!   with the raw text up to its closing marker as arguments, and counts too; so does one whose
//!   arguments are JSON but not an object, or are unfinished when the text ends.
//! - A call the text ends inside (`max_tokens` cut it) is a call once its name is whole, with
//!   exactly the arguments text generated (empty when the arguments had not begun; Llama 3,
//!   whose plain JSON answers may have a `name`, still needs its arguments key); cut before
//!   the name is whole, its markup is dropped, as is the generic envelope's opening
//!   (`{"tool_c`, `{"tool_calls": [{"na`) and, for a forced call
//!   ([`TurnOptions::forced_opening`]), part of its opening marker (`<tool_ca`). Either way it
//!   counts as malformed.
//! - [`AssistantTurn::malformed_calls`] is not carried by events: it is in
//!   [`TurnStream::turn`].

mod call_list;
mod detect;
mod envelope;
mod generic_json;
mod hermes;
mod json_scan;
mod llama3;
mod markup;
mod mistral;
mod qwen_xml;
mod reasoning;
mod snapshot;
mod syntax;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_formats;
#[cfg(test)]
mod tests_json_formats;

use std::collections::BTreeMap;

pub use detect::ToolCallFormat;
pub use reasoning::{prompt_opens_reasoning, ReasoningSyntax};
use snapshot::Snapshot;
pub use syntax::{CallIdForm, ConstrainedCall, ToolCallSyntax};

/// How to read a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// `None`: tools were not sent; no tool calls are read (all text is content or reasoning).
    pub tool_format: Option<ToolCallFormat>,
    /// `None`: no reasoning split.
    pub reasoning: Option<ReasoningSyntax>,
    /// The rendered prompt ended inside an open reasoning block (the template put `<think>\n`
    /// in the generation prompt, as DeepSeek-R1 and Qwen3-thinking templates do): the output is
    /// reasoning until the closing marker. See [`prompt_opens_reasoning`].
    pub starts_in_reasoning: bool,
    /// Tool name -> its JSON Schema `parameters`, for typing Qwen XML parameter values: a
    /// parameter whose schema type is number, integer, boolean, object, array or null is parsed
    /// as JSON, otherwise it is a string; unknown tools and parameters: JSON if it parses, else
    /// a string.
    pub tool_schemas: BTreeMap<String, serde_json::Value>,
    /// A call was forced (`tool_choice` required or named) in a framing that opens with this
    /// text (`<tool_call>`, `{"tool_calls": [`): a turn that ends before the opening is whole
    /// (`max_tokens` cut it) shows none of it.
    pub forced_opening: Option<String>,
}

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// JSON text of the arguments object.
    pub arguments: String,
}

/// A parsed assistant turn.
#[derive(PartialEq, Debug, Clone, Default)]
pub struct AssistantTurn {
    /// The reasoning text, without its markers.
    pub reasoning: String,
    /// The answer text.
    pub content: String,
    /// The tool calls, in output order.
    pub tool_calls: Vec<ToolCall>,
    /// Calls whose arguments did not parse as a JSON object (kept as calls if already started)
    /// plus markup that opened a call but gave no name (kept as content).
    pub malformed_calls: u32,
}

impl AssistantTurn {
    /// Adds one streamed event (an event for a call that never started is ignored).
    pub fn apply(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Reasoning(text) => self.reasoning.push_str(text),
            TurnEvent::Content(text) => self.content.push_str(text),
            TurnEvent::ToolCallStart { name, .. } => self.tool_calls.push(ToolCall {
                name: name.clone(),
                arguments: String::new(),
            }),
            TurnEvent::ToolCallArguments { index, delta } => {
                if let Some(call) = self.tool_calls.get_mut(*index) {
                    call.arguments.push_str(delta);
                }
            }
            TurnEvent::ToolCallEnd { .. } => {}
        }
    }
}

/// A piece of a streamed turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEvent {
    /// More reasoning text.
    Reasoning(String),
    /// More content text.
    Content(String),
    /// Call number `index` (from 0, in output order) began; its name.
    ToolCallStart {
        /// The call's position in the turn.
        index: usize,
        /// The function's name.
        name: String,
    },
    /// More of call `index`'s arguments text.
    ToolCallArguments {
        /// The call's position in the turn.
        index: usize,
        /// The text to append.
        delta: String,
    },
    /// Call `index` has all its arguments.
    ToolCallEnd {
        /// The call's position in the turn.
        index: usize,
    },
}

/// A turn parsed as the model generates it.
#[derive(Debug, Clone)]
pub struct TurnStream {
    options: TurnOptions,
    text: String,
    snapshot: Snapshot,
    turn: AssistantTurn,
    finished: bool,
}

impl TurnStream {
    /// A stream for a turn read with `options`.
    pub fn new(options: TurnOptions) -> Self {
        TurnStream {
            options,
            text: String::new(),
            snapshot: Snapshot::default(),
            turn: AssistantTurn::default(),
            finished: false,
        }
    }

    /// New text generated; returns the events for everything now certain. Text that may be
    /// the start of a marker is held back until it resolves. Text pushed after
    /// [`TurnStream::finish`] is ignored.
    pub fn push(&mut self, text: &str) -> Vec<TurnEvent> {
        if self.finished || text.is_empty() {
            return Vec::new();
        }
        self.text.push_str(text);
        self.advance(false)
    }

    /// Generation ended: releases what was held back (an unclosed reasoning block stays
    /// reasoning; unfinished calls are settled as the module doc says).
    pub fn finish(&mut self) -> Vec<TurnEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        self.advance(true)
    }

    /// The turn as the events so far fold into, with the malformed-call count.
    pub fn turn(&self) -> &AssistantTurn {
        &self.turn
    }

    fn advance(&mut self, finished: bool) -> Vec<TurnEvent> {
        let next = snapshot_of(&self.text, &self.options, finished);
        let events = next.events_since(&self.snapshot);
        for event in &events {
            self.turn.apply(event);
        }
        self.turn.malformed_calls = next.malformed;
        self.snapshot = next;
        events
    }
}

/// One-shot: equals folding [`TurnStream`] events over the whole text, then `finish()`.
pub fn parse_turn(text: &str, options: &TurnOptions) -> AssistantTurn {
    snapshot_of(text, options, true).turn()
}

/// The snapshot of `s`; with `finished` false, undecided tails are held back.
fn snapshot_of(s: &str, options: &TurnOptions, finished: bool) -> Snapshot {
    let mut snapshot = Snapshot::default();
    let start = match &options.reasoning {
        None => 0,
        Some(syntax) => {
            let split = reasoning::split(
                s,
                syntax,
                options.starts_in_reasoning,
                finished,
                &mut snapshot,
            );
            match split {
                Some(start) => start,
                None => return snapshot,
            }
        }
    };
    let rest = s[start..].trim_start();
    let opening = options.forced_opening.as_deref().unwrap_or("");
    if finished && !rest.is_empty() && rest.len() < opening.len() && opening.starts_with(rest) {
        snapshot.malformed();
        return snapshot;
    }
    match options.tool_format {
        None => snapshot.content(&s[start..]),
        Some(ToolCallFormat::Hermes) => hermes::parse(s, start, finished, &mut snapshot),
        Some(ToolCallFormat::QwenXml) => {
            qwen_xml::parse(s, start, finished, &options.tool_schemas, &mut snapshot)
        }
        Some(ToolCallFormat::Llama3Json) => llama3::parse(s, start, finished, &mut snapshot),
        Some(ToolCallFormat::MistralArgs | ToolCallFormat::MistralList) => {
            mistral::parse(s, start, finished, &mut snapshot)
        }
        Some(ToolCallFormat::GenericJson) => generic_json::parse(s, start, finished, &mut snapshot),
    }
    snapshot
}
