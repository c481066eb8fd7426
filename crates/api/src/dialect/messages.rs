//! `POST /v1/messages` (Anthropic Messages API): one assistant turn as content blocks
//! (thinking, text, tool_use), streamed as `message_start`, per block `content_block_start`,
//! deltas and `content_block_stop`, then `message_delta` and `message_stop`; or answered as
//! one message object, which is what the stream folds into.
//!
//! A new block starts whenever the turn switches between thinking, text and a call. Usage
//! follows Anthropic's meaning: `input_tokens` are the prompt tokens not read from the prefix
//! cache, `cache_read_input_tokens` those that were. A turn one of `stop_sequences` ended
//! reads `stop_reason: "stop_sequence"` with that sequence in `stop_sequence` (null otherwise).
//! A call whose arguments do not parse as a JSON object (cut off by `max_tokens`) has
//! `input: {}` in the one-body answer; its stream still carries the raw `partial_json`.
//! A call's `input` in the one-body answer is the model's JSON text as generated (checked to
//! be an object, not re-encoded), so that it says what the stream's `partial_json` says:
//! a number of any length keeps every digit.
//!
//! Until the first block starts, a stream quiet for the keep-alive interval sends a `ping`
//! event (Claude Code gives up on a stream without events for 300 s, a long prefill's time).

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::turn::{TurnEnd, TurnRenderer, TurnUpdate};
use super::{to_json, Ending, Frame};
use crate::assemble::ResponseMeta;
use crate::error::ApiError;
use crate::wire::messages::AnthropicErrorBody;
use crate::wire::{system_fingerprint, UsageBody};

/// The identity of a new Messages-API response of `model`: a `msg_...` id, created now.
pub fn message_meta(model: &str) -> ResponseMeta {
    ResponseMeta {
        id: format!("msg_{:032x}", rand::random::<u128>()),
        created: crate::generation::unix_now(),
        model: model.to_string(),
        system_fingerprint: system_fingerprint(),
    }
}

/// The block being streamed.
enum OpenBlock {
    Thinking(String),
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
}

/// A finished content block.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Block {
    /// Thinking or text, or a call whose arguments are not a JSON object.
    Plain(Value),
    /// A call with its input as the model wrote it.
    ToolUse(ToolUse),
}

/// A `tool_use` block whose `input` is JSON text embedded as it is.
#[derive(Debug, Serialize)]
struct ToolUse {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    name: String,
    input: Box<RawValue>,
}

impl Block {
    /// The `tool_use` block of a call with these arguments: their text when it is one JSON
    /// object (surrounding whitespace dropped), else `{}` (a call cut off, or botched).
    fn tool_use(id: String, name: String, arguments: String) -> Block {
        match RawValue::from_string(arguments) {
            Ok(input) if input.get().starts_with('{') => Block::ToolUse(ToolUse {
                kind: "tool_use",
                id,
                name,
                input,
            }),
            _ => Block::Plain(json!({"type": "tool_use", "id": id, "name": name, "input": {}})),
        }
    }
}

/// The one-body answer, its fields in the order the stream's `message_start` has them.
#[derive(Serialize)]
struct MessageBody<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: &'a [Block],
    stop_reason: &'static str,
    stop_sequence: &'a Option<String>,
    usage: Value,
}

/// Renders one turn for the Messages API. See the module docs.
pub struct MessagesRenderer {
    meta: ResponseMeta,
    prompt_tokens: u32,
    /// Finished blocks, in order.
    blocks: Vec<Block>,
    open: Option<OpenBlock>,
    end: Option<TurnEnd>,
    /// The stop sequence that ended the turn, when one did.
    stop_sequence: Option<String>,
    /// `message_start` went out.
    started: bool,
    /// Thinking blocks are shown (the request enabled thinking); otherwise reasoning the
    /// model writes anyway is left out, as Anthropic's API has no thinking without it.
    show_thinking: bool,
}

