//! Streaming responses: choice updates rendered as OpenAI chunks, in server-sent-event order.
//!
//! The order a client sees: for each choice, a first chunk carrying the role (chat) and any
//! text, later chunks with text only, then exactly one chunk with its `finish_reason`; choices
//! interleave as the engine produces them. When every choice has finished, an optional usage
//! chunk with empty `choices`, then `[DONE]`. An error after the first byte cannot change the
//! HTTP status any more, so it is sent as a `data:` event with an `error` object, then `[DONE]`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use sluice_engine::Event;

use crate::assemble::{
    ChoiceUpdate, Flavor, LogprobsPiece, ResponseAssembler, ResponseMeta, TokenTexts,
};
use crate::error::ApiError;
use crate::wire::chat::{ChatChunkChoice, ChatCompletionChunk, ChatDelta};
use crate::wire::completion::{CompletionChoice, CompletionChunk};
use crate::wire::UsageBody;

/// The `data:` payload that ends every stream.
pub const DONE: &str = "[DONE]";

/// The chunk(s) one update becomes, as JSON strings.
pub fn render_update(flavor: Flavor, meta: &ResponseMeta, update: ChoiceUpdate) -> String {
    match flavor {
        Flavor::Chat => {
            let choice = match update {
                ChoiceUpdate::Delta {
                    index,
                    first,
                    text,
                    logprobs,
                } => ChatChunkChoice {
                    index,
                    delta: ChatDelta {
                        role: first.then(|| "assistant".to_string()),
                        content: Some(text),
                    },
                    logprobs: match logprobs {
                        Some(LogprobsPiece::Chat(lp)) => Some(lp),
                        _ => None,
                    },
                    finish_reason: None,
                },
                ChoiceUpdate::Finish { index, reason } => ChatChunkChoice {
                    index,
                    delta: ChatDelta::default(),
                    logprobs: None,
                    finish_reason: Some(reason.to_string()),
                },
            };
            to_json(&chat_chunk(meta, vec![choice], None))
        }
        Flavor::Completion => {
            let choice = match update {
                ChoiceUpdate::Delta {
                    index,
                    text,
                    logprobs,
                    ..
                } => CompletionChoice {
                    text,
                    index,
                    logprobs: match logprobs {
                        Some(LogprobsPiece::Completion(lp)) => Some(lp),
                        _ => None,
                    },
                    finish_reason: None,
                    prompt_logprobs: None,
                },
                ChoiceUpdate::Finish { index, reason } => CompletionChoice {
                    text: String::new(),
                    index,
                    logprobs: None,
                    finish_reason: Some(reason.to_string()),
                    prompt_logprobs: None,
                },
            };
            to_json(&completion_chunk(meta, vec![choice], None))
        }
    }
}

/// The final usage chunk: empty `choices`, the response's `usage`.
pub fn render_usage(flavor: Flavor, meta: &ResponseMeta, usage: UsageBody) -> String {
    match flavor {
        Flavor::Chat => to_json(&chat_chunk(meta, Vec::new(), Some(usage))),
        Flavor::Completion => to_json(&completion_chunk(meta, Vec::new(), Some(usage))),
    }
}

fn chat_chunk(
    meta: &ResponseMeta,
    choices: Vec<ChatChunkChoice>,
    usage: Option<UsageBody>,
) -> ChatCompletionChunk {
    ChatCompletionChunk {
        id: meta.id.clone(),
        object: "chat.completion.chunk".into(),
        created: meta.created,
        model: meta.model.clone(),
        system_fingerprint: meta.system_fingerprint.clone(),
        choices,
        usage,
    }
}

fn completion_chunk(
    meta: &ResponseMeta,
    choices: Vec<CompletionChoice>,
    usage: Option<UsageBody>,
) -> CompletionChunk {
    CompletionChunk {
        id: meta.id.clone(),
        object: "text_completion".into(),
        created: meta.created,
        model: meta.model.clone(),
        system_fingerprint: meta.system_fingerprint.clone(),
        choices,
        usage,
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("wire types always serialize")
}

/// Everything a streaming response needs besides its events.
pub struct StreamSpec {
    /// Chat or completion chunks.
    pub flavor: Flavor,
    /// Identity of every chunk.
    pub meta: ResponseMeta,
    /// Send the usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// Token texts for logprobs.
    pub tokens: Arc<dyn TokenTexts>,
}

struct ChunkState<S> {
    /// `None` once the response is over: dropping the engine streams aborts what still runs.
    events: Option<S>,
    assembler: ResponseAssembler,
    spec: StreamSpec,
    pending: VecDeque<String>,
}

/// The `data:` payloads of a streaming response, in order, ending with `[DONE]`. `events`
/// yields `(prompt_index, event)` from every engine request of the response; dropping the
/// returned stream drops them, which aborts the requests.
pub fn chunk_stream<S>(
    events: S,
    assembler: ResponseAssembler,
    spec: StreamSpec,
) -> impl Stream<Item = String> + Send
where
    S: Stream<Item = (usize, Event)> + Send + Unpin + 'static,
{
    let state = ChunkState {
        events: Some(events),
        assembler,
        spec,
        pending: VecDeque::new(),
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(payload) = st.pending.pop_front() {
                return Some((payload, st));
            }
            let events = st.events.as_mut()?;
            let next = events.next().await;
            let outcome = match next {
                Some((prompt, event)) => st.assembler.apply(prompt, event, st.spec.tokens.as_ref()),
                None => Err(ApiError::Internal(
                    "the engine stopped before the response was complete".into(),
                )),
            };
            match outcome {
                Ok(updates) => {
                    for update in updates {
                        st.pending
                            .push_back(render_update(st.spec.flavor, &st.spec.meta, update));
                    }
                    if st.assembler.is_complete() {
                        if st.spec.include_usage {
                            st.pending.push_back(render_usage(
                                st.spec.flavor,
                                &st.spec.meta,
                                st.assembler.usage(),
                            ));
                        }
                        st.pending.push_back(DONE.to_string());
                        st.events = None;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stream ended by an error");
                    st.pending.push_back(err.stream_event_data());
                    st.pending.push_back(DONE.to_string());
                    st.events = None;
                }
            }
        }
    })
}

/// An axum SSE response over [`chunk_stream`], with keep-alive comments while the engine is
/// quiet (queued or prefilling) so proxies do not time the connection out.
pub fn sse_response<S>(
    events: S,
    assembler: ResponseAssembler,
    spec: StreamSpec,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>>
where
    S: Stream<Item = (usize, Event)> + Send + Unpin + 'static,
{
    let stream =
        chunk_stream(events, assembler, spec).map(|data| Ok(SseEvent::default().data(data)));
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests;
