//! The KV block pools: ref-counted blocks, ownership-based release and automatic prefix caching.
//!
//! A model's cache is a list of KV groups (`sluice_model::kv_layout`): the full-attention
//! layers' and, for a model with sliding-window layers, the window layers'. Each group has a pool
//! of its own and a small policy (`policy.rs`: which blocks a sequence may give back as it
//! grows, which blocks of a prefix must be found for a hit); a sequence's [`BlockTable`] holds
//! one list of blocks per group, and dropping the table returns them, so a block cannot be
//! forgotten.
//!
//! A full, computed block gets a stable key ([`BlockHash`]: its parent's key and its tokens),
//! the same in every group that holds it; a later sequence whose tokens hash to the same chain
//! reuses the longest prefix every group can serve (`reuse.rs`: a full group needs every block,
//! a window group the blocks of the prefix's last window), after comparing the stored tokens.
//! Blocks whose count drops to zero go on their pool's free list: unkeyed blocks at the front
//! (reused first), keyed ones at the back, so cached content is evicted in least-recently-freed
//! order and only when a fresh block is needed. A block with a non-zero count is never on the
//! free list, so it is never evicted. Every block stored in or evicted from the cache is a
//! [`KvEvent`], drained by the engine once a step.

mod block_hash;
mod cache_keys;
mod events;
mod lookup;
mod policy;
mod pool;
mod reuse;
mod table;
mod tier;

use std::cell::RefCell;
use std::rc::Rc;

use sluice_model::{KvPools, KvSpan, FULL_GROUP, RELEASED_BLOCK};
use thiserror::Error;

pub use block_hash::{cache_scope, BlockHash};
pub use cache_keys::{CacheKeys, KeySpan};
use events::EventSink;
pub use events::KvEvent;
use policy::{policy_for, GroupPolicy};
use pool::BlockPool;
use reuse::{Reuse, Source};
pub use table::BlockTable;
use table::GroupBlocks;
pub use tier::{BlockBytes, BlockLoad, LowerTier};

/// Index of a physical KV block.
pub type BlockId = u32;

/// Not enough free blocks for the request; nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("out of KV blocks: {needed} needed, {free} free")]
pub struct OutOfBlocks {
    /// Fresh blocks the operation needed (in the group that ran short).
    pub needed: usize,
    /// Fresh blocks that could be had.
    pub free: usize,
}

/// Blocks already holding a computed prefix of a sequence, to be shared instead of recomputed.
#[derive(Debug, Clone, Copy)]
pub struct SharedPrefix<'a> {
    /// A live table (a sibling choice) whose first `num_blocks` blocks are computed.
    pub table: &'a BlockTable,
    /// How many leading blocks to share.
    pub num_blocks: usize,
}

/// A block of the prefix cache, as [`BlockManager::cached_block`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedBlock {
    /// The block in its group's pool.
    pub block: BlockId,
    /// The key of the block before it in its chain (the chain's root for a first block).
    pub parent: BlockHash,
    /// Its tokens.
    pub tokens: Vec<u32>,
}

/// One KV group: its pool and its rules.
#[derive(Debug)]
struct Group {
    pool: Rc<RefCell<BlockPool>>,
    policy: Box<dyn GroupPolicy>,
}

/// Owner of the block pools.
#[derive(Debug)]
pub struct BlockManager {
    block_size: usize,
    groups: Vec<Group>,
    events: EventSink,
    /// Where blocks the pools miss may still be found (a disk directory), if anywhere.
    lower: Option<Box<dyn LowerTier>>,
    /// Blocks read from the lower tier into the pools, to copy into the KV cache before the
    /// next forward pass.
    loads: Vec<BlockLoad>,
}

impl BlockManager {
    /// One full-attention pool of `num_blocks` blocks of `block_size` tokens each.
    pub fn new(num_blocks: usize, block_size: usize, enable_prefix_caching: bool) -> Self {
        Self::for_pools(
            &KvPools::full(num_blocks),
            block_size,
            enable_prefix_caching,
        )
    }

