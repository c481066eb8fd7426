//! A sequence's blocks: one list per KV group, released by ownership when the table is dropped.

use std::cell::RefCell;
use std::rc::Rc;

use sluice_model::{KvGroupId, FULL_GROUP, RELEASED_BLOCK};

use super::block_hash::BlockHash;
use super::cache_keys::CacheKeys;
use super::pool::BlockPool;
use super::BlockId;

/// One sequence's blocks in one group's pool, in logical order: the first `released` were given
/// back (their entries read [`RELEASED_BLOCK`]), the rest are held. Dropping it releases them.
#[derive(Debug)]
pub(super) struct GroupBlocks {
    pub(super) pool: Rc<RefCell<BlockPool>>,
    pub(super) blocks: Vec<BlockId>,
    released: usize,
}

impl GroupBlocks {
    /// A list whose first `released` logical blocks are not held, then the `reused` blocks
    /// (the caller took a reference on each).
    pub(super) fn new(pool: Rc<RefCell<BlockPool>>, released: usize, reused: Vec<BlockId>) -> Self {
        let mut blocks = vec![RELEASED_BLOCK; released];
        blocks.extend(reused);
        GroupBlocks {
            pool,
            blocks,
            released,
        }
    }

    /// Fresh blocks needed to cover `num_tokens` positions.
    pub(super) fn needed(&self, num_tokens: usize, block_size: usize) -> usize {
        num_tokens
            .div_ceil(block_size)
            .saturating_sub(self.blocks.len())
    }

    /// Takes the fresh blocks to cover `num_tokens` positions (the caller checked they are
    /// free).
    pub(super) fn grow(&mut self, num_tokens: usize, block_size: usize) {
        let needed = self.needed(num_tokens, block_size);
        let mut pool = self.pool.borrow_mut();
        for _ in 0..needed {
            self.blocks.push(pool.take_fresh());
        }
    }

    /// Gives back the held blocks among the first `num_blocks`.
    pub(super) fn release_front(&mut self, num_blocks: usize) {
        let upto = num_blocks.min(self.blocks.len());
        let mut pool = self.pool.borrow_mut();
        while self.released < upto {
            pool.release(self.blocks[self.released]);
            self.blocks[self.released] = RELEASED_BLOCK;
            self.released += 1;
        }
    }

    /// Gives back the blocks after the first `num_blocks` (the tail a step took for positions
    /// it then discarded; never registered, so nothing cached is lost).
    pub(super) fn truncate(&mut self, num_blocks: usize) {
        let keep = num_blocks.max(self.released);
        let mut pool = self.pool.borrow_mut();
        while self.blocks.len() > keep {
            let b = self.blocks.pop().expect("longer than keep");
            pool.release(b);
        }
    }

    /// Blocks held now.
    pub(super) fn num_held(&self) -> usize {
        self.blocks.len() - self.released
    }
}

impl Drop for GroupBlocks {
    fn drop(&mut self) {
        let mut pool = self.pool.borrow_mut();
        // Last blocks first, so a sequence's tail is evicted before its (more shareable) head.
        for &b in self.blocks[self.released..].iter().rev() {
            pool.release(b);
        }
    }
}

/// The blocks of one sequence, one list per KV group. Dropping it releases them.
#[derive(Debug)]
pub struct BlockTable {
    pub(super) groups: Vec<GroupBlocks>,
    /// What its chain of block keys is computed under.
    pub(super) keys: CacheKeys,
    /// Leading full-group blocks whose content was registered (or found) in the prefix cache.
    pub(super) num_registered: usize,
    /// Key of the last registered block, the parent of the next one (the chain's root before
    /// the first).
    pub(super) last_key: BlockHash,
    /// Tokens reused from other sequences when this table was allocated.
    pub(super) num_cached_tokens: usize,
    /// Of which read from the lower tier.
    pub(super) num_lower_tokens: usize,
}

impl BlockTable {
    /// Physical block ids of the full group, in logical order.
    pub fn block_ids(&self) -> &[BlockId] {
        &self.groups[FULL_GROUP].blocks
    }

    /// Leading tokens that were already computed when the table was allocated (cache hit or shared
    /// with a sibling); the sequence starts computing after them.
    pub fn num_cached_tokens(&self) -> usize {
        self.num_cached_tokens
    }

    /// Of [`BlockTable::num_cached_tokens`], the tokens whose blocks were read from the lower
    /// tier (a disk) rather than found in the pools.
    pub fn num_lower_tokens(&self) -> usize {
        self.num_lower_tokens
    }

    /// Group `group`'s logical table: [`RELEASED_BLOCK`] for the blocks given back, then the
    /// held ones.
    pub fn group_table(&self, group: KvGroupId) -> &[BlockId] {
        &self.groups[group].blocks
    }

    /// Every group's logical table, in group order (what a batch carries).
    pub fn tables(&self) -> Vec<Vec<u32>> {
        self.groups.iter().map(|g| g.blocks.clone()).collect()
    }

    /// Blocks of group `group` held now.
    pub fn num_held(&self, group: KvGroupId) -> usize {
        self.groups[group].num_held()
    }
}
