//! How image encodings share the CPU with the engine's steps.
//!
//! An image takes seconds to encode (a Gemma-3-4B-shaped tower: some 30 s on two cores), on the
//! same thread pool as the steps of every stream already decoding. Left to compete, the two
//! interleave at the pool's whim: the streams' tokens came 1.9x slower while an image encoded.
//! The gate makes the encoding part of the step budget instead:
//!
//! ```text
//! engine:   close ─► step ─► share(slice) ─► close ─► step ─► share(slice) ─► …   idle: open
//! encoder:  (parked)         units … point   (parked)         units … point        units …
//! ```
//!
//! Before a step the engine closes the gate and waits until every encoding has reached its
//! next pause point ([`sluice_model::vision::Pause`]: a unit of 256 rows, some tens of
//! milliseconds). After the step it opens the gate for a slice of time and waits it out (or
//! until every encoding has finished or parked), then closes it for the next step. With no step
//! to run, the gate stays open and encodings run freely. So each step is delayed by at most
//! the slice plus the unit in flight, and the slice is what the step-time target leaves
//! ([`encoder_slice`]).
//!
//! An encoding holds an [`EncoderTurn`] while it runs ([`EncodeGate::enter`]); its points check
//! the gate. A gate whose engine has gone stays open.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_model::vision::{Pause, UNIT_ROWS};

/// The time encodings get after a step that took `step`: what `target` leaves of the step-time
/// budget, and at least the step's own length, so that streams and encodings at most halve each
/// other's speed when both are waiting (a quarter for the encodings, tried first, made a
/// Gemma-3-4B-shaped image beside four streams wait 3.0x its time alone, the streams 1.47x).
pub(crate) fn encoder_slice(step: Duration, target: Option<Duration>) -> Duration {
    target.map_or(step, |target| target.saturating_sub(step).max(step))
}

/// The gate between one engine's steps and the image encodings of its model.
#[derive(Debug, Default)]
pub struct EncodeGate {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    opening: Opening,
    /// Encodings holding a turn.
    active: usize,
    /// Of those, the ones stopped at a point.
    parked: usize,
    /// Times an encoding has stopped at a point, ever.
    pauses: u64,
    /// Shares given so far.
    shares: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum Opening {
    /// No step to make room for.
    #[default]
    Open,
    /// Encodings may run until then.
    Until(Instant),
    /// A step runs or is about to.
    Closed,
}

impl EncodeGate {
    /// An open gate.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Starts an encoding: its turn's points check the gate until the turn is dropped.
    pub fn enter(self: &Arc<Self>) -> EncoderTurn {
        self.lock().active += 1;
        EncoderTurn {
            gate: Arc::clone(self),
        }
    }

    /// Encodings running (parked or not).
    pub fn active(&self) -> usize {
        self.lock().active
    }

    /// Times an encoding has stopped to let a step run.
    pub fn pauses(&self) -> u64 {
        self.lock().pauses
    }

    /// Closes the gate and waits until every encoding has stopped at a point or finished;
    /// returns how long that took.
    pub(crate) fn close(&self) -> Duration {
        let started = Instant::now();
        let mut state = self.lock();
        state.opening = Opening::Closed;
        while state.parked < state.active {
            state = self.changed.wait(state).expect("not poisoned");
        }
        started.elapsed()
    }

    /// Lets encodings run for `slice` (each stopped one for at least one unit) and waits until
    /// it has passed or every encoding has finished; the gate is closed again by
    /// [`EncodeGate::close`].
    pub(crate) fn share(&self, slice: Duration) {
        let mut state = self.lock();
        if state.active == 0 {
            return;
        }
        let deadline = Instant::now() + slice;
        state.opening = Opening::Until(deadline);
        state.shares += 1;
        self.changed.notify_all();
        loop {
            let now = Instant::now();
            if now >= deadline || state.active == 0 {
                return;
            }
            state = (self.changed.wait_timeout(state, deadline - now))
                .expect("not poisoned")
                .0;
        }
    }

    /// Opens the gate for as long as no step runs.
    pub(crate) fn open(&self) {
        let mut state = self.lock();
        if state.opening != Opening::Open {
            state.opening = Opening::Open;
            self.changed.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("not poisoned")
    }
}

/// One encoding's pass through the gate; its pause points wait while the gate is closed.
#[derive(Debug)]
pub struct EncoderTurn {
    gate: Arc<EncodeGate>,
}

impl Pause for EncoderTurn {
    fn point(&self) {
        let gate = &self.gate;
        let mut state = gate.lock();
        // The share during which it stopped: a later one runs at least one unit, however
        // short the slice (else a slice shorter than a wake-up would never make progress).
        let mut stopped_in = None;
        loop {
            match state.opening {
                Opening::Open => return,
                Opening::Until(deadline) if Instant::now() < deadline => return,
                Opening::Until(_) if stopped_in.is_some_and(|s| s != state.shares) => return,
                _ => {}
            }
            stopped_in = Some(state.shares);
            state.parked += 1;
            state.pauses += 1;
            gate.changed.notify_all();
            state = gate.changed.wait(state).expect("not poisoned");
            state.parked -= 1;
        }
    }

    fn unit_rows(&self) -> usize {
        UNIT_ROWS
    }
}

impl Drop for EncoderTurn {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.active -= 1;
        self.gate.changed.notify_all();
    }
}

#[cfg(test)]
#[path = "encode_gate_tests.rs"]
mod tests;
