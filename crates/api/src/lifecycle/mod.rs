//! The server's life as an orchestrator sees it: starting (the `--preload` models loading),
//! serving, draining (after SIGTERM); and the API requests in flight, which a drain waits for.
//!
//! The binary drives it ([`Lifecycle::preloaded`], [`Lifecycle::begin_drain`],
//! [`Lifecycle::drained`]); the probes in `routes::health` read it; [`gate`] admits API
//! requests and counts them until their responses (streams included) are sent.

pub mod gate;

use tokio::sync::watch;

/// Where the server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Models named by `--preload` are still loading (their ids).
    Starting(Vec<String>),
    /// Every preload is done; not draining.
    Serving,
    /// Shutdown was asked for: new API requests are refused, running ones finish.
    Draining,
}

/// Everything a change must see at once, behind one lock, so that admitting a request and
/// starting the drain cannot interleave (a drain that saw no request in flight stays so).
#[derive(Debug, Clone, Default)]
struct State {
    /// `--preload` models not loaded yet.
    loading: Vec<String>,
    draining: bool,
    /// API requests admitted whose responses are not fully sent.
    in_flight: usize,
}

/// The server's phase and its API requests in flight. Shared (`Arc`) between the binary, the
/// probes and the gate.
#[derive(Debug)]
pub struct Lifecycle {
    state: watch::Sender<State>,
}

impl Lifecycle {
    /// A server that will be started once each of `preload` is loaded.
    pub fn starting(preload: impl IntoIterator<Item = String>) -> Self {
        let state = State {
            loading: preload.into_iter().collect(),
            ..State::default()
        };
        Lifecycle {
            state: watch::Sender::new(state),
        }
    }

    /// A server with nothing to preload: serving at once.
    pub fn serving() -> Self {
        Lifecycle::starting([])
    }

    /// Marks `id` loaded; once none is left, the server has started.
    pub fn preloaded(&self, id: &str) {
        self.state.send_modify(|s| s.loading.retain(|l| l != id));
    }

    /// The `--preload` models still loading.
    pub fn loading(&self) -> Vec<String> {
        self.state.borrow().loading.clone()
    }

    /// True once every `--preload` model has loaded (a drain does not undo it).
    pub fn has_started(&self) -> bool {
        self.state.borrow().loading.is_empty()
    }

    /// Where the server is now; a drain outranks a start still in progress.
    pub fn phase(&self) -> Phase {
        let state = self.state.borrow();
        if state.draining {
            Phase::Draining
        } else if !state.loading.is_empty() {
            Phase::Starting(state.loading.clone())
        } else {
            Phase::Serving
        }
    }

    /// Starts the drain: from now on [`Lifecycle::admit`] refuses. Returns the requests in
    /// flight at that moment.
    pub fn begin_drain(&self) -> usize {
        let mut in_flight = 0;
        self.state.send_modify(|s| {
            s.draining = true;
            in_flight = s.in_flight;
        });
        in_flight
    }

    /// True once the drain has begun.
    pub fn is_draining(&self) -> bool {
        self.state.borrow().draining
    }

    /// API requests admitted whose responses are not fully sent.
    pub fn in_flight(&self) -> usize {
        self.state.borrow().in_flight
    }

    /// Counts one more request in flight until the returned guard is dropped; `None` (and
    /// nothing counted) once draining.
    pub fn admit(self: &std::sync::Arc<Self>) -> Option<InFlight> {
        let admitted = self.state.send_if_modified(|s| {
            if s.draining {
                return false;
            }
            s.in_flight += 1;
            true
        });
        admitted.then(|| InFlight(std::sync::Arc::clone(self)))
    }

    /// Resolves once draining and no request is in flight (at once if that is so already).
    pub async fn drained(&self) {
        let mut changes = self.state.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = changes.wait_for(|s| s.draining && s.in_flight == 0).await;
    }
}

/// One admitted API request; dropping it (when its response is sent, or its connection is
/// gone) ends its count.
#[derive(Debug)]
pub struct InFlight(std::sync::Arc<Lifecycle>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.state.send_modify(|s| s.in_flight -= 1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn starting_until_every_preload_has_loaded_then_serving() {
        let life = Lifecycle::starting(["a".to_string(), "b".to_string()]);
        assert_eq!(life.phase(), Phase::Starting(vec!["a".into(), "b".into()]));
        assert!(!life.has_started());
        life.preloaded("a");
        assert_eq!(life.loading(), vec!["b".to_string()]);
        life.preloaded("b");
        assert!(life.has_started());
        assert_eq!(life.phase(), Phase::Serving);
        assert_eq!(Lifecycle::serving().phase(), Phase::Serving);
    }

    #[test]
    fn a_drain_outranks_a_start_in_progress_and_leaves_started_as_it_was() {
        let life = Lifecycle::starting(["a".to_string()]);
        life.begin_drain();
        assert_eq!(life.phase(), Phase::Draining);
        assert!(!life.has_started());
        let started = Lifecycle::serving();
        started.begin_drain();
        assert!(started.has_started() && started.is_draining());
    }

    #[test]
    fn requests_are_counted_until_dropped_and_refused_once_draining() {
        let life = Arc::new(Lifecycle::serving());
        let first = life.admit().expect("serving admits");
        let second = life.admit().expect("serving admits");
        assert_eq!(life.in_flight(), 2);
        drop(first);
        assert_eq!(life.begin_drain(), 1);
        assert!(life.admit().is_none(), "draining refuses");
        assert_eq!(life.in_flight(), 1, "a refusal is not counted");
        drop(second);
        assert_eq!(life.in_flight(), 0);
    }

    #[tokio::test]
    async fn drained_waits_for_the_last_request_in_flight() {
        let life = Arc::new(Lifecycle::serving());
        let running = life.admit().unwrap();
        life.begin_drain();
        let waiting = tokio::spawn({
            let life = Arc::clone(&life);
            async move { life.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a request is still in flight");
        drop(running);
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("drained once the last request ended")
            .unwrap();
    }

    #[tokio::test]
    async fn drained_resolves_at_once_when_nothing_runs_and_never_before_the_drain() {
        let life = Arc::new(Lifecycle::serving());
        let before = tokio::time::timeout(Duration::from_millis(20), life.drained()).await;
        assert!(before.is_err(), "not draining: not drained");
        life.begin_drain();
        life.drained().await;
    }
}
