//! Tool calls: the output a chat template's tool-call format expects, held to the request's
//! tools. A call is a framing prefix, one JSON object `{"<name key>": "<tool>", "<arguments
//! key>": {...}}` whose arguments conform to that tool's (relaxed) parameter schema, and a
//! framing suffix.
//!
//! - [`ToolCallMode::Forced`] (`tool_choice` `required` or a named tool): the output is one
//!   call, then it is complete and the choice stops.
//! - [`ToolCallMode::Auto`]: free text (every token, end-of-sequence included) until the
//!   output contains the framing's trigger (`<tool_call>`); from there the call is enforced up
//!   to its suffix, with no end-of-sequence inside it; then free text again. The trigger is
//!   matched across token boundaries, and a token may finish it and go on into the call. With
//!   no trigger (Llama 3's bare JSON), auto output is not constrained at all.
//!
//! Tokens with no bytes (special and control tokens: end-of-sequence, and added tokens such
//! as Qwen's single `<tool_call>` token, which the vocabulary trie holds without bytes) can
//! never be part of a call: inside one they are refused, in free text they are allowed and
//! break a partial trigger. Up to [`MAX_GAP`] spaces or newlines may stand between the prefix
//! and the object and between the object and the suffix.

use serde_json::Value;
use thiserror::Error;

use super::masks::Recognizer;
use super::{Schema, SchemaError, SchemaRecognizer};

/// Most spaces or newlines between a framing part and the call object.
pub const MAX_GAP: u8 = 2;

/// Longest prefix, suffix or trigger, in bytes.
pub const MAX_FRAMING_BYTES: usize = 64;

/// A tool the model may call: its name and its compiled parameter schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// What its arguments must conform to.
    pub parameters: Schema,
}

impl Tool {
    /// A tool whose `parameters` JSON Schema is compiled relaxed
    /// ([`Schema::compile_relaxed`]); also returns the paths of what is not enforced, for the
    /// caller to log. An absent schema should be passed as `{}` (any object).
    pub fn compile(name: &str, parameters: &Value) -> Result<(Tool, Vec<String>), SchemaError> {
        let (parameters, ignored) = Schema::compile_relaxed(parameters)?;
        let tool = Tool {
            name: name.to_string(),
            parameters,
        };
        Ok((tool, ignored))
    }
}

/// How a template writes a call around its JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallFraming {
    /// Written before the object; its trailing whitespace may vary (see [`MAX_GAP`]).
    pub prefix: Vec<u8>,
    /// Written after the object; its leading whitespace may vary.
    pub suffix: Vec<u8>,
    /// The key holding the tool's name (`"name"`).
    pub name_key: String,
    /// The key holding the arguments (`"arguments"` or `"parameters"`).
    pub args_key: String,
    /// In auto mode, the text that starts a call; it must be the prefix's start or come
    /// before the prefix. `None`: auto mode constrains nothing.
    pub trigger: Option<Vec<u8>>,
}

impl ToolCallFraming {
    /// Hermes / Qwen: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`.
    pub fn hermes() -> Self {
        ToolCallFraming {
            prefix: b"<tool_call>\n".to_vec(),
            suffix: b"\n</tool_call>".to_vec(),
            name_key: "name".into(),
            args_key: "arguments".into(),
            trigger: Some(b"<tool_call>".to_vec()),
        }
    }

    /// Llama 3.x JSON tool calls: the bare object `{"name": ..., "parameters": {...}}`. No
    /// trigger: a forced call is constrained, auto output is not.
    pub fn llama3_json() -> Self {
        ToolCallFraming {
            prefix: Vec::new(),
            suffix: Vec::new(),
            name_key: "name".into(),
            args_key: "parameters".into(),
            trigger: None,
        }
    }

    /// For templates with no native format: `{"tool_calls": [{"name": ..., "arguments":
    /// {...}}]}` (one call). No trigger.
    pub fn envelope() -> Self {
        ToolCallFraming {
            prefix: br#"{"tool_calls": ["#.to_vec(),
            suffix: b"]}".to_vec(),
            name_key: "name".into(),
            args_key: "arguments".into(),
            trigger: None,
        }
    }
}

