//! `POST /v1/responses` (OpenAI Responses API): one assistant turn as output items
//! (reasoning, message, function calls), streamed as typed events or answered as one response
//! object.
//!
//! A stream opens with `response.created` and `response.in_progress`; each output item is
//! `response.output_item.added`, its deltas and `*.done` events, then
//! `response.output_item.done`; it ends with `response.completed` (or `response.incomplete`
//! when `max_output_tokens` ran out), whose `response` is exactly the one-body answer. Every
//! event's `event:` name equals its `type`, and every event carries a `sequence_number`
//! counting from 0. A new item starts whenever the turn switches between reasoning, text and
//! a call. Only one choice (`n = 1`) exists in this API; logprob updates are not rendered.
//! Until the first output item, a stream quiet for the keep-alive interval repeats
//! `response.in_progress` (an event clients count as life, where SSE comments are not).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::turn::{TurnEnd, TurnRenderer, TurnUpdate};
use super::{to_json, Ending, Frame};
use crate::assemble::ResponseMeta;
use crate::error::ApiError;
use crate::responses_store::ResponseStore;
use crate::wire::responses::ResponseEcho;
use crate::wire::{system_fingerprint, UsageBody};
use custom_call::custom_input;
use parts::{merge, reasoning_part, summary_part, text_part, usage_object};

/// The identity of a new Responses-API response of `model`: a `resp_...` id, created now.
pub fn response_meta(model: &str) -> ResponseMeta {
    ResponseMeta {
        id: fresh_id("resp"),
        created: crate::generation::unix_now(),
        model: model.to_string(),
        system_fingerprint: system_fingerprint(),
    }
}

/// A fresh id in OpenAI's `prefix_hex` form.
fn fresh_id(prefix: &str) -> String {
    format!("{prefix}_{:032x}", rand::random::<u128>())
}

/// The output item being streamed.
enum OpenItem {
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
    Call(OpenCall),
}

struct OpenCall {
    id: String,
    call_id: String,
    name: String,
    arguments: String,
    /// A call of a `custom` tool: a `custom_tool_call` item of the arguments' `input`.
    custom: bool,
}

/// Where a finished response goes and what it keeps of its request.
struct Storing {
    store: Arc<ResponseStore>,
    conversation: Value,
    input_start: usize,
    owner: Option<usize>,
}

/// Renders one turn for the Responses API. See the module docs.
pub struct ResponsesRenderer {
    meta: ResponseMeta,
    echo: ResponseEcho,
    sequence: u64,
    /// Finished output items, in order.
    items: Vec<Value>,
    open: Option<OpenItem>,
    end: Option<TurnEnd>,
    /// Of the output tokens, those the turn reasoned in (known at `Finish`).
    reasoning_tokens: u32,
    /// Where a finished response is kept, with the conversation it answered.
    store: Option<Storing>,
    /// The request's `custom` tools, whose calls are `custom_tool_call` items.
    custom_tools: Vec<String>,
}

impl ResponsesRenderer {
    /// A renderer for the response `meta` (see [`response_meta`]) to a request whose echoed
    /// fields are `echo`.
    pub fn new(meta: ResponseMeta, echo: ResponseEcho) -> Self {
        ResponsesRenderer {
            meta,
            echo,
            sequence: 0,
            items: Vec::new(),
            open: None,
            end: None,
            reasoning_tokens: 0,
            store: None,
            custom_tools: Vec::new(),
        }
    }

    /// Also renders the calls of these `custom` tools as `custom_tool_call` items.
    pub fn with_custom_tools(mut self, names: Vec<String>) -> Self {
        self.custom_tools = names;
        self
    }

