//! Where a model's prefix-cache changes go beyond the process: the seam a KV-event publisher
//! (vLLM's wire format over ZMQ, in the `sluice-kv-events` crate) plugs into, so a router can
//! know which replica holds which prompt prefix.
//!
//! The engine thread hands each loop's drained [`KvEvent`]s to its model's [`KvEventStream`]
//! (RAM tier), the disk tier's writer hands it the blocks it wrote and removed (disk tier), and
//! the engine announces [`KvEvent::AllCleared`] when it stops (a model unload, a shutdown).
//! `publish` must never block: a stream queues, and drops (counting) what does not fit.

use std::fmt::Debug;
use std::sync::Arc;

use sluice_model::KvSpan;

use crate::block_manager::KvEvent;

/// The tier a block was stored in or removed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Medium {
    /// The paged KV pool in memory.
    Memory,
    /// The prefix cache's disk tier (`--kv-disk-cache`).
    Disk,
}

/// Publishes the KV events of a process's models, one stream per served model.
pub trait KvEventPublisher: Send + Sync + Debug {
    /// The stream of model `model` (its served name), whose KV group `g` keeps `groups[g]`.
    fn stream(&self, model: &str, groups: &[KvSpan]) -> Arc<dyn KvEventStream>;
}

/// One model's KV events.
pub trait KvEventStream: Send + Sync + Debug {
    /// Queues `events` (in order, all of tier `medium`) without blocking; returns false when
    /// the queue was full and they were dropped (counted in [`KvEventStream::stats`]).
    fn publish(&self, medium: Medium, events: Vec<KvEvent>) -> bool;
    /// What this stream has published and dropped so far.
    fn stats(&self) -> KvEventStats;
}

/// Counters of one model's KV event stream, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvEventStats {
    /// Events queued for publishing.
    pub events: u64,
    /// Events dropped because the publisher's queue was full.
    pub dropped: u64,
}

/// A model's stream as its engine and disk tier hold it; two are equal when they are the same
/// stream.
#[derive(Debug, Clone)]
pub struct KvEventSink(pub Arc<dyn KvEventStream>);

impl PartialEq for KvEventSink {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl KvEventSink {
    /// Queues `events` of tier `medium` unless there are none; see [`KvEventStream::publish`].
    pub fn publish(&self, medium: Medium, events: Vec<KvEvent>) {
        if !events.is_empty() {
            self.0.publish(medium, events);
        }
    }
}
