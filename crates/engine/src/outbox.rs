//! Events a request's channel has not taken yet. The engine never blocks on a slow client: deltas
//! wait here, merged into one, and go out at a later loop; a closed channel is reported.

use tokio::sync::mpsc::{self, error::TrySendError};

use crate::request::{Event, PromptScores, Task};
use crate::sequence::PendingOutput;

/// Events of one choice not yet accepted by the request's channel.
#[derive(Debug, Default)]
pub(crate) struct ChoiceOutbox {
    /// Outputs over the prompt, sent before any delta.
    pub(crate) prompt: Option<Box<PromptScores>>,
    pub(crate) delta: PendingOutput,
    pub(crate) finished: Option<Event>,
    /// `Finished` was delivered.
    done: bool,
}

/// A request's event channel and the undelivered events of each choice.
#[derive(Debug)]
pub(crate) struct RequestState {
    pub(crate) events: mpsc::Sender<Event>,
    /// What the request is for (its metrics label).
    pub(crate) task: Task,
    pub(crate) choices: Vec<ChoiceOutbox>,
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
pub(crate) fn flush(request: &mut RequestState) -> Flush {
    for (choice, outbox) in request.choices.iter_mut().enumerate() {
        if let Some(scores) = outbox.prompt.take() {
            let event = Event::Prompt {
                choice: choice as u32,
                scores,
            };
            match request.events.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(Event::Prompt { scores, .. })) => {
                    outbox.prompt = Some(scores);
                    return Flush::Pending;
                }
                Err(_) => return Flush::Closed,
            }
        }
        if !outbox.delta.is_empty() {
            if request.events.is_closed() {
                return Flush::Closed;
            }
            // The engine is the only sender, so room seen here is still there for `try_send`.
            if request.events.capacity() == 0 {
                return Flush::Pending;
            }
            let delta = std::mem::take(&mut outbox.delta);
            let event = Event::Delta {
                choice: choice as u32,
                text: delta.text,
                token_ids: delta.token_ids,
                logprobs: delta.logprobs,
            };
            if request.events.try_send(event).is_err() {
                return Flush::Closed;
            }
        }
        if let Some(event) = outbox.finished.take() {
            match request.events.try_send(event) {
                Ok(()) => outbox.done = true,
                Err(TrySendError::Full(event)) => {
                    outbox.finished = Some(event);
                    return Flush::Pending;
                }
                Err(TrySendError::Closed(_)) => return Flush::Closed,
            }
        }
    }
    if request.choices.iter().all(|c| c.done) {
        Flush::AllDelivered
    } else {
        Flush::Pending
    }
}
