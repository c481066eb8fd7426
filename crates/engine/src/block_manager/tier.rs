//! A lower tier of the prefix cache: somewhere outside the RAM pools (a disk directory today)
//! that holds blocks by their stable key. The block manager asks it for the blocks its pools
//! miss; a hit takes a fresh block, is stored in the pool under its key as if computed, and
//! leaves a [`BlockLoad`] that the engine copies into the KV cache before the step runs. What
//! the tier holds is written by the engine from the pools' [`super::KvEvent::Stored`] events.

use std::fmt::Debug;
use std::ops::{Deref, Range};

use sluice_model::KvGroupId;

use super::{BlockHash, BlockId};

/// The bytes of one block of one group, as the executor saves and loads them, read from a
/// lower tier (the whole buffer read, and the range that holds the block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockBytes {
    buffer: Vec<u8>,
    range: Range<usize>,
}

impl BlockBytes {
    /// `buffer[range]` are the block's bytes.
    pub fn new(buffer: Vec<u8>, range: Range<usize>) -> Self {
        assert!(range.end <= buffer.len(), "the range lies in the buffer");
        BlockBytes { buffer, range }
    }
}

impl Deref for BlockBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buffer[self.range.clone()]
    }
}

/// Bytes to copy into block `block` of group `group` before the coming forward pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLoad {
    /// The KV group.
    pub group: KvGroupId,
    /// The block of that group's pool.
    pub block: BlockId,
    /// Its content.
    pub bytes: BlockBytes,
}

/// Where blocks the RAM pools miss may still be found, by key.
pub trait LowerTier: Debug {
    /// Whether the tier holds the block keyed `key` of group `group` (cheap: an index lookup;
    /// a later [`LowerTier::read`] may still fail).
    fn contains(&self, group: KvGroupId, key: BlockHash) -> bool;

    /// The block keyed `key` of group `group`, the block after `parent`'s holding `tokens`,
    /// once read and checked: `None` when it is absent, unreadable, damaged, or holds other
    /// content (a tier forgets damaged blocks, so it does not offer them again).
    fn read(
        &self,
        group: KvGroupId,
        key: BlockHash,
        parent: BlockHash,
        tokens: &[u32],
    ) -> Option<BlockBytes>;
}
