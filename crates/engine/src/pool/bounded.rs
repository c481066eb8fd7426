//! A load's blocking work (reading a model's files, building its engine) run on a thread of its
//! own and waited for until a deadline.
//!
//! Blocking reads cannot be interrupted: a model file that is a named pipe nobody writes to, or
//! sits on a mount that stopped answering, keeps its reader in `open` or `read` for good. So the
//! pool does not wait for such work past `--load-timeout`: it gives the work up (its waiters get
//! an error and its memory reservation is freed) and leaves the thread behind as a
//! [`Straggler`]. Whatever the thread produces later is disposed of by the caller's `dispose`
//! (a model that loads after all has its engine stopped), never handed to anyone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

/// Where the work stands, shared by the waiting thread and the worker.
enum Slot<T> {
    /// Running; someone waits for it.
    Running,
    /// Finished before anyone gave up: the result (`None`: the work panicked), not yet taken.
    Done(Option<T>),
    /// Taken by the waiter.
    Taken,
    /// The waiter gave up; the worker disposes of its result when it finishes.
    Abandoned,
    /// The worker finished after being abandoned.
    Ended,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
    changed: Condvar,
}

/// Why bounded work produced no result.
pub(super) enum Unfinished {
    /// The deadline passed first; the work goes on in the straggler.
    TimedOut(Straggler),
    /// The worker thread could not be started.
    NotStarted(std::io::Error),
    /// The work panicked.
    Panicked,
}

/// Work given up at its deadline and still running, for as long as its thread lives.
#[derive(Clone)]
pub(super) struct Straggler {
    ended: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl Straggler {
    /// True once the abandoned work has finished (and its result was disposed of).
    pub(super) fn has_ended(&self) -> bool {
        (self.ended)()
    }
}

/// Runs `work` on a new thread named `name` and waits for it until `deadline`. Past the
/// deadline the work is abandoned: `dispose` receives its result whenever it finishes.
pub(super) fn run_until<T, W, D>(
    name: String,
    deadline: Instant,
    work: W,
    dispose: D,
) -> Result<T, Unfinished>
where
    T: Send + 'static,
    W: FnOnce() -> T + Send + 'static,
    D: FnOnce(T) + Send + 'static,
{
    let shared = Arc::new(Shared {
        slot: Mutex::new(Slot::Running),
        changed: Condvar::new(),
    });
    let worker = Arc::clone(&shared);
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let result = catch_unwind(AssertUnwindSafe(work));
        let mut slot = worker.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match (&*slot, result) {
            (Slot::Abandoned, Ok(value)) => {
                *slot = Slot::Ended;
                drop(slot);
                dispose(value);
            }
            (Slot::Abandoned, Err(_)) => *slot = Slot::Ended,
            (_, result) => *slot = Slot::Done(result.ok()),
        }
        worker.changed.notify_all();
    });
    if let Err(e) = spawned {
        return Err(Unfinished::NotStarted(e));
    }
    let mut slot = shared.slot.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Slot::Done(_) = &*slot {
            let Slot::Done(result) = std::mem::replace(&mut *slot, Slot::Taken) else {
                unreachable!("matched above");
            };
            return result.ok_or(Unfinished::Panicked);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            *slot = Slot::Abandoned;
            drop(slot);
            let watched = Arc::clone(&shared);
            let ended = move || {
                let slot = watched.slot.lock().unwrap_or_else(PoisonError::into_inner);
                matches!(*slot, Slot::Ended)
            };
            return Err(Unfinished::TimedOut(Straggler {
                ended: Arc::new(ended),
            }));
        }
        slot = shared
            .changed
            .wait_timeout(slot, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn soon(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[test]
    fn work_done_in_time_is_returned() {
        let got = run_until("t".into(), soon(5_000), || 7, |_| panic!("not disposed"));
        assert!(matches!(got, Ok(7)));
    }

    #[test]
    fn work_past_its_deadline_is_abandoned_and_its_late_result_disposed() {
        let (release, wait) = mpsc::channel::<()>();
        let disposed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&disposed);
        let started = Instant::now();
        let got = run_until(
            "t".into(),
            soon(50),
            move || {
                let _ = wait.recv();
                11
            },
            move |v| flag.store(v == 11, Ordering::SeqCst),
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        let Err(Unfinished::TimedOut(straggler)) = got else {
            panic!("expected a timeout");
        };
        assert!(!straggler.has_ended());
        release.send(()).unwrap();
        let deadline = soon(5_000);
        while !straggler.has_ended() {
            assert!(Instant::now() < deadline, "the straggler never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(disposed.load(Ordering::SeqCst));
    }

    #[test]
    fn a_panic_is_reported_not_propagated() {
        let got = run_until::<u8, _, _>("t".into(), soon(5_000), || panic!("boom"), |_| {});
        assert!(matches!(got, Err(Unfinished::Panicked)));
    }
}
