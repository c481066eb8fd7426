//! Endpoint dialects: how one API shapes a response from the assembled choice updates.
//!
//! Every generating endpoint runs the same engine requests and the same
//! [`crate::assemble::ResponseAssembler`]; what differs is the wire: the
//! chunk and body shapes, the server-sent-event names, how a stream opens, ends and reports an
//! error. A [`Dialect`] is that difference, one file per API (`chat.rs`, `completion.rs`, ...),
//! so a new protocol is a new file rather than an arm in every match.
//!
//! A dialect sees every update whether the response streams or not. Streaming sends the
//! frames it returns; a one-body response drops them and asks for [`Dialect::body`] at the
//! end. Both fold the same updates through the same state, so the streamed and the collected
//! answers agree by construction.

pub mod chat;
pub mod completion;
pub mod messages;
pub mod responses;
pub mod turn;
pub mod turn_parse;

use crate::assemble::{ChoiceUpdate, LogprobsShape, ResponseAssembler, TokenTexts};
use crate::error::ApiError;
use crate::wire::UsageBody;

/// The `data:` payload that ends an OpenAI stream.
pub const DONE: &str = "[DONE]";

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The `event:` name, for protocols that use them.
    pub event: Option<&'static str>,
    /// The `data:` payload.
    pub data: String,
}

impl Frame {
    /// A frame with no event name.
    pub fn data(data: impl Into<String>) -> Self {
        Frame {
            event: None,
            data: data.into(),
        }
    }

    /// A named event carrying `value` as JSON.
    pub fn named(event: &'static str, value: &impl serde::Serialize) -> Self {
        Frame {
            event: Some(event),
            data: to_json(value),
        }
    }
}

/// What the dialect may look at when the response is over.
pub struct Ending<'a> {
    /// Token counts of the whole response.
    pub usage: UsageBody,
    /// The assembler, for what it computed besides updates (`prompt_logprobs`).
    pub assembler: &'a ResponseAssembler,
    /// Token texts for logprobs.
    pub tokens: &'a dyn TokenTexts,
}

/// How one API renders a response. See the module docs.
pub trait Dialect: Send {
    /// The shape the assembler gives logprobs in.
    fn logprobs_shape(&self) -> LogprobsShape {
        LogprobsShape::Chat
    }

    /// Frames that open a stream, before any update.
    fn open(&mut self) -> Vec<Frame> {
        Vec::new()
    }

    /// The frames a stream sends once the request is scheduled and the prefix cache's share
    /// of its first prompt is known (`cached_prompt_tokens`); before any update.
    fn scheduled(&mut self, cached_prompt_tokens: u32) -> Vec<Frame> {
        let _ = cached_prompt_tokens;
        Vec::new()
    }

    /// The frames of one update (also called, frames dropped, for one-body responses).
    fn update(&mut self, update: ChoiceUpdate) -> Vec<Frame>;

    /// The frames that end a stream once every choice finished.
    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame>;

    /// The frames that end a stream an error cut short (the HTTP status is already sent).
    fn error(&mut self, err: &ApiError) -> Vec<Frame> {
        openai_error(err)
    }

    /// The frames a stream sends when it has had nothing to send for the keep-alive interval
    /// ([`crate::ApiConfig::stream_keep_alive`]): an event its clients count as life, for a
    /// protocol that has one, until its first content. None (the default) ends the
    /// keep-alives; the SSE comments a stream always sends remain.
    fn keep_alive(&mut self) -> Vec<Frame> {
        Vec::new()
    }

    /// The one JSON body of a response that does not stream, after every update went through
    /// [`Dialect::update`]. Text, not a `Value`: a `Value` would widen the f32 logprobs.
    fn body(self: Box<Self>, ending: Ending<'_>) -> String;
}

/// The end of an OpenAI stream: the usage chunk (when the request asked for one), then
/// `[DONE]`.
pub fn openai_ending(usage_chunk: Option<Frame>) -> Vec<Frame> {
    usage_chunk.into_iter().chain([Frame::data(DONE)]).collect()
}

/// OpenAI's in-stream error: a `data:` error object, then `[DONE]`.
pub fn openai_error(err: &ApiError) -> Vec<Frame> {
    vec![Frame::data(err.stream_event_data()), Frame::data(DONE)]
}

/// `value` as JSON text.
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("wire types always serialize")
}
