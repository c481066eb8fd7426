//! The pool's shared state behind its mutex: one entry per model with its phase and counters.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use tokio::sync::watch;

use super::bounded::Straggler;
use super::{
    Budget, LoadOutcome, LoadedModel, ModelLoader, ModelReport, ModelSpec, ModelStatus, PoolError,
};

/// The pool's shared state.
pub(super) struct Inner {
    pub(super) loader: Arc<dyn ModelLoader>,
    pub(super) budget: Budget,
    /// Every model's phase and counters. Held only for short, non-blocking sections.
    pub(super) state: Mutex<State>,
    /// Held for a whole load or unload (evictions included), so they happen one at a time.
    pub(super) changes: Mutex<()>,
    /// Logical time for least-recently-used order.
    pub(super) clock: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelPool")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

pub(super) struct State {
    pub(super) entries: Vec<Entry>,
    pub(super) closed: bool,
}

/// One model's place in the pool.
pub(super) struct Entry {
    pub(super) spec: ModelSpec,
    pub(super) max_model_len: usize,
    pub(super) phase: Phase,
    /// Leases alive now.
    pub(super) leases: usize,
    pub(super) last_used_tick: u64,
    pub(super) last_used: Option<SystemTime>,
    pub(super) loads: u64,
    pub(super) load_failures: u64,
    pub(super) unloads: u64,
    pub(super) load_seconds: f64,
    pub(super) last_error: Option<String>,
    /// Bytes the last successful load held: the budget check's figure for the next load.
    pub(super) last_memory_bytes: Option<usize>,
    /// A load abandoned at `--load-timeout` whose thread may still be reading the files; no
    /// new load starts until it has ended.
    pub(super) straggler: Option<Straggler>,
    /// Requests waiting for this model's load now.
    pub(super) load_waiters: usize,
}

pub(super) enum Phase {
    Unloaded,
    Loading {
        /// Bytes reserved against the budget once the loader has made room.
        reserved: usize,
        outcome: watch::Receiver<LoadOutcome>,
    },
    Loaded {
        model: Arc<LoadedModel>,
        loaded_at: SystemTime,
    },
    Unloading {
        memory_bytes: usize,
        done: watch::Receiver<bool>,
    },
}

impl Entry {
    pub(super) fn new(spec: ModelSpec, max_model_len: usize) -> Self {
        Entry {
            spec,
            max_model_len,
            phase: Phase::Unloaded,
            leases: 0,
            last_used_tick: 0,
            last_used: None,
            loads: 0,
            load_failures: 0,
            unloads: 0,
            load_seconds: 0.0,
            last_error: None,
            last_memory_bytes: None,
            straggler: None,
            load_waiters: 0,
        }
    }

    pub(super) fn touch(&mut self, tick: u64) {
        self.last_used_tick = tick;
        self.last_used = Some(SystemTime::now());
    }

    pub(super) fn report(&self) -> ModelReport {
        let (status, memory_bytes, requests, loaded_at) = match &self.phase {
            Phase::Unloaded => (ModelStatus::Unloaded, 0, 0, None),
            Phase::Loading { reserved, .. } => (ModelStatus::Loading, *reserved, 0, None),
            Phase::Loaded { model, loaded_at } => (
                ModelStatus::Loaded,
                model.memory_bytes,
                model.engine.num_unfinished(),
                Some(*loaded_at),
            ),
            Phase::Unloading { memory_bytes, .. } => {
                (ModelStatus::Unloading, *memory_bytes, 0, None)
            }
        };
        ModelReport {
            id: self.spec.id.clone(),
            dir: self.spec.dir.clone(),
            status,
            pinned: self.spec.pinned,
            max_model_len: self.max_model_len,
            memory_bytes,
            requests,
            last_used: self.last_used,
            loaded_at,
            loads: self.loads,
            load_failures: self.load_failures,
            unloads: self.unloads,
            load_seconds: self.load_seconds,
            last_error: self.last_error.clone(),
            load_waiters: self.load_waiters,
        }
    }
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere never leaves an entry half-updated (each update is one assignment),
        // so the state stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn index_of(&self, id: &str) -> Result<usize, PoolError> {
        self.lock()
            .entries
            .iter()
            .position(|e| e.spec.id == id)
            .ok_or_else(|| PoolError::UnknownModel(id.to_string()))
    }
}