    /// One pool per group of `pools` (the KV spec the executor exposes), in the same order.
    pub fn for_pools(pools: &KvPools, block_size: usize, enable_prefix_caching: bool) -> Self {
        assert!(block_size > 0, "block size must be positive");
        assert_eq!(
            pools.groups[FULL_GROUP].span,
            KvSpan::Full,
            "group 0 is full"
        );
        let events = EventSink::default();
        let groups = (pools.groups.iter().enumerate())
            .map(|(g, pool)| {
                let (n, cache) = (pool.num_blocks, enable_prefix_caching);
                let blocks = BlockPool::new(g, n, block_size, cache, events.clone());
                Group {
                    pool: Rc::new(RefCell::new(blocks)),
                    policy: policy_for(pool.span),
                }
            })
            .collect();
        BlockManager {
            block_size,
            groups,
            events,
            lower: None,
            loads: Vec::new(),
        }
    }

    /// Looks blocks the pools miss up in `tier` from now on (with prefix caching on).
    pub fn set_lower_tier(&mut self, tier: Box<dyn LowerTier>) {
        self.lower = Some(tier);
    }

    /// The blocks read from the lower tier since the last call: the caller copies each into
    /// the KV cache before the next forward pass reads it.
    pub fn take_loads(&mut self) -> Vec<BlockLoad> {
        std::mem::take(&mut self.loads)
    }

    /// Group `group`'s block holding the cached content keyed `key`, with that content's
    /// parent key and tokens (what a lower tier stores beside the block's bytes).
    pub fn cached_block(&self, group: usize, key: BlockHash) -> Option<CachedBlock> {
        let pool = self.groups.get(group)?.pool.borrow();
        let &block = pool.cache.get(&key)?;
        let content = pool.blocks[block as usize].cached.as_ref()?;
        Some(CachedBlock {
            block,
            parent: content.parent,
            tokens: content.tokens.clone(),
        })
    }

    /// (blocks, free blocks) of group `group`'s pool.
    pub fn group_blocks(&self, group: usize) -> (usize, usize) {
        let pool = self.groups[group].pool.borrow();
        (pool.blocks.len(), pool.num_free)
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks in the full group's pool (they bound the context a sequence can reach).
    pub fn num_blocks(&self) -> usize {
        self.group_blocks(FULL_GROUP).0
    }

    /// Full-group blocks with a zero count (including cached ones that may still be reused).
    pub fn num_free_blocks(&self) -> usize {
        self.group_blocks(FULL_GROUP).1
    }

    /// Full-group blocks referenced by at least one table.
    pub fn num_used_blocks(&self) -> usize {
        self.num_blocks() - self.num_free_blocks()
    }

    fn full_pool(&self) -> std::cell::Ref<'_, BlockPool> {
        self.groups[FULL_GROUP].pool.borrow()
    }

    /// Checks every group has the fresh blocks `needed(group)` asks for, besides those the
    /// reused blocks read from the lower tier take (reused pool blocks on a free list are not
    /// available twice).
    fn check_room(
        &self,
        reused: Option<&Reuse>,
        needed: impl Fn(usize) -> usize,
    ) -> Result<(), OutOfBlocks> {
        for (g, group) in self.groups.iter().enumerate() {
            let pool = group.pool.borrow();
            let sources = reused.map_or(&[][..], |r| &r.groups[g].1[..]);
            let (mut reused_free, mut lower) = (0, 0);
            for source in sources {
                match *source {
                    Source::Pool(b) => {
                        reused_free += usize::from(pool.blocks[b as usize].ref_count == 0)
                    }
                    Source::Lower { .. } => lower += 1,
                }
            }
            let (needed, free) = (needed(g) + lower, pool.num_free - reused_free);
            if needed > free {
                return Err(OutOfBlocks { needed, free });
            }
        }
        Ok(())
    }

    /// Fresh blocks each group needs for a new table covering `num_tokens` that reuses
    /// `reuse` (every group covers the reused prefix's logical blocks, held or released).
    fn fresh_for_new(&self, reuse: &Reuse, num_tokens: usize) -> usize {
        (num_tokens.div_ceil(self.block_size)).saturating_sub(reuse.num_blocks)
    }

    /// Leading tokens of `tokens` a new table would reuse (cache hit, lower-tier hit or
    /// sibling prefix). `keys` scope the prefix cache: blocks registered under one scope are
    /// never found under another (see [`BlockManager::allocate`]).
    pub fn num_reusable_tokens(
        &self,
        tokens: &[u32],
        shared: Option<SharedPrefix<'_>>,
        keys: impl Into<CacheKeys>,
    ) -> usize {
        self.reusable(tokens, shared, &keys.into(), &Default::default())
            .num_blocks
            * self.block_size
    }

