//! `sluice serve`'s way out: the shutdown signals, and the drain between SIGTERM and the engines
//! stopping. Readiness turns 503 at once; the listener stays open, answering probes and
//! refusing new API requests (503, `Retry-After`); running requests get `--drain-timeout` to
//! finish; then the listener closes and whatever still runs is cancelled.

use std::sync::Arc;
use std::time::Duration;

use sluice_api::lifecycle::Lifecycle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// SIGTERM and Ctrl-C (SIGINT), listened for from the moment this is made, so a signal during
/// the preload is not lost (nor kills the process unhandled).
pub struct ShutdownSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Starts listening; must be called inside the runtime.
    pub fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(ShutdownSignals {
                term: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(ShutdownSignals {})
    }

    /// Resolves on the next SIGTERM or Ctrl-C; names it.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// The HTTP server running as a task, and the switch that starts its graceful shutdown.
pub struct RunningServer {
    /// The server's task (`sluice_api::server::serve`).
    pub task: JoinHandle<()>,
    /// Sending `true` stops accepting and closes connections once their requests end.
    pub stop: watch::Sender<bool>,
}

/// Drains: refuses new API requests, waits up to `timeout` for the running ones, then closes
/// the listener and cancels what is left. Returns once the server is down.
pub async fn drain(lifecycle: &Arc<Lifecycle>, server: RunningServer, timeout: Duration) {
    let running = lifecycle.begin_drain();
    tracing::info!(
        running,
        drain_timeout_secs = timeout.as_secs_f64(),
        "draining: not ready; new API requests get 503, running ones may finish"
    );
    let deadline = Instant::now() + timeout;
    match tokio::time::timeout_at(deadline, lifecycle.drained()).await {
        Ok(()) => tracing::info!("drained: every running request finished; closing the listener"),
        Err(_) => tracing::warn!(
            running = lifecycle.in_flight(),
            "drain timed out; closing the listener and cancelling the requests still running"
        ),
    }
    let RunningServer { mut task, stop } = server;
    let _ = stop.send(true);
    // Idle kept-alive connections close at once; a probe in progress gets until the deadline.
    if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
        task.abort();
        let _ = task.await;
    }
    tracing::info!("listener closed");
}
