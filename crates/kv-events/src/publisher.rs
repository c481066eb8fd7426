//! The publisher thread: takes the streams' queued events, encodes one batch per model topic
//! each time it wakes (everything queued by then, in order), sends it on the PUB socket as
//! `[topic, seq, payload]` and keeps it for replay; a task on the same thread answers replay
//! requests on the ROUTER socket.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sluice_engine::block_manager::KvEvent;
use sluice_engine::kv_events::{KvEventStats, KvEventStream, Medium};
use sluice_model::KvSpan;
use tokio::sync::mpsc;
use zeromq::{PubSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::replay::{ReplayBuffer, Request};
use crate::wire::{encode_batch, Encoding, TieredEvent};

/// Queued items taken at once into one round of batches.
const MAX_ITEMS_PER_ROUND: usize = 1024;
/// After a flush, time for the sockets' writer tasks to put what was sent on the wire.
const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// One model's topic: its name, its KV groups, its sequence and its counters.
#[derive(Debug)]
pub(crate) struct Topic {
    pub(crate) name: Bytes,
    pub(crate) groups: Mutex<Vec<KvSpan>>,
    next_seq: AtomicU64,
    events: AtomicU64,
    dropped: AtomicU64,
}

impl Topic {
    pub(crate) fn new(name: String, groups: &[KvSpan]) -> Topic {
        Topic {
            name: Bytes::from(name),
            groups: Mutex::new(groups.to_vec()),
            next_seq: AtomicU64::new(0),
            events: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn groups(&self) -> MutexGuard<'_, Vec<KvSpan>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the streams send the publisher thread.
pub(crate) enum Item {
    /// Events of one topic and tier, in order.
    Events(Arc<Topic>, Medium, Vec<KvEvent>),
    /// Answer once everything queued before is sent.
    Flush(std::sync::mpsc::Sender<()>),
}

/// A model's stream: queues its events for the publisher thread without ever blocking.
#[derive(Debug)]
pub(crate) struct TopicStream {
    pub(crate) topic: Arc<Topic>,
    pub(crate) queue: mpsc::Sender<Item>,
}

impl KvEventStream for TopicStream {
    fn publish(&self, medium: Medium, events: Vec<KvEvent>) -> bool {
        let n = events.len() as u64;
        let item = Item::Events(Arc::clone(&self.topic), medium, events);
        let sent = self.queue.try_send(item).is_ok();
        let counter = if sent {
            &self.topic.events
        } else {
            &self.topic.dropped
        };
        counter.fetch_add(n, Ordering::Relaxed);
        sent
    }

    fn stats(&self) -> KvEventStats {
        KvEventStats {
            events: self.topic.events.load(Ordering::Relaxed),
            dropped: self.topic.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The sockets the thread serves, bound by the caller.
pub(crate) struct Sockets {
    pub(crate) publish: TcpListener,
    pub(crate) replay: Option<TcpListener>,
}

/// Runs the publisher until every stream and the publisher handle are gone. `ready` hears
/// whether the sockets started.
pub(crate) fn run(
    sockets: Sockets,
    mut queue: mpsc::Receiver<Item>,
    encoding: Encoding,
    replay: Arc<Mutex<ReplayBuffer>>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(format!("starting its runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let mut publish = PubSocket::new();
        if let Err(e) = publish.bind_listener(sockets.publish).await {
            let _ = ready.send(Err(format!("the PUB socket: {e}")));
            return;
        }
        if let Some(listener) = sockets.replay {
            let mut router = RouterSocket::new();
            if let Err(e) = router.bind_listener(listener).await {
                let _ = ready.send(Err(format!("the replay socket: {e}")));
                return;
            }
            tokio::spawn(serve_replay(router, Arc::clone(&replay)));
        }
        let _ = ready.send(Ok(()));
        let mut warned = false;
        while let Some(first) = queue.recv().await {
            let mut items = vec![first];
            while items.len() < MAX_ITEMS_PER_ROUND {
                match queue.try_recv() {
                    Ok(item) => items.push(item),
                    Err(_) => break,
                }
            }
            let (batches, flushes) = group_by_topic(items);
            let ts = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            for (topic, events) in batches {
                let seq = topic.next_seq.fetch_add(1, Ordering::Relaxed);
                let payload = Bytes::from(encode_batch(ts, &events, &topic.groups(), encoding));
                let frames = vec![
                    topic.name.clone(),
                    Bytes::copy_from_slice(&seq.to_be_bytes()),
                    payload.clone(),
                ];
                let message = ZmqMessage::try_from(frames).expect("three frames");
                if let Err(e) = publish.send(message).await {
                    if !std::mem::replace(&mut warned, true) {
                        tracing::warn!("KV events: a batch could not be published: {e}");
                    }
                }
                lock(&replay).push(&topic.name, seq, payload);
            }
            if !flushes.is_empty() {
                tokio::time::sleep(FLUSH_GRACE).await;
                for done in flushes {
                    let _ = done.send(());
                }
            }
        }
    });
}

fn lock(replay: &Mutex<ReplayBuffer>) -> MutexGuard<'_, ReplayBuffer> {
    replay.lock().unwrap_or_else(|e| e.into_inner())
}

type Batches = Vec<(Arc<Topic>, Vec<TieredEvent>)>;

/// One batch per topic of everything in `items`, in their order, and the flushes waiting.
fn group_by_topic(items: Vec<Item>) -> (Batches, Vec<std::sync::mpsc::Sender<()>>) {
    let mut batches: Batches = Vec::new();
    let mut flushes = Vec::new();
    for item in items {
        match item {
            Item::Events(topic, medium, events) => {
                let at = match batches.iter().position(|(t, _)| Arc::ptr_eq(t, &topic)) {
                    Some(at) => at,
                    None => {
                        batches.push((topic, Vec::new()));
                        batches.len() - 1
                    }
                };
                let tiered = events
                    .into_iter()
                    .map(|event| TieredEvent { medium, event });
                batches[at].1.extend(tiered);
            }
            Item::Flush(done) => flushes.push(done),
        }
    }
    (batches, flushes)
}

/// Answers replay requests until the socket fails for good.
async fn serve_replay(mut router: RouterSocket, replay: Arc<Mutex<ReplayBuffer>>) {
    let mut malformed = 0u64;
    loop {
        let message = match router.recv().await {
            Ok(message) => message,
            Err(e) => {
                tracing::debug!("KV events replay socket: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(request) = Request::parse(message.into_vec()) else {
            continue;
        };
        if request.start.is_none() {
            malformed += 1;
            if malformed.is_power_of_two() {
                tracing::warn!(
                    malformed,
                    "KV events: a malformed replay request (expected [\"\", 8-byte sequence])"
                );
            }
        }
        let answer = lock(&replay).answer(&request);
        for frames in answer {
            let message = ZmqMessage::try_from(frames).expect("four frames");
            if router.send(message).await.is_err() {
                break;
            }
        }
    }
}
