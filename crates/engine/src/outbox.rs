//! Events a request's channel has not taken yet. The engine never blocks on a slow client: deltas
//! wait here, merged into one, and go out at a later loop; a closed channel is reported.
//!
//! A request is done for the engine once every choice has finished computing, whether or not
//! its client reads: each request's channel holds [`FINAL_EVENTS_PER_CHOICE`] slots per choice
//! reserved from the start, so the last events of a finished request always fit, and the
//! request leaves the engine (and stops counting as unfinished, which keeps a pooled model busy)
//! at once. A client that stopped reading then holds only its few buffered events, never the
//! model: with `--max-models 1` another model can be loaded in its place.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc::{self, error::TrySendError, OwnedPermit};

use crate::output::PendingOutput;
use crate::request::{Event, PromptScores, Task};

/// Events of one choice not yet accepted by the request's channel.
#[derive(Debug, Default)]
pub(crate) struct ChoiceOutbox {
    /// The prefix-cache hit of the choice's first scheduling, sent before anything else.
    pub(crate) scheduled: Option<u32>,
    /// Outputs over the prompt, sent before any delta.
    pub(crate) prompt: Option<Box<PromptScores>>,
    pub(crate) delta: PendingOutput,
    pub(crate) finished: Option<Event>,
    /// `Finished` was delivered.
    done: bool,
}

/// Channel slots reserved per choice for the events left when it finishes computing: its
/// `Scheduled`, the prompt's scores, the merged undelivered delta and `Finished`.
pub(crate) const FINAL_EVENTS_PER_CHOICE: usize = 4;

/// A request's event channel and the undelivered events of each choice.
#[derive(Debug)]
pub(crate) struct RequestState {
    pub(crate) events: mpsc::Sender<Event>,
    /// What the request is for (its metrics label).
    pub(crate) task: Task,
    pub(crate) choices: Vec<ChoiceOutbox>,
    /// Slots kept free for the final events, used once every choice finished computing.
    reserved: Vec<OwnedPermit<Event>>,
}

impl RequestState {
    /// The state of a request with `n` choices; reserves their final slots in `events` (made
    /// with room for them, see `EngineHandle`).
    pub(crate) fn new(events: mpsc::Sender<Event>, task: Task, n: usize) -> Self {
        let reserved = (0..n * FINAL_EVENTS_PER_CHOICE)
            .map_while(|_| events.clone().try_reserve_owned().ok())
            .collect();
        RequestState {
            events,
            task,
            choices: (0..n).map(|_| ChoiceOutbox::default()).collect(),
            reserved,
        }
    }

    /// Every choice has finished computing: only delivery is left.
    fn computed(&self) -> bool {
        self.choices.iter().all(|c| c.done || c.finished.is_some())
    }

    /// Sends `event`, into a reserved slot when the channel is full and `final_events`.
    fn send(&mut self, event: Event, final_events: bool) -> Result<(), TrySendError<Event>> {
        match self.events.try_send(event) {
            Err(TrySendError::Full(event)) if final_events => match self.reserved.pop() {
                Some(slot) => {
                    slot.send(event);
                    Ok(())
                }
                None => Err(TrySendError::Full(event)),
            },
            sent => sent,
        }
    }
}

/// What a flush achieved.
pub(crate) enum Flush {
    /// Every choice's `Finished` went out: the request is done.
    AllDelivered,
    /// Some events wait for room in the channel (or the choices are still running).
    Pending,
    /// The receiver is gone.
    Closed,
}

/// Sends, in order, what the request's channel will take.
/// `unfinished` is the engine's count of requests not yet done; the request leaves it as its
/// last `Finished` goes out.
pub(crate) fn flush(request: &mut RequestState, unfinished: &AtomicUsize) -> Flush {
    let final_events = request.computed();
    for choice in 0..request.choices.len() {
        if let Some(cached_prompt_tokens) = request.choices[choice].scheduled.take() {
            let event = Event::Scheduled {
                choice: choice as u32,
                cached_prompt_tokens,
            };
            match request.send(event, final_events) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    request.choices[choice].scheduled = Some(cached_prompt_tokens);
                    return Flush::Pending;
                }
                Err(_) => return Flush::Closed,
            }
        }
        if let Some(scores) = request.choices[choice].prompt.take() {
            let event = Event::Prompt {
                choice: choice as u32,
                scores,
            };
            match request.send(event, final_events) {
                Ok(()) => {}
                Err(TrySendError::Full(Event::Prompt { scores, .. })) => {
                    request.choices[choice].prompt = Some(scores);
                    return Flush::Pending;
                }
                Err(_) => return Flush::Closed,
            }
        }
        if !request.choices[choice].delta.is_empty() {
            if request.events.is_closed() {
                return Flush::Closed;
            }
            // The engine is the only sender, so room seen here is still there for `send`.
            let room =
                request.events.capacity() > 0 || (final_events && !request.reserved.is_empty());
            if !room {
                return Flush::Pending;
            }
            let delta = std::mem::take(&mut request.choices[choice].delta);
            let event = Event::Delta {
                choice: choice as u32,
                text: delta.text,
                token_ids: delta.token_ids,
                logprobs: delta.logprobs,
            };
            if request.send(event, final_events).is_err() {
                return Flush::Closed;
            }
        }
        if let Some(event) = request.choices[choice].finished.take() {
            // The request stops counting as unfinished before its last `Finished` can reach
            // the caller: one who has the whole answer and at once unloads the model must not
            // find it still in flight (it was, for the instant between send and count).
            let last = (request.choices.iter().enumerate()).all(|(c, s)| c == choice || s.done);
            if last {
                unfinished.fetch_sub(1, Ordering::AcqRel);
            }
            match request.send(event, final_events) {
                Ok(()) => request.choices[choice].done = true,
                Err(TrySendError::Full(event)) => {
                    if last {
                        unfinished.fetch_add(1, Ordering::AcqRel);
                    }
                    request.choices[choice].finished = Some(event);
                    return Flush::Pending;
                }
                Err(TrySendError::Closed(_)) => {
                    if last {
                        unfinished.fetch_add(1, Ordering::AcqRel);
                    }
                    return Flush::Closed;
                }
            }
        }
    }
    if request.choices.iter().all(|c| c.done) {
        Flush::AllDelivered
    } else {
        Flush::Pending
    }
}