/// When calls are enforced (OpenAI's `tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCallMode {
    /// `auto`: text, with calls enforced once the trigger appears.
    Auto,
    /// `required` (`tool: None`, any of the tools) or a named tool: exactly one call.
    Forced {
        /// The one tool to call, if named.
        tool: Option<String>,
    },
}

/// Tool-call rules that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ToolCallError {
    /// `tool_choice` names a tool that is not in the list.
    #[error("tool_choice names \"{0}\", which is not among the tools")]
    UnknownTool(String),
    /// The framing cannot be used.
    #[error("tool-call framing: {0}")]
    Framing(&'static str),
    /// The tools cannot be combined into one call schema.
    #[error("tools: {0}")]
    Schema(#[from] SchemaError),
}

/// A request's tool-call constraint, built once and shared by its choices.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRules {
    /// The call object: a name (first) and that tool's arguments.
    call: Schema,
    /// The prefix without trailing whitespace; the suffix without leading whitespace.
    prefix: Vec<u8>,
    suffix: Vec<u8>,
    /// The trigger's length and its matcher: by bytes matched so far and the next byte, the
    /// bytes matched after it (a KMP automaton).
    trigger: Option<(u8, Vec<[u8; 256]>)>,
    /// How much of the prefix the trigger has written when it completes.
    prefix_after_trigger: u8,
    forced: bool,
}

impl ToolCallRules {
    /// The rules for `tools` written with `framing` under `mode`.
    pub fn new(
        tools: &[Tool],
        framing: &ToolCallFraming,
        mode: &ToolCallMode,
    ) -> Result<Self, ToolCallError> {
        let chosen: Vec<(&str, &Schema)> = match mode {
            ToolCallMode::Forced { tool: Some(name) } => {
                let tool = tools
                    .iter()
                    .find(|t| t.name == *name)
                    .ok_or_else(|| ToolCallError::UnknownTool(name.clone()))?;
                vec![(tool.name.as_str(), &tool.parameters)]
            }
            _ => tools
                .iter()
                .map(|t| (t.name.as_str(), &t.parameters))
                .collect(),
        };
        let call = Schema::tool_call(&framing.name_key, &framing.args_key, &chosen)?;
        let prefix = framing.prefix.trim_ascii_end().to_vec();
        let suffix = framing.suffix.trim_ascii_start().to_vec();
        let trigger = framing.trigger.as_deref();
        let too_long = [Some(&prefix[..]), Some(&suffix[..]), trigger]
            .into_iter()
            .flatten()
            .any(|part| part.len() > MAX_FRAMING_BYTES);
        if too_long {
            return Err(ToolCallError::Framing(
                "a prefix, suffix or trigger is too long",
            ));
        }
        if trigger.is_some_and(<[u8]>::is_empty) {
            return Err(ToolCallError::Framing("the trigger is empty"));
        }
        let prefix_after_trigger = match trigger {
            Some(t) if prefix.starts_with(t) => t.len() as u8,
            _ => 0,
        };
        Ok(ToolCallRules {
            call,
            prefix,
            suffix,
            trigger: trigger.map(|t| (t.len() as u8, trigger_automaton(t))),
            prefix_after_trigger,
            forced: matches!(mode, ToolCallMode::Forced { .. }),
        })
    }

    /// Whether the output is one call (and the choice stops after it).
    pub fn is_forced(&self) -> bool {
        self.forced
    }
}

/// `steps[m][b]`: how many bytes of `trigger` are matched after `m` were and byte `b` came.
fn trigger_automaton(trigger: &[u8]) -> Vec<[u8; 256]> {
    let mut steps = vec![[0u8; 256]; trigger.len()];
    // `fallback`: the state the text matched so far falls back to on a mismatch.
    let mut fallback = 0usize;
    for m in 0..trigger.len() {
        if m > 0 {
            steps[m] = steps[fallback];
        }
        steps[m][trigger[m] as usize] = m as u8 + 1;
        if m > 0 {
            fallback = steps[fallback][trigger[m] as usize] as usize;
        }
    }
    steps
}

