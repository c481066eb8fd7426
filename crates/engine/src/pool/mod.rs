//! The model pool: many models from one server, each loaded on first use within a memory
//! budget, the least recently used idle ones unloaded to make room.
//!
//! Every model moves through one state machine, kept per model behind the pool's mutex:
//!
//! ```text
//! Unloaded ──(first request, or admin load)──► Loading ──ok──► Loaded ──(evicted, admin unload)──► Unloading ──► Unloaded
//!                                                 └──error──► Unloaded (the error goes to every waiter)
//! ```
//!
//! The request that finds a model `Unloaded` moves it to `Loading` under the mutex and starts a
//! loader thread; requests arriving meanwhile find `Loading` and wait on the same outcome, so a
//! model is never loaded twice; a request that goes away stops waiting. Loads and unloads run on
//! the pool's own threads (disk reads and weight conversion never block an async runtime).
//! Evictions happen one at a time, each deciding with nothing else changing underneath it, but
//! reading files does not hold other models' loads: each load reserves its bytes, then reads
//! within `--load-timeout` ([`Budget::load_timeout`]); a load past it is abandoned (its waiters
//! get [`PoolError::LoadTimedOut`], its reservation is freed). A model is busy, and never evicted, while a
//! [`ModelLease`] is held (a request between lookup and submit) or its engine has unfinished
//! requests. Each loaded model runs its own engine thread; all of them compute on rayon's one
//! global pool (see [`loader`]).

mod bounded;
pub mod budget;
mod draft;
pub mod kv_sizing;
pub mod loader;
mod projector;
mod state;
mod transitions;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use thiserror::Error;
use tokio::sync::{oneshot, watch};

pub use budget::{Budget, NoRoom};
pub use kv_sizing::{KvCacheMemory, MemoryShare};
pub use loader::{DirectoryLoader, LoadSettings, LoadedModel, ModelLoadError, ModelLoader};
use state::{Entry, Inner, Phase, State};

/// A model the pool can serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// The id clients ask for.
    pub id: String,
    /// Its Hugging Face directory.
    pub dir: PathBuf,
    /// Never unloaded, neither to make room nor by an admin, until unpinned
    /// ([`ModelPool::set_pinned`]).
    pub pinned: bool,
}

/// Where a model is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelStatus {
    /// Available, not in memory.
    Unloaded,
    /// Being loaded (or waiting for another load or unload to finish first).
    Loading,
    /// In memory with its engine running.
    Loaded,
    /// Its engine is stopping; memory is freed when it has.
    Unloading,
}

impl ModelStatus {
    /// The lower-case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelStatus::Unloaded => "unloaded",
            ModelStatus::Loading => "loading",
            ModelStatus::Loaded => "loaded",
            ModelStatus::Unloading => "unloading",
        }
    }
}

/// Why the pool could not do what was asked.
#[derive(Debug, Clone, Error)]
pub enum PoolError {
    /// No model has this id.
    #[error("the model '{0}' does not exist")]
    UnknownModel(String),
    /// The load failed; the model stays unloaded and the next request tries again.
    #[error("model '{model}' failed to load: {reason}")]
    LoadFailed {
        /// The model.
        model: String,
        /// What went wrong, naming the file where one is at fault.
        reason: Arc<ModelLoadError>,
    },
    /// Reading the model's files took longer than `--load-timeout`: the load was abandoned,
    /// its reservation freed, and the model stays unloaded.
    #[error("model '{model}' did not load within {} s (--load-timeout); the load was abandoned", limit.as_secs_f64())]
    LoadTimedOut {
        /// The model.
        model: String,
        /// The limit.
        limit: Duration,
    },
    /// A load abandoned at `--load-timeout` is still reading the model's files (a named pipe,
    /// an unresponsive mount); no new load starts until it ends.
    #[error("model '{model}' cannot be loaded now: an earlier load, abandoned after {} s (--load-timeout), is still reading its files", limit.as_secs_f64())]
    LoadStillRunning {
        /// The model.
        model: String,
        /// The limit it passed.
        limit: Duration,
    },
    /// The model does not fit even after unloading every idle unpinned model.
    #[error("model '{model}' cannot be loaded: {reason}")]
    NoRoom {
        /// The model.
        model: String,
        /// What holds the memory or the slots.
        reason: NoRoom,
    },
    /// An unload was asked for while requests are in flight.
    #[error("model '{model}' has {requests} request(s) in flight; unload it once it is idle")]
    Busy {
        /// The model.
        model: String,
        /// Running and queued requests.
        requests: usize,
    },
    /// An unload was asked for a pinned model.
    #[error("model '{0}' is pinned and is never unloaded; unpin it first")]
    Pinned(String),
    /// An unload was asked for while the model is loading.
    #[error("model '{0}' is loading; unload it once the load has finished")]
    Loading(String),
    /// The pool is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A loader or unloader thread could not be started or died.
    #[error("model '{model}': {message}")]
    Thread {
        /// The model.
        model: String,
        /// What happened.
        message: String,
    },
}

