//! Serving a router on a TCP listener: what `axum::serve` does, plus the deadline it leaves out.
//!
//! `axum::serve` gives hyper no timer, so a client that opens a connection and sends its request
//! headers a byte at a time (or never finishes them) holds that connection forever. Here every
//! HTTP/1 connection must deliver its complete request headers within `header_read_timeout`
//! (the body has its own deadline, [`crate::ApiConfig::request_read_timeout`]); Nagle's algorithm
//! is off, since streamed tokens are small writes it would hold back ~40 ms; and shutdown stops
//! accepting, lets open requests (running streams) finish, and returns once every connection
//! has closed.

use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// Connection-level settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// A connection that has not sent a complete request head within this time is closed.
    pub header_read_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests and close. Callers bound that wait themselves (a stream may be long).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = app
            .clone()
            .map_request(|req: Request<Incoming>| req.map(Body::new));
        let conn = builder
            .serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
