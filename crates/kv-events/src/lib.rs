//! KV cache events in vLLM's wire format, so prefix-aware routers (llm-d's precise prefix-cache
//! scorer, vLLM's production-stack router, Dynamo, anything written against vLLM's
//! `kv_events.py`) know which replica holds which prompt prefix.
//!
//! - **PUB socket** (`--kv-events tcp://*:5557`): each message is three frames: the topic
//!   `kv@<pod>@<model>` (one per served model), the batch's sequence number (8 bytes,
//!   big-endian, counting from 0 per topic) and a msgpack `KVEventBatch` ([`wire`]).
//! - **Replay** (`--kv-events-replay tcp://*:5558`): a ROUTER that answers "from sequence N"
//!   with the batches still buffered ([`replay`]), so a subscriber that sees a gap in the
//!   sequence or reconnects loses nothing recent.
//! - **Never slows a step**: engines queue their drained events on a bounded channel
//!   (`try_send`; a full queue drops the events and counts them) and a thread of its own
//!   encodes and sends. A subscriber that does not keep up loses messages at its own socket
//!   queue (a gap in its sequence numbers, recoverable by replay); others are not held up.

mod msgpack;
mod publisher;
pub mod replay;
pub mod wire;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_engine::kv_events::{KvEventPublisher, KvEventStream};
use sluice_model::KvSpan;
use thiserror::Error;
use tokio::sync::mpsc;

use publisher::{Item, Sockets, Topic, TopicStream};
use replay::ReplayBuffer;
pub use wire::Encoding;

/// How events are published.
#[derive(Debug, Clone)]
pub struct KvEventsOptions {
    /// The PUB socket's endpoint, `tcp://HOST:PORT` (`*` for every interface).
    pub endpoint: String,
    /// The replay ROUTER's endpoint, if any.
    pub replay_endpoint: Option<String>,
    /// The pod name in topics (`kv@<pod>@<model>`).
    pub pod: String,
    /// How events are laid out.
    pub encoding: Encoding,
    /// Batches kept for replay, per model (vLLM keeps 10,000).
    pub replay_batches: usize,
    /// Bytes of batches kept for replay, per model.
    pub replay_bytes: usize,
    /// Engine and disk-tier hand-offs queued before events are dropped.
    pub queue: usize,
}

impl KvEventsOptions {
    /// Defaults for `endpoint` and `pod`: no replay socket, arrays, vLLM's replay depth.
    pub fn new(endpoint: impl Into<String>, pod: impl Into<String>) -> Self {
        KvEventsOptions {
            endpoint: endpoint.into(),
            replay_endpoint: None,
            pod: pod.into(),
            encoding: Encoding::Array,
            replay_batches: 10_000,
            replay_bytes: 64 << 20,
            queue: 4096,
        }
    }
}