    /// Whether [`BlockManager::allocate`] with the same arguments would succeed (unless a
    /// block the lower tier offers turns out unreadable).
    pub fn can_allocate(
        &self,
        tokens: &[u32],
        num_tokens: usize,
        shared: Option<SharedPrefix<'_>>,
        keys: impl Into<CacheKeys>,
    ) -> bool {
        let reuse = self.reusable(tokens, shared, &keys.into(), &Default::default());
        let needed = self.fresh_for_new(&reuse, num_tokens);
        self.check_room(Some(&reuse), |_| needed).is_ok()
    }

    /// A table for a sequence with `tokens`, covering at least its first `num_tokens` (the reused
    /// prefix plus what the coming step computes). Either everything is allocated or nothing is.
    /// Blocks found in the lower tier are read now; one that fails to read shortens the reused
    /// prefix to the blocks before it (see [`BlockTable::num_cached_tokens`]).
    ///
    /// `keys` are what the table's chain of block keys is computed under: its root is the
    /// scope's salt, so the prefix cache finds blocks only for a sequence with the same salt and
    /// callers with different salts (API keys) cannot learn from cache hits what the others
    /// sent; blocks holding an image's tokens are keyed by the image too ([`CacheKeys`]).
    pub fn allocate(
        &mut self,
        tokens: &[u32],
        num_tokens: usize,
        shared: Option<SharedPrefix<'_>>,
        keys: impl Into<CacheKeys>,
    ) -> Result<BlockTable, OutOfBlocks> {
        let keys = keys.into();
        let (reuse, mut read) = self.reusable_and_read(tokens, shared, &keys);
        let num_tokens = num_tokens.max(reuse.num_blocks * self.block_size);
        let needed = self.fresh_for_new(&reuse, num_tokens);
        self.check_room(Some(&reuse), |_| needed)?;
        let Reuse { num_blocks, groups } = reuse;
        let mut num_lower_blocks = 0;
        let groups: Vec<GroupBlocks> = (self.groups.iter().enumerate().zip(groups))
            .map(|((g, group), (first_held, sources))| {
                let mut pool = group.pool.borrow_mut();
                // Pool blocks first, so taking fresh blocks for the lower tier's cannot evict
                // one of them.
                for source in &sources {
                    if let Source::Pool(b) = *source {
                        pool.acquire(b);
                    }
                }
                let mut reused = Vec::with_capacity(sources.len());
                for (i, source) in (first_held..).zip(sources) {
                    let b = match source {
                        Source::Pool(b) => b,
                        Source::Lower { key, parent } => {
                            let chunk = &tokens[i * self.block_size..(i + 1) * self.block_size];
                            let b = pool.take_fresh();
                            if pool.store(b, key, parent, chunk) {
                                let first = (i > 0).then_some(parent);
                                pool.report_stored(vec![key], first, chunk.to_vec());
                            }
                            let bytes = read.remove(&(g, key)).expect("read before allocating");
                            self.loads.push(BlockLoad {
                                group: g,
                                block: b,
                                bytes,
                            });
                            num_lower_blocks += usize::from(g == FULL_GROUP);
                            b
                        }
                    };
                    reused.push(b);
                }
                drop(pool);
                let mut blocks = GroupBlocks::new(Rc::clone(&group.pool), first_held, reused);
                blocks.grow(num_tokens, self.block_size);
                blocks
            })
            .collect();
        // A sibling's blocks may not all be registered yet: the chain continues after the
        // last one that is (the full group holds every block of the prefix).
        let last = groups[FULL_GROUP].blocks[..num_blocks].last().copied();
        let registered = last.and_then(|b| self.full_pool().blocks[b as usize].cached.clone());
        let (num_registered, last_key) = match registered {
            Some(content) => (num_blocks, content.key),
            None => (0, keys.root()),
        };
        Ok(BlockTable {
            keys,
            groups,
            num_registered,
            last_key,
            num_cached_tokens: num_blocks * self.block_size,
            num_lower_tokens: num_lower_blocks * self.block_size,
        })
    }

