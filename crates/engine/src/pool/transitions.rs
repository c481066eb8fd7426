//! The pool's state changes: leasing a loaded model, starting a load, and the load and unload
//! work itself, which runs on the pool's own threads. Evictions and unloads happen under the
//! `changes` lock, one at a time; reading a model's files does not hold it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use super::bounded::{self, Unfinished};
use super::budget::{choose_victims, NoRoom, Resident};
use super::loader::LoadedModel;
use super::{Entry, Inner, LoadOutcome, ModelLease, Phase, PoolError, State, Step};

/// How long an idle engine may take to stop before its unload is reported as stuck.
const ENGINE_STOP_TIMEOUT: Duration = Duration::from_secs(60);

impl Inner {
    /// Leases `id` if it is loaded; otherwise says what to wait for, starting the load when
    /// nobody has.
    pub(super) fn try_acquire(self: &Arc<Self>, id: &str) -> Result<Step, PoolError> {
        let mut state = self.lock();
        if state.closed {
            return Err(PoolError::ShuttingDown);
        }
        let index = state
            .entries
            .iter()
            .position(|e| e.spec.id == id)
            .ok_or_else(|| PoolError::UnknownModel(id.to_string()))?;
        let tick = self.tick();
        let entry = &mut state.entries[index];
        match &entry.phase {
            Phase::Loaded { model, loaded_at } if model.engine.is_alive() => {
                let lease = ModelLease {
                    model: Arc::clone(model),
                    loaded_at: *loaded_at,
                    index,
                    pool: Arc::clone(self),
                };
                entry.leases += 1;
                entry.touch(tick);
                return Ok(Step::Ready(lease));
            }
            Phase::Loaded { .. } => {
                // Its thread has exited, so the model and KV cache are already freed.
                tracing::error!(model = id, "engine thread is gone; loading the model again");
                entry.phase = Phase::Unloaded;
            }
            Phase::Loading { outcome, .. } => return Ok(Step::AwaitLoad(outcome.clone(), index)),
            Phase::Unloading { done, .. } => return Ok(Step::AwaitUnload(done.clone())),
            Phase::Unloaded => {}
        }
        // One abandoned load per model at most: a file that blocked one reader blocks the next.
        if let Some(straggler) = &entry.straggler {
            if !straggler.has_ended() {
                return Err(PoolError::LoadStillRunning {
                    model: id.to_string(),
                    limit: self.budget.load_timeout,
                });
            }
            entry.straggler = None;
        }
        let (tx, rx) = watch::channel(None);
        entry.phase = Phase::Loading {
            reserved: 0,
            outcome: rx.clone(),
        };
        let inner = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("sluice-load-{id}"))
            .spawn(move || inner.run_load(index, tx));
        if let Err(e) = spawned {
            let err = PoolError::Thread {
                model: id.to_string(),
                message: format!("could not start the loader thread: {e}"),
            };
            mark_failed(&mut state.entries[index], &err);
            return Err(err);
        }
        Ok(Step::AwaitLoad(rx, index))
    }

    /// The loader thread: loads, records the outcome, tells every waiter.
    fn run_load(self: Arc<Self>, index: usize, outcome: watch::Sender<LoadOutcome>) {
        let result = catch_unwind(AssertUnwindSafe(|| self.load_now(index))).unwrap_or_else(|_| {
            let mut state = self.lock();
            let entry = &mut state.entries[index];
            let err = PoolError::Thread {
                model: entry.spec.id.clone(),
                message: "the loader panicked".into(),
            };
            mark_failed(entry, &err);
            Err(err)
        });
        outcome.send_replace(Some(result));
    }

    /// Sizes the model, makes room, loads, and leaves the model `Loaded` or (on any error)
    /// `Unloaded`. Reading the files (sizing and loading) is bounded by `--load-timeout`
    /// ([`bounded::run_until`]); the `changes` lock is held only while evicting, so a load that
    /// reads for a long time never holds up another model's.
    fn load_now(&self, index: usize) -> Result<(), PoolError> {
        let (id, dir, known_bytes) = {
            let mut state = self.lock();
            if state.closed {
                return fail(&mut state.entries[index], PoolError::ShuttingDown);
            }
            let entry = &state.entries[index];
            (
                entry.spec.id.clone(),
                entry.spec.dir.clone(),
                entry.last_memory_bytes,
            )
        };
        let failed = |reason| PoolError::LoadFailed {
            model: id.clone(),
            reason: Arc::new(reason),
        };
        let deadline = Instant::now() + self.budget.load_timeout;
        let needed = match known_bytes {
            Some(bytes) => bytes,
            None => {
                let (loader, dir) = (Arc::clone(&self.loader), dir.clone());
                let sized = bounded::run_until(
                    format!("sluice-size-{id}"),
                    deadline,
                    move || loader.estimate_bytes(&dir),
                    drop,
                );
                match self.finished(index, &id, sized)? {
                    Ok(bytes) => bytes,
                    Err(e) => return fail(&mut self.lock().entries[index], failed(e)),
                }
            }
        };
        self.make_room_for(index, &id, needed)?;
        let started = Instant::now();
        let (loader, load_id, load_dir) = (Arc::clone(&self.loader), id.clone(), dir.clone());
        let late_id = id.clone();
        let loaded = bounded::run_until(
            format!("sluice-read-{id}"),
            deadline,
            move || loader.load_as(&load_id, &load_dir),
            move |late| {
                if let Ok(model) = late {
                    tracing::warn!(model = %late_id, "an abandoned load finished late; stopping its engine");
                    model.engine.shutdown();
                }
            },
        );
        let loaded = self.finished(index, &id, loaded)?;
        let mut state = self.lock();
        let closed = state.closed;
        let entry = &mut state.entries[index];
        let model = match loaded {
            Ok(model) => model,
            Err(e) => return fail(entry, failed(e)),
        };
        if closed {
            model.engine.shutdown();
            return fail(entry, PoolError::ShuttingDown);
        }
        let seconds = started.elapsed().as_secs_f64();
        if model.memory_bytes > needed {
            tracing::warn!(
                model = %id,
                estimated = needed,
                holds = model.memory_bytes,
                "model holds more than estimated; the budget may be exceeded until an unload"
            );
        }
        entry.loads += 1;
        entry.load_seconds += seconds;
        entry.last_error = None;
        entry.last_memory_bytes = Some(model.memory_bytes);
        tracing::info!(model = %id, memory_mib = model.memory_bytes >> 20, seconds, "model ready");
        entry.phase = Phase::Loaded {
            model: Arc::new(model),
            loaded_at: SystemTime::now(),
        };
        Ok(())
    }

    /// The result of a bounded step of `index`'s load; when there is none (the deadline passed,
    /// the worker could not start or panicked), the model is left `Unloaded` with the error,
    /// its reservation freed, and a timed-out worker kept as the entry's straggler.
    fn finished<T>(
        &self,
        index: usize,
        id: &str,
        result: Result<T, Unfinished>,
    ) -> Result<T, PoolError> {
        let unfinished = match result {
            Ok(value) => return Ok(value),
            Err(unfinished) => unfinished,
        };
        let mut state = self.lock();
        let entry = &mut state.entries[index];
        let err = match unfinished {
            Unfinished::TimedOut(straggler) => {
                entry.straggler = Some(straggler);
                PoolError::LoadTimedOut {
                    model: id.to_string(),
                    limit: self.budget.load_timeout,
                }
            }
            Unfinished::NotStarted(e) => PoolError::Thread {
                model: id.to_string(),
                message: format!("could not start the loader thread: {e}"),
            },
            Unfinished::Panicked => PoolError::Thread {
                model: id.to_string(),
                message: "the loader panicked".into(),
            },
        };
        mark_failed(entry, &err);
        Err(err)
    }

    /// Reserves `needed` bytes for `index`, unloading idle models to make room. While only
    /// busy models (or other loads' reservations) stand in the way, tries again until
    /// `wait_for_idle` runs out. The `changes` lock is held while deciding and evicting, never
    /// while waiting.
    fn make_room_for(&self, index: usize, id: &str, needed: usize) -> Result<(), PoolError> {
        let deadline = Instant::now() + self.budget.wait_for_idle;
        loop {
            let changes = self
                .changes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut state = self.lock();
            match self.make_room(&mut state, index, needed) {
                Ok(victims) => {
                    drop(state);
                    for (victim, model, done) in victims {
                        let victim_id = self.stop(victim, &model, "to make room");
                        tracing::info!(model = %victim_id, to_load = %id, "unloaded the least recently used idle model");
                        done.send_replace(true);
                    }
                    drop(changes);
                    return Ok(());
                }
                Err((_, Blocked::ByBusyModels)) if Instant::now() < deadline => {}
                Err((reason, _)) => {
                    let err = PoolError::NoRoom {
                        model: id.to_string(),
                        reason,
                    };
                    return fail(&mut state.entries[index], err);
                }
            }
            drop(state);
            drop(changes);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Chooses the models to evict for `needed` more bytes, moves them to `Unloading` and
    /// reserves the bytes for `index`. When nothing fits, also says whether busy models are in
    /// the way (so waiting may help).
    fn make_room(
        &self,
        state: &mut State,
        index: usize,
        needed: usize,
    ) -> Result<Vec<Eviction>, (NoRoom, Blocked)> {
        // Other loads' reservations and models still unloading hold their bytes and a slot,
        // and cannot be evicted: they count as busy residents.
        let held = |i: usize, bytes: usize| Resident {
            index: i,
            bytes,
            pinned: false,
            busy: true,
            last_used: 0,
        };
        let residents: Vec<Resident> = state
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.phase {
                Phase::Loaded { model, .. } => Some(Resident {
                    index: i,
                    bytes: model.memory_bytes,
                    pinned: e.spec.pinned,
                    busy: e.leases > 0 || model.engine.num_unfinished() > 0,
                    last_used: e.last_used_tick,
                }),
                Phase::Loading { reserved, .. } if i != index && *reserved > 0 => {
                    Some(held(i, *reserved))
                }
                Phase::Unloading { memory_bytes, .. } => Some(held(i, *memory_bytes)),
                _ => None,
            })
            .collect();
        let chosen = choose_victims(&residents, needed, self.budget).map_err(|reason| {
            let mut idle = residents.clone();
            idle.iter_mut().for_each(|r| r.busy = false);
            let blocked = match choose_victims(&idle, needed, self.budget) {
                Ok(_) => Blocked::ByBusyModels,
                Err(_) => Blocked::ForGood,
            };
            (reason, blocked)
        })?;
        let mut victims = Vec::with_capacity(chosen.len());
        for victim in chosen {
            let entry = &mut state.entries[victim];
            let (tx, rx) = watch::channel(false);
            let Phase::Loaded { model, .. } = std::mem::replace(&mut entry.phase, Phase::Unloaded)
            else {
                unreachable!("victims are chosen among idle loaded models");
            };
            entry.phase = Phase::Unloading {
                memory_bytes: model.memory_bytes,
                done: rx,
            };
            victims.push((victim, model, tx));
        }
        if let Phase::Loading { reserved, .. } = &mut state.entries[index].phase {
            *reserved = needed;
        }
        Ok(victims)
    }

    /// An admin unload: refused when pinned, loading or busy.
    pub(super) fn unload_now(&self, index: usize) -> Result<(), PoolError> {
        let _changes = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (model, done) = {
            let mut state = self.lock();
            let entry = &mut state.entries[index];
            let id = entry.spec.id.clone();
            let model = match &entry.phase {
                Phase::Unloaded | Phase::Unloading { .. } => return Ok(()),
                Phase::Loading { .. } => return Err(PoolError::Loading(id)),
                Phase::Loaded { model, .. } => Arc::clone(model),
            };
            if entry.spec.pinned {
                return Err(PoolError::Pinned(id));
            }
            let requests = model.engine.num_unfinished().max(entry.leases);
            if requests > 0 {
                return Err(PoolError::Busy {
                    model: id,
                    requests,
                });
            }
            let (tx, rx) = watch::channel(false);
            entry.phase = Phase::Unloading {
                memory_bytes: model.memory_bytes,
                done: rx,
            };
            (model, tx)
        };
        let id = self.stop(index, &model, "on request");
        tracing::info!(model = %id, "unloaded");
        done.send_replace(true);
        Ok(())
    }

    /// Stops an `Unloading` model's engine, waits until its thread has dropped the weights and
    /// KV cache, and marks it `Unloaded`. Returns its id.
    fn stop(&self, index: usize, model: &LoadedModel, why: &str) -> String {
        model.engine.shutdown();
        let stopped = model.engine.wait_stopped(ENGINE_STOP_TIMEOUT);
        release_freed_memory();
        let mut state = self.lock();
        let entry = &mut state.entries[index];
        if !stopped {
            tracing::error!(model = %entry.spec.id, why, "engine did not stop in time; its memory may not be freed");
        }
        entry.unloads += 1;
        entry.phase = Phase::Unloaded;
        entry.spec.id.clone()
    }
}