/// Why publishing could not start.
#[derive(Debug, Error)]
pub enum KvEventsError {
    /// The endpoint is not one sluice can bind.
    #[error("{flag} {endpoint}: {why}")]
    Endpoint {
        /// The flag that named it.
        flag: &'static str,
        /// The endpoint.
        endpoint: String,
        /// What is wrong with it.
        why: String,
    },
    /// The address cannot be bound (taken, not local, no permission).
    #[error("{flag} {endpoint}: cannot bind {address}: {source}")]
    Bind {
        /// The flag that named it.
        flag: &'static str,
        /// The endpoint.
        endpoint: String,
        /// The address tried.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The publisher thread or its sockets did not start.
    #[error("KV events: the publisher did not start: {0}")]
    Start(String),
}

/// The process's KV event publisher: one PUB socket (and replay socket), a topic per model.
#[derive(Debug)]
pub struct ZmqKvEvents {
    queue: mpsc::Sender<Item>,
    pod: String,
    topics: Mutex<HashMap<String, Arc<Topic>>>,
    local_addr: SocketAddr,
    replay_addr: Option<SocketAddr>,
}

impl ZmqKvEvents {
    /// Binds the sockets and starts the publisher thread.
    pub fn start(options: &KvEventsOptions) -> Result<Arc<ZmqKvEvents>, KvEventsError> {
        let publish = bind("--kv-events", &options.endpoint)?;
        let replay = match &options.replay_endpoint {
            Some(endpoint) => Some(bind("--kv-events-replay", endpoint)?),
            None => None,
        };
        let replay_addr = replay.as_ref().map(address_of).transpose()?;
        let local_addr = address_of(&publish)?;
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let buffer = ReplayBuffer::new(options.replay_batches, options.replay_bytes);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let encoding = options.encoding;
        std::thread::Builder::new()
            .name("sluice-kv-events".into())
            .spawn(move || {
                let sockets = Sockets { publish, replay };
                publisher::run(
                    sockets,
                    rx,
                    encoding,
                    Arc::new(Mutex::new(buffer)),
                    ready_tx,
                )
            })
            .map_err(|e| KvEventsError::Start(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Err(KvEventsError::Start(why)),
            Err(_) => return Err(KvEventsError::Start("the thread ended".into())),
        }
        tracing::info!(
            endpoint = %options.endpoint,
            address = %local_addr,
            replay = ?replay_addr,
            pod = %options.pod,
            encoding = ?options.encoding,
            "KV events published on tcp://{local_addr} (topics kv@{}@<model>)",
            options.pod
        );
        Ok(Arc::new(ZmqKvEvents {
            queue: tx,
            pod: options.pod.clone(),
            topics: Mutex::new(HashMap::new()),
            local_addr,
            replay_addr,
        }))
    }

    /// The address the PUB socket is bound to (its port resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address of the replay socket, if there is one.
    pub fn replay_addr(&self) -> Option<SocketAddr> {
        self.replay_addr
    }

    /// Waits (at most `timeout`) until everything queued so far is sent.
    pub fn flush(&self, timeout: Duration) {
        let (done, wait) = std::sync::mpsc::channel();
        if self.queue.try_send(Item::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(timeout);
        }
    }
}

impl KvEventPublisher for ZmqKvEvents {
    fn stream(&self, model: &str, groups: &[KvSpan]) -> Arc<dyn KvEventStream> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        // A model loaded again continues its topic's sequence.
        let topic = topics
            .entry(model.to_string())
            .or_insert_with(|| Arc::new(Topic::new(format!("kv@{}@{model}", self.pod), groups)));
        *topic.groups.lock().unwrap_or_else(|e| e.into_inner()) = groups.to_vec();
        Arc::new(TopicStream {
            topic: Arc::clone(topic),
            queue: self.queue.clone(),
        })
    }
}

fn address_of(listener: &TcpListener) -> Result<SocketAddr, KvEventsError> {
    listener
        .local_addr()
        .map_err(|e| KvEventsError::Start(e.to_string()))
}

/// Binds `tcp://HOST:PORT` (HOST `*` is every IPv4 interface, as ZMQ reads it).
fn bind(flag: &'static str, endpoint: &str) -> Result<TcpListener, KvEventsError> {
    let invalid = |why: &str| KvEventsError::Endpoint {
        flag,
        endpoint: endpoint.to_string(),
        why: why.to_string(),
    };
    let rest = endpoint
        .strip_prefix("tcp://")
        .ok_or_else(|| invalid("only tcp://HOST:PORT endpoints are supported"))?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| invalid("expected tcp://HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| invalid("the port is not a number from 0 to 65535"))?;
    let host = match host {
        "*" => "0.0.0.0",
        h => h.trim_start_matches('[').trim_end_matches(']'),
    };
    TcpListener::bind((host, port)).map_err(|source| KvEventsError::Bind {
        flag,
        endpoint: endpoint.to_string(),
        address: format!("{host}:{port}"),
        source,
    })
}

#[cfg(test)]
mod tests;