    /// Whether `table` can grow to cover `num_tokens`.
    pub fn can_append(&self, table: &BlockTable, num_tokens: usize) -> bool {
        let needed = |g: usize| table.groups[g].needed(num_tokens, self.block_size);
        self.check_room(None, needed).is_ok()
    }

    /// Grows `table` to cover `num_tokens`; on failure nothing changes.
    pub fn append(&mut self, table: &mut BlockTable, num_tokens: usize) -> Result<(), OutOfBlocks> {
        let needed = |g: usize| table.groups[g].needed(num_tokens, self.block_size);
        self.check_room(None, needed)?;
        for blocks in &mut table.groups {
            blocks.grow(num_tokens, self.block_size);
        }
        Ok(())
    }

    /// Shrinks `table` to the blocks covering its first `num_tokens` positions, giving back the
    /// rest (blocks a step took for draft tokens it rejected). Blocks past the computed tokens
    /// are never registered, so this loses nothing cached.
    pub fn truncate(&mut self, table: &mut BlockTable, num_tokens: usize) {
        let keep = num_tokens.div_ceil(self.block_size);
        debug_assert!(keep >= table.num_registered, "registered blocks stay");
        for blocks in &mut table.groups {
            blocks.truncate(keep);
        }
    }

    /// Registers the blocks of `table` that `num_computed` computed `tokens` have filled, in
    /// every group that still holds them, so later sequences can reuse them (a block whose
    /// content is already cached elsewhere stays private); then gives back every group's blocks
    /// that no later token reads (cached ones stay findable until their block is reused).
    pub fn register_computed(
        &mut self,
        table: &mut BlockTable,
        tokens: &[u32],
        num_computed: usize,
    ) {
        let bs = self.block_size;
        if self.full_pool().prefix_caching {
            // The chain keys of the blocks filled since the last call: (index, parent, key).
            let full = (num_computed / bs).min(table.block_ids().len());
            let mut filled = Vec::new();
            while table.num_registered < full {
                let i = table.num_registered;
                let parent = table.last_key;
                let key = (table.keys).child(parent, i, bs, &tokens[i * bs..(i + 1) * bs]);
                filled.push((i, parent, key));
                table.last_key = key;
                table.num_registered += 1;
            }
            for (group, blocks) in self.groups.iter().zip(&table.groups) {
                let mut pool = group.pool.borrow_mut();
                // A run of consecutive blocks stored, reported as one event.
                let mut run: (Vec<BlockHash>, Option<BlockHash>, Vec<u32>) = Default::default();
                for &(i, parent, key) in &filled {
                    let chunk = &tokens[i * bs..(i + 1) * bs];
                    let b = blocks.blocks[i];
                    if b != RELEASED_BLOCK && pool.store(b, key, parent, chunk) {
                        if run.0.is_empty() {
                            run.1 = (i > 0).then_some(parent);
                        }
                        run.0.push(key);
                        run.2.extend_from_slice(chunk);
                    } else {
                        let (hashes, parent, tokens) = std::mem::take(&mut run);
                        pool.report_stored(hashes, parent, tokens);
                    }
                }
                let (hashes, parent, tokens) = run;
                pool.report_stored(hashes, parent, tokens);
            }
        }
        for (group, blocks) in self.groups.iter().zip(&mut table.groups) {
            blocks.release_front(group.policy.releasable(num_computed, bs));
        }
    }

    /// Forgets every cached block (a [`KvEvent::AllCleared`]) when no block is referenced;
    /// returns whether it did (nothing changes while a sequence holds blocks).
    pub fn clear_prefix_cache(&mut self) -> bool {
        let idle = (self.groups.iter()).all(|g| {
            let pool = g.pool.borrow();
            pool.num_free == pool.blocks.len()
        });
        if !idle {
            return false;
        }
        for group in &self.groups {
            group.pool.borrow_mut().forget_cached();
        }
        self.events.push(KvEvent::AllCleared);
        true
    }

    /// The cache changes since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<KvEvent> {
        self.events.drain()
    }

    /// Reference count of a full-group block (for tests and invariants).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.full_pool().blocks[block as usize].ref_count
    }
}

#[cfg(test)]
mod tests;