    /// Also puts the finished response into `store` (when it completes, streamed or not;
    /// never when it fails), with `conversation` and `input_start`: the request's
    /// `ValidResponsesRequest::conversation` and `input_start`. A response too large for its
    /// caller's budget is not stored, and the final response object says `"store": false`.
    /// `owner` is the caller's API key index ([`StoredResponse::owner`]).
    pub fn storing(
        mut self,
        store: Arc<ResponseStore>,
        conversation: Value,
        input_start: usize,
        owner: Option<usize>,
    ) -> Self {
        self.store = Some(Storing {
            store,
            conversation,
            input_start,
            owner,
        });
        self
    }

    /// The output items finished so far: after the turn, the whole output.
    pub fn output_items(&self) -> Value {
        Value::Array(self.items.clone())
    }

    /// A named event of `kind` with `fields`, its `type` and the next sequence number.
    fn event(&mut self, kind: &'static str, fields: Value) -> Frame {
        let mut object = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        object.insert("type".into(), json!(kind));
        object.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        Frame::named(kind, &Value::Object(object))
    }

    fn output_index(&self) -> usize {
        self.items.len()
    }

    /// The id of the item about to be added: made from the response id, so a response's
    /// item ids are unique and the same however it is rendered.
    fn item_id(&self, prefix: &str) -> String {
        let base = self.meta.id.strip_prefix("resp_").unwrap_or(&self.meta.id);
        format!("{prefix}_{base}_{}", self.output_index())
    }

