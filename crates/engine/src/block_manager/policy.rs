//! What differs between KV groups in the block manager: which blocks a sequence may give back
//! as it grows, and which blocks of a prefix must be found for it to count as computed. A new kind
//! of group (chunked attention, per-adapter pools) is a new [`GroupPolicy`] here and a new
//! `sluice_model::KvSpan`.

use std::fmt::Debug;
use std::ops::Range;

use sluice_model::kv_layout::blocks_behind;
use sluice_model::KvSpan;

/// One KV group's rules.
pub(super) trait GroupPolicy: Debug {
    /// Leading logical blocks that no token at position `next` or later reads: the blocks a
    /// table may give back once `next` tokens are computed.
    fn releasable(&self, next: usize, block_size: usize) -> usize;

    /// The logical blocks this group must find (cached, or held by a sibling) for the first
    /// `num_blocks` full blocks of a sequence to count as computed: what the next token reads.
    fn hit_span(&self, num_blocks: usize, block_size: usize) -> Range<usize>;
}

/// Layers that read every earlier position: every block is kept, and a prefix hit needs every
/// block of the prefix.
#[derive(Debug)]
struct FullAttention;

impl GroupPolicy for FullAttention {
    fn releasable(&self, _next: usize, _block_size: usize) -> usize {
        0
    }

    fn hit_span(&self, num_blocks: usize, _block_size: usize) -> Range<usize> {
        0..num_blocks
    }
}

/// Layers that read the last `window` positions (a token's own and the `window - 1` before it):
/// blocks behind the window go back to the pool (cached ones stay findable until reused), and a
/// prefix hit needs only the blocks covering the prefix's last `window - 1` positions, all the
/// next token reads of the prefix.
#[derive(Debug)]
struct SlidingWindow {
    window: usize,
}

impl GroupPolicy for SlidingWindow {
    fn releasable(&self, next: usize, block_size: usize) -> usize {
        blocks_behind(next, self.window, block_size)
    }

    fn hit_span(&self, num_blocks: usize, block_size: usize) -> Range<usize> {
        // The next token sits at position `num_blocks * block_size`.
        blocks_behind(num_blocks * block_size, self.window, block_size).min(num_blocks)..num_blocks
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_hit_needs_every_block_and_a_window_hit_the_blocks_the_next_token_reads() {
        let full = policy_for(KvSpan::Full);
        assert_eq!(full.hit_span(5, 4), 0..5);
        // Window 5, blocks of 4: after 20 tokens the next token (position 20) reads 16..=20,
        // so only block 4 (16..20) must be found.
        let window = policy_for(KvSpan::Window(5));
        assert_eq!(window.hit_span(5, 4), 4..5);
        // Window 9: positions 12..=20, blocks 3 and 4.
        assert_eq!(policy_for(KvSpan::Window(9)).hit_span(5, 4), 3..5);
        // A window longer than the prefix needs all of it.
        assert_eq!(policy_for(KvSpan::Window(64)).hit_span(5, 4), 0..5);
        assert_eq!(window.hit_span(0, 4), 0..0);
    }
}