/// Where the output is.
// The state is a `Copy` mask-cache key, so the large variant cannot be boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Free text (auto mode), the end of which matches `matched` bytes of the trigger.
    Text { matched: u8 },
    /// `read` bytes of the prefix written.
    Prefix { read: u8 },
    /// Whitespace before the object (`before: true`) or before the suffix.
    Gap { before: bool, used: u8 },
    /// Inside the call object.
    Call(SchemaRecognizer),
    /// `read` bytes of the suffix written.
    Suffix { read: u8 },
    /// The forced call is written.
    Done,
}

/// A recognizer of tool-call output (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ToolCallRecognizer {
    phase: Phase,
}

impl ToolCallRecognizer {
    /// A recognizer at the start of a choice's output.
    pub fn new(rules: &ToolCallRules) -> Self {
        let phase = match rules.forced {
            true => enter_call(rules, 0),
            false => Phase::Text { matched: 0 },
        };
        ToolCallRecognizer { phase }
    }

    /// Whether the output is inside a call (where end-of-sequence is refused).
    pub fn in_call(&self) -> bool {
        !matches!(self.phase, Phase::Text { .. } | Phase::Done)
    }
}

fn enter_call(rules: &ToolCallRules, read: u8) -> Phase {
    if read as usize == rules.prefix.len() {
        Phase::Gap {
            before: true,
            used: 0,
        }
    } else {
        Phase::Prefix { read }
    }
}

fn call_done(rules: &ToolCallRules) -> Phase {
    match rules.forced {
        true => Phase::Done,
        false => Phase::Text { matched: 0 },
    }
}

impl Recognizer for ToolCallRecognizer {
    type Rules = ToolCallRules;

    fn start(rules: &ToolCallRules) -> Self {
        ToolCallRecognizer::new(rules)
    }

    fn advance(&mut self, rules: &ToolCallRules, byte: u8) -> bool {
        let gap_byte = matches!(byte, b' ' | b'\n');
        self.phase = match self.phase {
            Phase::Text { matched } => match &rules.trigger {
                None => Phase::Text { matched: 0 },
                Some((len, steps)) => match steps[matched as usize][byte as usize] {
                    m if m == *len => enter_call(rules, rules.prefix_after_trigger),
                    m => Phase::Text { matched: m },
                },
            },
            Phase::Prefix { read } if rules.prefix[read as usize] == byte => {
                enter_call(rules, read + 1)
            }
            Phase::Prefix { .. } => return false,
            Phase::Gap { before, used } if gap_byte && used < MAX_GAP => Phase::Gap {
                before,
                used: used + 1,
            },
            Phase::Gap { before: true, .. } => {
                let mut call = SchemaRecognizer::new(&rules.call);
                if !call.advance(&rules.call, byte) {
                    return false;
                }
                Phase::Call(call)
            }
            Phase::Gap { before: false, .. } => {
                return match rules.suffix.first() == Some(&byte) {
                    true => {
                        self.phase = suffix_read(rules, 1);
                        true
                    }
                    false => false,
                }
            }
            Phase::Call(mut call) => {
                if !call.advance(&rules.call, byte) {
                    return false;
                }
                match (call.is_complete(), rules.suffix.is_empty()) {
                    (false, _) => Phase::Call(call),
                    (true, true) => call_done(rules),
                    (true, false) => Phase::Gap {
                        before: false,
                        used: 0,
                    },
                }
            }
            Phase::Suffix { read } if rules.suffix[read as usize] == byte => {
                suffix_read(rules, read + 1)
            }
            Phase::Suffix { .. } | Phase::Done => return false,
        };
        true
    }

    fn is_complete(&self) -> bool {
        self.phase == Phase::Done
    }

    fn after_byteless(&self, _: &ToolCallRules) -> Option<Self> {
        match self.phase {
            Phase::Text { .. } => Some(ToolCallRecognizer {
                phase: Phase::Text { matched: 0 },
            }),
            _ => None,
        }
    }
}

fn suffix_read(rules: &ToolCallRules, read: u8) -> Phase {
    match read as usize == rules.suffix.len() {
        true => call_done(rules),
        false => Phase::Suffix { read },
    }
}

#[cfg(test)]
#[path = "tool_call_tests.rs"]
mod tests;