    /// The response object with `status` and what is known so far.
    fn response(&self, status: &str, usage: Option<&UsageBody>) -> Value {
        let mut object = match serde_json::to_value(&self.echo) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("the echo is a struct"),
        };
        let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
        for (key, value) in [
            ("id", json!(self.meta.id)),
            ("object", json!("response")),
            ("created_at", json!(self.meta.created)),
            ("status", json!(status)),
            ("error", Value::Null),
            ("incomplete_details", json!(incomplete)),
            ("model", json!(self.meta.model)),
            ("output", self.output_items()),
            (
                "usage",
                usage.map_or(Value::Null, |u| usage_object(u, self.reasoning_tokens)),
            ),
        ] {
            object.insert(key.into(), value);
        }
        Value::Object(object)
    }

    /// The final status: `incomplete` when the output ran out of tokens.
    fn final_status(&self) -> &'static str {
        match self.end {
            Some(TurnEnd::Length) => "incomplete",
            _ => "completed",
        }
    }

    /// Opens an item of `want`'s kind unless one is open; the frames that takes.
    fn ensure_open(&mut self, reasoning: bool) -> Vec<Frame> {
        match (&self.open, reasoning) {
            (Some(OpenItem::Reasoning { .. }), true) | (Some(OpenItem::Message { .. }), false) => {
                return Vec::new()
            }
            _ => {}
        }
        let mut frames = self.finish_item();
        let output_index = self.output_index();
        let (item, part, id) = if reasoning {
            let id = self.item_id("rs");
            let item = json!({"type": "reasoning", "id": id, "summary": [], "content": [],
                "status": "in_progress"});
            self.open = Some(OpenItem::Reasoning {
                id: id.clone(),
                text: String::new(),
            });
            (item, reasoning_part(""), id)
        } else {
            let id = self.item_id("msg");
            let item = json!({"type": "message", "id": id, "status": "in_progress",
                "role": "assistant", "content": []});
            self.open = Some(OpenItem::Message {
                id: id.clone(),
                text: String::new(),
            });
            (item, text_part(""), id)
        };
        frames.push(self.event(
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
        ));
        frames.push(self.event(
            "response.content_part.added",
            json!({"item_id": id, "output_index": output_index, "content_index": 0,
                "part": part}),
        ));
        if reasoning && self.summarizes() {
            frames.push(self.event(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                    "part": summary_part("")}),
            ));
        }
        frames
    }

    /// Whether reasoning items carry a summary: the request asked for one
    /// (`reasoning.summary`), and the summary is the reasoning text itself, since no other
    /// model writes one here (Codex shows reasoning only through summaries).
    fn summarizes(&self) -> bool {
        self.echo
            .reasoning
            .summary
            .as_deref()
            .is_some_and(|s| s != "none")
    }

    /// Closes the open item: its `done` events, and it joins the output.
    fn finish_item(&mut self) -> Vec<Frame> {
        let Some(open) = self.open.take() else {
            return Vec::new();
        };
        let output_index = self.output_index();
        let status = match self.end {
            Some(TurnEnd::Length) => "incomplete",
            _ => "completed",
        };
        let mut frames = Vec::with_capacity(4);
        let item = match open {
            OpenItem::Reasoning { id, text } => {
                let at = json!({"item_id": id, "output_index": output_index, "content_index": 0});
                frames.push(self.event(
                    "response.reasoning_text.done",
                    merge(&at, json!({"text": text})),
                ));
                frames.push(self.event(
                    "response.content_part.done",
                    merge(&at, json!({"part": reasoning_part(&text)})),
                ));
                let mut summary = Vec::new();
                if self.summarizes() {
                    let at = json!({"item_id": id, "output_index": output_index,
                        "summary_index": 0});
                    frames.push(self.event(
                        "response.reasoning_summary_text.done",
                        merge(&at, json!({"text": text})),
                    ));
                    frames.push(self.event(
                        "response.reasoning_summary_part.done",
                        merge(&at, json!({"part": summary_part(&text)})),
                    ));
                    summary.push(summary_part(&text));
                }
                json!({"type": "reasoning", "id": id, "summary": summary,
                    "content": [reasoning_part(&text)], "status": status})
            }
            OpenItem::Message { id, text } => {
                let at = json!({"item_id": id, "output_index": output_index, "content_index": 0});
                frames.push(self.event(
                    "response.output_text.done",
                    merge(&at, json!({"text": text, "logprobs": []})),
                ));
                frames.push(self.event(
                    "response.content_part.done",
                    merge(&at, json!({"part": text_part(&text)})),
                ));
                json!({"type": "message", "id": id, "status": status, "role": "assistant",
                    "content": [text_part(&text)]})
            }
            OpenItem::Call(call) if call.custom => {
                let input = custom_input(&call.arguments);
                let at = json!({"item_id": call.id, "output_index": output_index});
                if !input.is_empty() {
                    let delta = merge(&at, json!({"delta": input}));
                    frames.push(self.event("response.custom_tool_call_input.delta", delta));
                }
                frames.push(self.event(
                    "response.custom_tool_call_input.done",
                    merge(&at, json!({"input": input})),
                ));
                json!({"type": "custom_tool_call", "id": call.id, "call_id": call.call_id,
                    "name": call.name, "input": input, "status": status})
            }
            OpenItem::Call(call) => {
                frames.push(self.event(
                    "response.function_call_arguments.done",
                    json!({"item_id": call.id, "output_index": output_index,
                        "name": call.name, "arguments": call.arguments}),
                ));
                json!({"type": "function_call", "id": call.id, "call_id": call.call_id,
                    "name": call.name, "arguments": call.arguments, "status": status})
            }
        };
        frames.push(self.event(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        ));
        self.items.push(item);
        frames
    }
}

