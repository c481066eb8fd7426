//! How image encodings share the CPU with the engine's steps.
//!
//! An image takes seconds to encode (a Gemma-3-4B-shaped tower: some 30-40 s on two cores), on
//! the thread pool the steps of every decoding stream run on. Each encoding running beside the
//! steps takes about an equal share of the pool: one encoding made four streams' gaps 1.9x
//! longer while it ran, and each more encoding at once takes one more share. llama-server, for its
//! part, stops every stream for the whole encoding.
//!
//! The gate lets **one encoding at a time run beside the steps** (the oldest; the others wait at
//! their next pause point, [`sluice_model::vision::Pause`]), and every encoding run while the
//! engine has no step to run. So the streams keep about half their speed however many images
//! arrive, and the encoding beside them keeps overlapping its arithmetic with the steps' weight
//! streaming.
//!
//! Alternating instead (the encodings paused during every step, then given what the step-time
//! target left) was tried first. Beside four streams it was about as good (streams 2.0x, the
//! image 1.8-1.9x its time alone; sharing 1.9-2.3x and 1.75-2.4x), but eight images at once were
//! 18% slower (0.0396 against 0.0481 images/s on a Qwen2.5-VL-3B shape), because a decode step
//! that waits on memory and an encoding that waits on arithmetic no longer ran together.
//!
//! An encoding holds an [`EncoderTurn`] while it runs ([`EncodeGate::enter`]); its points check
//! the gate. A gate whose engine has gone lets every encoding run.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use sluice_model::vision::{Pause, UNIT_ROWS};

use crate::metrics::EngineMetrics;

/// Encodings that run beside the engine's steps; the rest wait while it has steps to run.
const BESIDE_STEPS: usize = 1;

/// The gate between one engine's steps and the image encodings of its model.
#[derive(Debug, Default)]
pub struct EncodeGate {
    state: Mutex<State>,
    changed: Condvar,
    /// Where the encodings and their waits are counted (`sluice:image_encodings`).
    metrics: Arc<EngineMetrics>,
}

#[derive(Debug, Default)]
struct State {
    /// The engine has steps to run.
    busy: bool,
    /// The turns held, by the order they were taken.
    turns: BTreeSet<u64>,
    next_turn: u64,
}

impl State {
    /// Whether the encoding holding `turn` may go on.
    fn may_run(&self, turn: u64) -> bool {
        !self.busy || self.turns.iter().take(BESIDE_STEPS).any(|&t| t == turn)
    }
}

impl EncodeGate {
    /// A gate with no step to run.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A gate counting into the engine's `metrics`.
    pub(crate) fn counting_into(metrics: Arc<EngineMetrics>) -> Arc<Self> {
        Arc::new(EncodeGate {
            metrics,
            ..Self::default()
        })
    }

    /// Starts an encoding: its turn's points check the gate until the turn is dropped.
    pub fn enter(self: &Arc<Self>) -> EncoderTurn {
        let mut state = self.lock();
        let turn = state.next_turn;
        state.next_turn += 1;
        state.turns.insert(turn);
        EngineMetrics::set(&self.metrics.image_encodings, state.turns.len());
        EncoderTurn {
            gate: Arc::clone(self),
            turn,
        }
    }

    /// Encodings running or waiting.
    pub fn active(&self) -> usize {
        self.lock().turns.len()
    }

    /// Times an encoding has waited at a point for its turn beside the steps.
    pub fn pauses(&self) -> u64 {
        self.metrics.image_encoding_waits.load(Ordering::Relaxed)
    }

    /// Whether the engine has steps to run (then only the oldest encoding runs beside them).
    pub(crate) fn set_busy(&self, busy: bool) {
        let mut state = self.lock();
        if state.busy != busy {
            state.busy = busy;
            if !busy {
                self.changed.notify_all();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("not poisoned")
    }
}

/// One encoding's pass through the gate; its pause points wait while others run beside the
/// engine's steps.
#[derive(Debug)]
pub struct EncoderTurn {
    gate: Arc<EncodeGate>,
    turn: u64,
}

impl Pause for EncoderTurn {
    fn point(&self) {
        let gate = &self.gate;
        let mut state = gate.lock();
        if state.may_run(self.turn) {
            return;
        }
        EngineMetrics::add(&gate.metrics.image_encoding_waits, 1);
        while !state.may_run(self.turn) {
            state = gate.changed.wait(state).expect("not poisoned");
        }
    }

    fn unit_rows(&self) -> usize {
        UNIT_ROWS
    }
}

impl Drop for EncoderTurn {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.turns.remove(&self.turn);
        EngineMetrics::set(&self.gate.metrics.image_encodings, state.turns.len());
        drop(state);
        self.gate.changed.notify_all();
    }
}

#[cfg(test)]
#[path = "encode_gate_tests.rs"]
mod tests;
