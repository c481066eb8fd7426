//! Serving a router on a TCP listener: what `axum::serve` does, plus the limits it leaves out.
//!
//! `axum::serve` gives hyper no timer and no bounds, so a client could hold a connection (and
//! its file descriptor) forever by never sending a request, by sending one a byte at a time, or
//! by never reading its response; and enough such connections exhaust the descriptors until
//! `/health` stops answering. Here:
//! - **Before a request**: a connection must deliver its first complete request head within
//!   `header_read_timeout` of being accepted, whatever it sends meanwhile (nothing, part of an
//!   HTTP/2 preface, headers a byte at a time); later HTTP/1 heads get the same time from the
//!   end of the previous response (hyper's own header deadline, which also closes idle
//!   keep-alive connections).
//! - **While answering**: a response whose socket accepts no bytes for `write_timeout` is
//!   dropped with its connection ([`write_deadline`]), which cancels the request in the engine.
//! - **How many**: at most `max_connections` at once; one more is answered 503 and closed
//!   ([`refusal`]).
//! - **HTTP/2** over cleartext (prior knowledge) only when `http2` is set: OpenAI clients speak
//!   HTTP/1.1, and HTTP/2 keeps idle connections open by design. When it is on, pings every
//!   [`HTTP2_KEEP_ALIVE`] close connections whose peer stops answering (a peer that stopped
//!   reading its socket cannot answer), and each connection runs at most
//!   [`HTTP2_MAX_STREAMS`] requests at once.
//!
//! - **Which names**: a request whose `Host` this server does not answer to is refused before
//!   anything else runs ([`allowed_hosts`]: a guard against DNS rebinding, strict by default on
//!   a loopback address).
//!
//! Nagle's algorithm is off, since streamed tokens are small writes it would hold back ~40 ms;
//! and shutdown stops accepting, lets open requests (running streams) finish, and returns once
//! every connection has closed. Dropping the future instead (a drain out of time) closes every
//! connection at once, which cancels their requests in the engines.

pub mod allowed_hosts;
pub mod refusal;
pub mod write_deadline;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
use tokio::sync::Semaphore;
use tower::ServiceExt;

use allowed_hosts::AllowedHosts;
use refusal::Refusal;
use write_deadline::WriteDeadline;

/// With HTTP/2 on: how often an idle connection is pinged, and how long an answer may take.
pub const HTTP2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// With HTTP/2 on: requests one connection may have open at once.
pub const HTTP2_MAX_STREAMS: u32 = 64;

/// Connection-level settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// A connection that has not sent a complete request head within this time of being
    /// accepted (or, over HTTP/1, of its previous response) is closed.
    pub header_read_timeout: Duration,
    /// A response whose socket accepts no bytes for this long is dropped with its connection,
    /// and its engine request cancelled.
    pub write_timeout: Duration,
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Accept HTTP/2 over cleartext (prior knowledge) besides HTTP/1.
    pub http2: bool,
    /// The `Host` names answered (`--allowed-hosts`; by default by the bound address).
    pub allowed_hosts: AllowedHosts,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(20),
            max_connections: 1024,
            http2: false,
            allowed_hosts: AllowedHosts::ByAddress,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests and close. Callers bound that wait themselves (a stream may be long):
/// dropping this future drops every connection, and so cancels what still runs.
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
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(HTTP2_KEEP_ALIVE)
        .keep_alive_timeout(HTTP2_KEEP_ALIVE)
        .max_concurrent_streams(HTTP2_MAX_STREAMS);
    if !options.http2 {
        builder = builder.http1_only();
    }
    // An address we cannot read is taken as loopback's: the stricter default.
    let bound = listener
        .local_addr()
        .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.ip());
    let app = options.allowed_hosts.guard(app, bound);
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let refusal = Refusal::new(options.max_connections);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    // Owned here, so that dropping this future aborts every connection's task.
    let mut open = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
            Some(_) = open.join_next(), if !open.is_empty() => continue,
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
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            tracing::debug!("refused a connection: --max-connections reached");
            refusal.refuse(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let requested = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&requested);
        let service = app.clone().map_request(move |req: Request<Incoming>| {
            seen.store(true, Ordering::Relaxed);
            req.map(Body::new)
        });
        let io = TokioIo::new(WriteDeadline::new(tcp, options.write_timeout));
        let conn = builder
            .serve_connection(io, TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        let first_request_deadline = options.header_read_timeout;
        open.spawn(async move {
            let _permit = permit;
            let mut conn = std::pin::pin!(conn);
            let ended = tokio::select! {
                ended = &mut conn => ended,
                () = tokio::time::sleep(first_request_deadline) => {
                    if !requested.load(Ordering::Relaxed) {
                        tracing::debug!("closed a connection that sent no request in time");
                        return;
                    }
                    conn.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