impl TurnRenderer for ResponsesRenderer {
    fn open(&mut self) -> Vec<Frame> {
        let response = self.response("in_progress", None);
        vec![
            self.event("response.created", json!({"response": response})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    fn update(&mut self, update: TurnUpdate) -> Vec<Frame> {
        match update {
            TurnUpdate::Start { .. } | TurnUpdate::Logprobs { .. } => Vec::new(),
            TurnUpdate::Reasoning { text, .. } | TurnUpdate::Content { text, .. }
                if text.is_empty() =>
            {
                Vec::new()
            }
            TurnUpdate::Reasoning { text, .. } => {
                let mut frames = self.ensure_open(true);
                let Some(OpenItem::Reasoning { id, text: all }) = &mut self.open else {
                    unreachable!("a reasoning item was just opened")
                };
                all.push_str(&text);
                let id = id.clone();
                let fields = json!({"item_id": id, "output_index": self.items.len(),
                    "content_index": 0, "delta": text});
                frames.push(self.event("response.reasoning_text.delta", fields));
                if self.summarizes() {
                    let fields = json!({"item_id": id, "output_index": self.items.len(),
                        "summary_index": 0, "delta": text});
                    frames.push(self.event("response.reasoning_summary_text.delta", fields));
                }
                frames
            }
            TurnUpdate::Content { text, .. } => {
                let mut frames = self.ensure_open(false);
                let Some(OpenItem::Message { id, text: all }) = &mut self.open else {
                    unreachable!("a message item was just opened")
                };
                all.push_str(&text);
                let fields = json!({"item_id": id, "output_index": self.items.len(),
                    "content_index": 0, "delta": text, "logprobs": []});
                frames.push(self.event("response.output_text.delta", fields));
                frames
            }
            TurnUpdate::ToolCallStart {
                id: call_id, name, ..
            } => {
                let mut frames = self.finish_item();
                let custom = self.custom_tools.contains(&name);
                let id = self.item_id(if custom { "ctc" } else { "fc" });
                let item = match custom {
                    true => json!({"type": "custom_tool_call", "id": id, "call_id": call_id,
                        "name": name, "input": "", "status": "in_progress"}),
                    false => json!({"type": "function_call", "id": id, "call_id": call_id,
                        "name": name, "arguments": "", "status": "in_progress"}),
                };
                self.open = Some(OpenItem::Call(OpenCall {
                    id,
                    call_id,
                    name,
                    arguments: String::new(),
                    custom,
                }));
                let fields = json!({"output_index": self.items.len(), "item": item});
                frames.push(self.event("response.output_item.added", fields));
                frames
            }
            TurnUpdate::ToolCallArguments { delta, .. } => {
                let Some(OpenItem::Call(call)) = &mut self.open else {
                    return Vec::new();
                };
                call.arguments.push_str(&delta);
                // A custom call's input is sent whole when the call ends: its JSON arguments
                // are not what the client sees.
                if call.custom {
                    return Vec::new();
                }
                let fields = json!({"item_id": call.id, "output_index": self.items.len(),
                    "delta": delta});
                vec![self.event("response.function_call_arguments.delta", fields)]
            }
            // The call stays open until the next item or `Finish`: a call cut off by the
            // token limit also gets its `ToolCallEnd` (before `Finish`), and only `Finish`
            // says whether its item is `completed` or `incomplete`.
            TurnUpdate::ToolCallEnd { .. } => Vec::new(),
            TurnUpdate::Finish {
                end,
                reasoning_tokens,
                ..
            } => {
                self.end = Some(end);
                self.reasoning_tokens = reasoning_tokens;
                self.finish_item()
            }
        }
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        let response = self.complete(&ending.usage);
        let kind = match self.final_status() {
            "incomplete" => "response.incomplete",
            _ => "response.completed",
        };
        vec![self.event(kind, json!({"response": response}))]
    }

    fn error(&mut self, err: &ApiError) -> Vec<Frame> {
        let detail = err.body().error;
        let code = detail.code.clone().unwrap_or(detail.kind.clone());
        let error = self.event(
            "error",
            json!({"code": code, "message": detail.message, "param": detail.param}),
        );
        let mut response = self.response("failed", None);
        response["error"] = json!({"code": code, "message": detail.message});
        let failed = self.event("response.failed", json!({"response": response}));
        vec![error, failed]
    }

    /// `response.in_progress` again until the first output item is added.
    fn keep_alive(&mut self) -> Vec<Frame> {
        if !self.items.is_empty() || self.open.is_some() {
            return Vec::new();
        }
        let response = self.response("in_progress", None);
        vec![self.event("response.in_progress", json!({"response": response}))]
    }

    fn body(mut self: Box<Self>, ending: Ending<'_>) -> String {
        to_json(&self.complete(&ending.usage))
    }
}

mod custom_call;
mod parts;
mod store;
#[cfg(test)]
mod tests;