/// Why a pool could not be built.
#[derive(Debug, Error)]
pub enum RegisterError {
    /// Two models share an id.
    #[error("two models are served as '{0}'; give them distinct names")]
    DuplicateId(String),
    /// A model directory's config cannot be read.
    #[error("model '{id}' ({dir}): {reason}")]
    Unreadable {
        /// The model.
        id: String,
        /// Its directory.
        dir: PathBuf,
        /// What is wrong.
        reason: Box<ModelLoadError>,
    },
}

/// One model as an operator sees it.
#[derive(Debug, Clone)]
pub struct ModelReport {
    /// The id clients ask for.
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Where it is in its life cycle.
    pub status: ModelStatus,
    /// Never unloaded.
    pub pinned: bool,
    /// Effective context length.
    pub max_model_len: usize,
    /// Bytes counted against the budget now: held while loaded or unloading, reserved while
    /// loading.
    pub memory_bytes: usize,
    /// Requests running or queued in its engine.
    pub requests: usize,
    /// When a request last used it.
    pub last_used: Option<SystemTime>,
    /// When its current load finished.
    pub loaded_at: Option<SystemTime>,
    /// Successful loads.
    pub loads: u64,
    /// Failed loads.
    pub load_failures: u64,
    /// Unloads (evictions and admin unloads).
    pub unloads: u64,
    /// Seconds spent in successful loads, summed.
    pub load_seconds: f64,
    /// Why the last load failed, until one succeeds.
    pub last_error: Option<String>,
    /// Requests waiting for its load now (a request whose client leaves stops waiting).
    pub load_waiters: usize,
}

/// The pool as a whole.
#[derive(Debug, Clone)]
pub struct PoolSnapshot {
    /// The limits.
    pub budget: Budget,
    /// Bytes counted against the budget now.
    pub used_bytes: usize,
    /// Models loaded now.
    pub loaded_models: usize,
    /// Every model, in registration order.
    pub models: Vec<ModelReport>,
}

/// A loaded model held for one request: while any lease is alive the model is busy and cannot
/// be unloaded. Dropping it marks the model used.
#[derive(Debug)]
pub struct ModelLease {
    model: Arc<LoadedModel>,
    loaded_at: SystemTime,
    index: usize,
    pool: Arc<Inner>,
}

impl ModelLease {
    /// The loaded model.
    pub fn model(&self) -> &Arc<LoadedModel> {
        &self.model
    }

    /// When this load finished.
    pub fn loaded_at(&self) -> SystemTime {
        self.loaded_at
    }
}

impl Drop for ModelLease {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        let tick = self.pool.tick();
        let entry = &mut state.entries[self.index];
        entry.leases -= 1;
        entry.touch(tick);
    }
}

/// One request waiting for a model's load, counted in [`ModelReport::load_waiters`] until
/// dropped (the load finished, or the request's future was dropped).
struct LoadWaiter {
    pool: Arc<Inner>,
    index: usize,
}

impl LoadWaiter {
    fn new(pool: &Arc<Inner>, index: usize) -> Self {
        pool.lock().entries[index].load_waiters += 1;
        LoadWaiter {
            pool: Arc::clone(pool),
            index,
        }
    }
}

impl Drop for LoadWaiter {
    fn drop(&mut self) {
        self.pool.lock().entries[self.index].load_waiters -= 1;
    }
}

/// The model pool. Cheap to clone; every clone is the same pool.
#[derive(Debug, Clone)]
pub struct ModelPool {
    inner: Arc<Inner>,
}

/// What a caller must wait for before trying again.
enum Step {
    Ready(ModelLease),
    AwaitLoad(watch::Receiver<LoadOutcome>, usize),
    AwaitUnload(watch::Receiver<bool>),
}

/// A load's result once it is known.
type LoadOutcome = Option<Result<(), PoolError>>;

impl ModelPool {
    /// A pool over `specs`, nothing loaded yet. Reads each model's config (not its weights).
    pub fn new(
        specs: Vec<ModelSpec>,
        loader: Arc<dyn ModelLoader>,
        budget: Budget,
    ) -> Result<ModelPool, RegisterError> {
        let mut entries: Vec<Entry> = Vec::with_capacity(specs.len());
        for spec in specs {
            if entries.iter().any(|e| e.spec.id == spec.id) {
                return Err(RegisterError::DuplicateId(spec.id));
            }
            let max_model_len =
                loader
                    .context_length(&spec.dir)
                    .map_err(|reason| RegisterError::Unreadable {
                        id: spec.id.clone(),
                        dir: spec.dir.clone(),
                        reason: Box::new(reason),
                    })?;
            entries.push(Entry::new(spec, max_model_len));
        }
        Ok(ModelPool {
            inner: Arc::new(Inner {
                loader,
                budget,
                state: Mutex::new(State {
                    entries,
                    closed: false,
                }),
                changes: Mutex::new(()),
                clock: AtomicU64::new(1),
            }),
        })
    }