impl MessagesRenderer {
    /// A renderer for the message `meta` (see [`message_meta`]) answering a prompt of
    /// `prompt_tokens` tokens; thinking blocks shown.
    pub fn new(meta: ResponseMeta, prompt_tokens: u32) -> Self {
        MessagesRenderer {
            meta,
            prompt_tokens,
            blocks: Vec::new(),
            open: None,
            end: None,
            stop_sequence: None,
            started: false,
            show_thinking: true,
        }
    }

    /// Shows thinking blocks only when `enabled` (the request's `thinking`).
    pub fn showing_thinking(mut self, enabled: bool) -> Self {
        self.show_thinking = enabled;
        self
    }

    /// `message_start`, once: sent when the request is scheduled, so that its usage splits
    /// the prompt into cached and uncached tokens as `message_delta`'s does (`cached`; `None`
    /// when the event that tells it did not come first, and then counted as uncached).
    fn start(&mut self, cached: Option<u32>) -> Vec<Frame> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        let cached = cached.unwrap_or(0).min(self.prompt_tokens);
        let message = json!({
            "id": self.meta.id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.meta.model,
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": self.prompt_tokens - cached,
                "output_tokens": 0,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0,
            },
        });
        vec![event("message_start", json!({"message": message}))]
    }

    /// The blocks' frames of one update (after `message_start`).
    fn render(&mut self, update: TurnUpdate) -> Vec<Frame> {
        match update {
            TurnUpdate::Reasoning { .. } if !self.show_thinking => Vec::new(),
            TurnUpdate::Start { .. } | TurnUpdate::Logprobs { .. } => Vec::new(),
            TurnUpdate::Reasoning { text, .. } | TurnUpdate::Content { text, .. }
                if text.is_empty() =>
            {
                Vec::new()
            }
            TurnUpdate::Reasoning { text, .. } => {
                let mut frames = self.ensure_open(true);
                if let Some(OpenBlock::Thinking(all)) = &mut self.open {
                    all.push_str(&text);
                }
                let delta = json!({"type": "thinking_delta", "thinking": text});
                let fields = json!({"index": self.index(), "delta": delta});
                frames.push(event("content_block_delta", fields));
                frames
            }
            TurnUpdate::Content { text, .. } => {
                let mut frames = self.ensure_open(false);
                if let Some(OpenBlock::Text(all)) = &mut self.open {
                    all.push_str(&text);
                }
                let delta = json!({"type": "text_delta", "text": text});
                let fields = json!({"index": self.index(), "delta": delta});
                frames.push(event("content_block_delta", fields));
                frames
            }
            TurnUpdate::ToolCallStart { id, name, .. } => {
                let mut frames = self.finish_block();
                let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                self.open = Some(OpenBlock::ToolUse {
                    id,
                    name,
                    json: String::new(),
                });
                let fields = json!({"index": self.index(), "content_block": block});
                frames.push(event("content_block_start", fields));
                frames
            }
            TurnUpdate::ToolCallArguments { delta, .. } => {
                let Some(OpenBlock::ToolUse { json, .. }) = &mut self.open else {
                    return Vec::new();
                };
                json.push_str(&delta);
                let delta = json!({"type": "input_json_delta", "partial_json": delta});
                vec![event(
                    "content_block_delta",
                    json!({"index": self.index(), "delta": delta}),
                )]
            }
            TurnUpdate::ToolCallEnd { .. } => self.finish_block(),
            TurnUpdate::Finish {
                end, stop_string, ..
            } => {
                self.end = Some(end);
                self.stop_sequence = stop_string;
                self.finish_block()
            }
        }
    }

    fn index(&self) -> usize {
        self.blocks.len()
    }

    fn stop_reason(&self) -> &'static str {
        match self.end {
            Some(TurnEnd::Length) => "max_tokens",
            Some(TurnEnd::ToolCalls) => "tool_use",
            Some(TurnEnd::Stop) if self.stop_sequence.is_some() => "stop_sequence",
            Some(TurnEnd::Stop) | None => "end_turn",
        }
    }

    /// Starts a thinking (`thinking`) or text block unless one of that kind is open.
    fn ensure_open(&mut self, thinking: bool) -> Vec<Frame> {
        match (&self.open, thinking) {
            (Some(OpenBlock::Thinking(_)), true) | (Some(OpenBlock::Text(_)), false) => {
                return Vec::new()
            }
            _ => {}
        }
        let mut frames = self.finish_block();
        let block = if thinking {
            self.open = Some(OpenBlock::Thinking(String::new()));
            json!({"type": "thinking", "thinking": "", "signature": ""})
        } else {
            self.open = Some(OpenBlock::Text(String::new()));
            json!({"type": "text", "text": ""})
        };
        frames.push(event(
            "content_block_start",
            json!({"index": self.index(), "content_block": block}),
        ));
        frames
    }

    /// Closes the open block: it joins the content.
    fn finish_block(&mut self) -> Vec<Frame> {
        let Some(open) = self.open.take() else {
            return Vec::new();
        };
        let index = self.index();
        self.blocks.push(match open {
            // No signature: nothing here can verify one when the block comes back.
            OpenBlock::Thinking(text) => {
                Block::Plain(json!({"type": "thinking", "thinking": text, "signature": ""}))
            }
            OpenBlock::Text(text) => Block::Plain(json!({"type": "text", "text": text})),
            OpenBlock::ToolUse { id, name, json } => Block::tool_use(id, name, json),
        });
        vec![event("content_block_stop", json!({"index": index}))]
    }

    fn usage(&self, usage: &UsageBody) -> Value {
        let cached = usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens);
        json!({
            "input_tokens": usage.prompt_tokens.saturating_sub(cached),
            "output_tokens": usage.completion_tokens,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        })
    }
}

