//! What differs between KV groups in the block manager: which blocks a sequence may give back
//! as it grows, and whether a block of the group may be reused from another sequence. A new kind
//! of group (chunked attention, per-adapter pools) is a new [`GroupPolicy`] here and a new
//! `sluice_model::KvSpan`.

use std::fmt::Debug;

use sluice_model::kv_layout::blocks_behind;
use sluice_model::KvSpan;

/// One KV group's rules.
pub(super) trait GroupPolicy: Debug {
    /// Leading logical blocks that no token at position `next` or later reads: the blocks a
    /// table may give back once `next` tokens are computed.
    fn releasable(&self, next: usize, block_size: usize) -> usize;

    /// Whether a sequence may start from this group's blocks of a prefix another sequence
    /// computed (a prefix-cache hit or a sibling choice's prompt).
    fn serves_prefix_hits(&self) -> bool;
}

/// Layers that read every earlier position: every block is kept and any prefix can be reused.
#[derive(Debug)]
struct FullAttention;

impl GroupPolicy for FullAttention {
    fn releasable(&self, _next: usize, _block_size: usize) -> usize {
        0
    }

    fn serves_prefix_hits(&self) -> bool {
        true
    }
}

/// Layers that read the last `window` positions (a token's own and the `window - 1` before it):
/// blocks behind the window go back to the pool. Their blocks are never reused: a hit would
/// need the window blocks of the prefix's end, which were given back when their sequence moved
/// on.
#[derive(Debug)]
struct SlidingWindow {
    window: usize,
}

impl GroupPolicy for SlidingWindow {
    fn releasable(&self, next: usize, block_size: usize) -> usize {
        blocks_behind(next, self.window, block_size)
    }

    fn serves_prefix_hits(&self) -> bool {
        false
    }
}

/// The policy of a group whose layers read `span`.
pub(super) fn policy_for(span: KvSpan) -> Box<dyn GroupPolicy> {
    match span {
        KvSpan::Full => Box::new(FullAttention),
        KvSpan::Window(window) => {
            assert!(window > 0, "a window of no positions");
            Box::new(SlidingWindow { window })
        }
    }
}