    /// Every model id, in registration order.
    pub fn ids(&self) -> Vec<String> {
        let state = self.inner.lock();
        state.entries.iter().map(|e| e.spec.id.clone()).collect()
    }

    /// The model `id`, loading it first when it is not in memory (concurrent callers share one
    /// load). Hold the lease until the request is submitted.
    pub async fn acquire(&self, id: &str) -> Result<ModelLease, PoolError> {
        loop {
            match self.inner.try_acquire(id)? {
                Step::Ready(lease) => return Ok(lease),
                Step::AwaitLoad(mut outcome, index) => {
                    // Counted while this future waits; dropped with it when the client leaves.
                    let _waiting = LoadWaiter::new(&self.inner, index);
                    let result = match outcome.wait_for(Option::is_some).await {
                        Ok(done) => done.clone(),
                        Err(_) => Some(Err(PoolError::Thread {
                            model: id.to_string(),
                            message: "the loader thread ended without a result".into(),
                        })),
                    };
                    // The load this caller waited on failed: report it rather than retry.
                    if let Some(Err(e)) = result {
                        return Err(e);
                    }
                }
                Step::AwaitUnload(mut done) => {
                    let _ = done.wait_for(|d| *d).await;
                }
            }
        }
    }

    /// Loads `id` if it is not loaded (the admin load and `--preload`).
    pub async fn load(&self, id: &str) -> Result<(), PoolError> {
        self.acquire(id).await.map(drop)
    }

    /// Unloads `id` once: refused while it has requests in flight, while it loads, or when it
    /// is pinned. Unloading a model that is not loaded succeeds and changes nothing.
    pub async fn unload(&self, id: &str) -> Result<(), PoolError> {
        let index = self.inner.index_of(id)?;
        let (tx, rx) = oneshot::channel();
        let inner = Arc::clone(&self.inner);
        std::thread::Builder::new()
            .name(format!("sluice-unload-{id}"))
            .spawn(move || {
                let _ = tx.send(inner.unload_now(index));
            })
            .map_err(|e| PoolError::Thread {
                model: id.to_string(),
                message: format!("could not start the unloader thread: {e}"),
            })?;
        rx.await.unwrap_or_else(|_| {
            Err(PoolError::Thread {
                model: id.to_string(),
                message: "the unloader thread ended without a result".into(),
            })
        })
    }

    /// Pins `id` (never unloaded, neither to make room nor by an admin) or unpins it. Takes
    /// effect at once, whatever state the model is in; pinning does not load it.
    pub fn set_pinned(&self, id: &str, pinned: bool) -> Result<(), PoolError> {
        let mut state = self.inner.lock();
        let entry = state
            .entries
            .iter_mut()
            .find(|e| e.spec.id == id)
            .ok_or_else(|| PoolError::UnknownModel(id.to_string()))?;
        if entry.spec.pinned != pinned {
            tracing::info!(model = id, pinned, "pin changed");
        }
        entry.spec.pinned = pinned;
        Ok(())
    }

    /// Every model's state, memory and counters, and the pool's totals.
    pub fn snapshot(&self) -> PoolSnapshot {
        let state = self.inner.lock();
        let models: Vec<ModelReport> = state.entries.iter().map(Entry::report).collect();
        PoolSnapshot {
            budget: self.inner.budget,
            used_bytes: models.iter().map(|m| m.memory_bytes).sum(),
            loaded_models: models
                .iter()
                .filter(|m| m.status == ModelStatus::Loaded)
                .count(),
            models,
        }
    }

    /// The loaded models (for their engines' metrics and health); takes no lease.
    pub fn loaded(&self) -> Vec<(String, Arc<LoadedModel>, SystemTime)> {
        let state = self.inner.lock();
        state
            .entries
            .iter()
            .filter_map(|e| match &e.phase {
                Phase::Loaded { model, loaded_at } => {
                    Some((e.spec.id.clone(), Arc::clone(model), *loaded_at))
                }
                _ => None,
            })
            .collect()
    }

    /// The registered context length of `id`, loaded or not.
    pub fn max_model_len(&self, id: &str) -> Result<usize, PoolError> {
        let index = self.inner.index_of(id)?;
        Ok(self.inner.lock().entries[index].max_model_len)
    }

    /// Refuses new loads and requests and asks every engine to finish what it accepted and stop.
    /// Does not wait; returns the handles so the caller can.
    pub fn shutdown(&self) -> Vec<crate::EngineHandle> {
        let mut state = self.inner.lock();
        state.closed = true;
        let engines: Vec<_> = state
            .entries
            .iter()
            .filter_map(|e| match &e.phase {
                Phase::Loaded { model, .. } => Some(model.engine.clone()),
                _ => None,
            })
            .collect();
        for engine in &engines {
            engine.shutdown();
        }
        engines
    }
}

#[cfg(test)]
mod load_limit_tests;
#[cfg(test)]
mod tests;