/// An event named `kind` whose `type` is `kind`.
fn event(kind: &'static str, fields: Value) -> Frame {
    let mut fields = fields;
    fields["type"] = json!(kind);
    Frame::named(kind, &fields)
}

impl TurnRenderer for MessagesRenderer {
    /// `message_start` waits for [`TurnRenderer::scheduled`] (pings may come before it, as
    /// anywhere in Anthropic's streams).
    fn open(&mut self) -> Vec<Frame> {
        Vec::new()
    }

    fn scheduled(&mut self, cached_prompt_tokens: u32) -> Vec<Frame> {
        self.start(Some(cached_prompt_tokens))
    }

    fn update(&mut self, update: TurnUpdate) -> Vec<Frame> {
        let mut frames = self.start(None);
        frames.extend(self.render(update));
        frames
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        let mut frames = self.start(None);
        frames.extend(self.finish_block());
        let delta = json!({
            "stop_reason": self.stop_reason(),
            "stop_sequence": self.stop_sequence,
        });
        let usage = self.usage(&ending.usage);
        frames.push(event(
            "message_delta",
            json!({"delta": delta, "usage": usage}),
        ));
        frames.push(event("message_stop", json!({})));
        frames
    }

    fn error(&mut self, err: &ApiError) -> Vec<Frame> {
        vec![Frame::named("error", &AnthropicErrorBody::from_error(err))]
    }

    /// A `ping` until the first content block starts.
    fn keep_alive(&mut self) -> Vec<Frame> {
        if self.blocks.is_empty() && self.open.is_none() {
            vec![event("ping", json!({}))]
        } else {
            Vec::new()
        }
    }

    fn body(mut self: Box<Self>, ending: Ending<'_>) -> String {
        self.finish_block();
        to_json(&MessageBody {
            id: &self.meta.id,
            kind: "message",
            role: "assistant",
            model: &self.meta.model,
            content: &self.blocks,
            stop_reason: self.stop_reason(),
            stop_sequence: &self.stop_sequence,
            usage: self.usage(&ending.usage),
        })
    }
}

#[cfg(test)]
mod tests;