/// Hands memory the allocator holds but no longer uses back to the kernel. glibc keeps freed
/// chunks in its arenas (and each loader thread may have had its own), so without this the
/// weights of an unloaded model would stay in the process's resident set until reused.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_freed_memory() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::os::raw::c_int;
    }
    // SAFETY: `malloc_trim` takes no pointers; it walks glibc's own arenas under their locks and
    // is safe to call from any thread at any time.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_freed_memory() {}

/// What stands in the way of a load that does not fit.
enum Blocked {
    /// Busy models hold what it needs; they may go idle.
    ByBusyModels,
    /// Pinned models or the budget itself.
    ForGood,
}

/// A model being evicted: its index, the model, and the sender that tells waiters it is gone.
type Eviction = (usize, Arc<LoadedModel>, watch::Sender<bool>);

/// Leaves the entry `Unloaded` with the error recorded, and returns the error.
fn fail(entry: &mut Entry, err: PoolError) -> Result<(), PoolError> {
    mark_failed(entry, &err);
    Err(err)
}

fn mark_failed(entry: &mut Entry, err: &PoolError) {
    tracing::warn!(model = %entry.spec.id, error = %err, "model not loaded");
    if !matches!(
        err,
        PoolError::NoRoom { .. } | PoolError::ShuttingDown | PoolError::LoadStillRunning { .. }
    ) {
        entry.load_failures += 1;
        entry.last_error = Some(err.to_string());
    }
    entry.phase = Phase::Unloaded;
}
