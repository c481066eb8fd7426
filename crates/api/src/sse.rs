//! Streaming responses: engine events through the assembler and the endpoint's [`Dialect`],
//! sent as server-sent events in order.
//!
//! The order a client sees: the dialect's opening frames, then for each update its frames
//! (choices interleave as the engine produces them; the assembler guarantees a choice starts
//! before it finishes and finishes once), then, when every choice has finished, the dialect's
//! closing frames. An error after the first byte cannot change the HTTP status any more, so the
//! dialect reports it in-stream ([`Dialect::error`]) and the stream ends.
//!
//! While the engine has nothing to say (the request queues, a long prompt prefills), every
//! [`StreamSpec::keep_alive`] without a frame asks the dialect for its keep-alive frames
//! ([`Dialect::keep_alive`]); the first time it has none ends them. Below that, axum's SSE
//! comments keep proxies from timing the connection out.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use sluice_engine::Event;

use crate::assemble::{ResponseAssembler, TokenTexts};
use crate::dialect::{Dialect, Ending, Frame};
use crate::error::ApiError;

/// Everything a streaming response needs besides its events.
pub struct StreamSpec {
    /// How frames are shaped.
    pub dialect: Box<dyn Dialect>,
    /// Token texts for logprobs.
    pub tokens: Arc<dyn TokenTexts>,
    /// After this long without an engine event, the dialect's keep-alive frames are sent
    /// ([`Dialect::keep_alive`]); `None`: never.
    pub keep_alive: Option<Duration>,
}

struct ChunkState<S> {
    /// `None` once the response is over: dropping the engine streams aborts what still runs.
    events: Option<S>,
    assembler: ResponseAssembler,
    spec: StreamSpec,
    pending: VecDeque<Frame>,
}

/// The frames of a streaming response, in order. `events`
/// yields `(prompt_index, event)` from every engine request of the response; dropping the
/// returned stream drops them, which aborts the requests.
pub fn chunk_stream<S>(
    events: S,
    assembler: ResponseAssembler,
    spec: StreamSpec,
) -> impl Stream<Item = Frame> + Send
where
    S: Stream<Item = (usize, Event)> + Send + Unpin + 'static,
{
    let mut spec = spec;
    let pending = VecDeque::from(spec.dialect.open());
    let state = ChunkState {
        events: Some(events),
        assembler,
        spec,
        pending,
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(payload) = st.pending.pop_front() {
                return Some((payload, st));
            }
            let events = st.events.as_mut()?;
            let next = match st.spec.keep_alive {
                // `next` is cancel-safe: an event not yet out stays in its stream.
                Some(every) => match tokio::time::timeout(every, events.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        let frames = st.spec.dialect.keep_alive();
                        if frames.is_empty() {
                            st.spec.keep_alive = None;
                        }
                        st.pending.extend(frames);
                        continue;
                    }
                },
                None => events.next().await,
            };
            let outcome = match next {
                Some((prompt, event)) => st.assembler.apply(prompt, event, st.spec.tokens.as_ref()),
                None => Err(ApiError::Internal(
                    "the engine stopped before the response was complete".into(),
                )),
            };
            match outcome {
                Ok(updates) => {
                    if let Some(cached) = st.assembler.take_scheduled() {
                        st.pending.extend(st.spec.dialect.scheduled(cached));
                    }
                    for update in updates {
                        st.pending.extend(st.spec.dialect.update(update));
                    }
                    if st.assembler.is_complete() {
                        let ending = Ending {
                            usage: st.assembler.usage(),
                            assembler: &st.assembler,
                            tokens: st.spec.tokens.as_ref(),
                        };
                        st.pending.extend(st.spec.dialect.close(ending));
                        st.events = None;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stream ended by an error");
                    st.pending.extend(st.spec.dialect.error(&err));
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
    let stream = chunk_stream(events, assembler, spec).map(|frame| {
        let event = SseEvent::default().data(frame.data);
        Ok(match frame.event {
            Some(name) => event.event(name),
            None => event,
        })
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests;
