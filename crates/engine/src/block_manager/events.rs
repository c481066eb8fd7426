//! What the block pools tell the world: every block whose content became findable in the prefix
//! cache, every cached block evicted, every clear. The pools append to one [`EventSink`]; the
//! engine drains it once a step (so publishing never runs inside a pool operation), and a
//! publisher (KV events for a router, a disk tier) reads what it drained.

use std::cell::RefCell;
use std::rc::Rc;

use sluice_model::KvGroupId;

use super::block_hash::BlockHash;

/// One change to what the prefix cache holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEvent {
    /// Consecutive blocks of one chain became findable, in chain order.
    Stored {
        /// The KV group whose pool holds them.
        group: KvGroupId,
        /// Their keys, in chain order.
        block_hashes: Vec<BlockHash>,
        /// The key of the block before the first one; `None` for a chain's first block.
        parent: Option<BlockHash>,
        /// Their tokens, `block_size` a block, in order.
        token_ids: Vec<u32>,
        /// Tokens per block.
        block_size: usize,
    },
    /// Cached blocks were evicted: their keys are no longer found.
    Removed {
        /// The KV group whose pool held them.
        group: KvGroupId,
        /// Their keys.
        block_hashes: Vec<BlockHash>,
    },
    /// Every cached block of every group was forgotten.
    AllCleared,
}

/// Where the pools append their events, shared by every pool of a block manager.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventSink(Rc<RefCell<Vec<KvEvent>>>);

impl EventSink {
    pub(super) fn push(&self, event: KvEvent) {
        self.0.borrow_mut().push(event);
    }

    /// Everything appended since the last drain, oldest first.
    pub(super) fn drain(&self) -> Vec<KvEvent> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}
