//! The KV block pool: ref-counted blocks, ownership-based release and automatic prefix caching.
//!
//! A sequence's blocks live in a [`BlockTable`]; dropping the table returns them, so a block cannot
//! be forgotten. A full, computed block gets a key `hash(parent key, its tokens)`; a later sequence
//! whose tokens hash to the same chain reuses it (after comparing the stored tokens). Blocks whose
//! count drops to zero go on one free list: unkeyed blocks at the front (reused first), keyed ones
//! at the back, so cached content is evicted in least-recently-freed order and only when a fresh
//! block is needed. A block with a non-zero count is never on the free list, so it is never evicted.
//!
//! A model with sliding-window layers has a second pool for them ([`window`]): every table then
//! also holds window blocks, released as the window moves on, and nothing is shared or cached.

mod pool;
mod window;

use std::cell::RefCell;
use std::rc::Rc;

use thiserror::Error;

use pool::{block_key, BlockPool, CachedContent};
pub use window::WindowBlocks;
use window::WindowPool;

/// Index of a physical KV block.
pub type BlockId = u32;

/// Not enough free blocks for the request; nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("out of KV blocks: {needed} needed, {free} free")]
pub struct OutOfBlocks {
    /// Fresh blocks the operation needed.
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

/// The blocks of one sequence, in logical order. Dropping it releases them.
#[derive(Debug)]
pub struct BlockTable {
    pool: Rc<RefCell<BlockPool>>,
    blocks: Vec<BlockId>,
    /// Leading blocks whose content was registered (or found) in the prefix cache.
    num_registered: usize,
    /// Key of the last registered block, the parent of the next one (the salt before the
    /// first).
    last_key: Option<u64>,
    /// Tokens reused from other sequences when this table was allocated.
    num_cached_tokens: usize,
    /// The window pool's blocks, for a model with sliding-window layers.
    window: Option<WindowBlocks>,
}

impl BlockTable {
    /// Physical block ids in logical order.
    pub fn block_ids(&self) -> &[BlockId] {
        &self.blocks
    }

    /// Leading tokens that were already computed when the table was allocated (cache hit or shared
    /// with a sibling); the sequence starts computing after them.
    pub fn num_cached_tokens(&self) -> usize {
        self.num_cached_tokens
    }

    /// The window pool's blocks, for a model with sliding-window layers.
    pub fn window(&self) -> Option<&WindowBlocks> {
        self.window.as_ref()
    }
}

impl Drop for BlockTable {
    fn drop(&mut self) {
        // (`window` releases its own blocks when dropped with the table.)
        let mut pool = self.pool.borrow_mut();
        // Last blocks first, so a sequence's tail is evicted before its (more shareable) head.
        for &b in self.blocks.iter().rev() {
            pool.release(b);
        }
    }
}

/// Owner of the block pool.
#[derive(Debug)]
pub struct BlockManager {
    pool: Rc<RefCell<BlockPool>>,
    window: Option<WindowPool>,
}

impl BlockManager {
    /// A pool of `num_blocks` blocks of `block_size` tokens each.
    pub fn new(num_blocks: usize, block_size: usize, enable_prefix_caching: bool) -> Self {
        assert!(block_size > 0, "block size must be positive");
        let pool = BlockPool::new(num_blocks, block_size, enable_prefix_caching);
        BlockManager {
            pool: Rc::new(RefCell::new(pool)),
            window: None,
        }
    }

    /// Adds a window pool of `num_blocks` blocks for layers that read the last `window`
    /// positions. Blocks are then neither shared nor cached (a hit in the full pool would
    /// come without the window layers' keys and values).
    pub fn with_window(mut self, window: usize, num_blocks: usize) -> Self {
        self.pool.borrow_mut().prefix_caching = false;
        let block_size = self.block_size();
        self.window = Some(WindowPool::new(window, num_blocks, block_size));
        self
    }

    /// Whether a new table may start from blocks another sequence computed (a cached prefix
    /// or a sibling choice's prompt).
    pub fn shares_prefixes(&self) -> bool {
        self.window.is_none()
    }

    /// (blocks, free blocks) of the window pool, for a model with sliding-window layers.
    pub fn window_blocks(&self) -> Option<(usize, usize)> {
        (self.window.as_ref()).map(|w| (w.num_blocks(), w.num_free()))
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.pool.borrow().block_size
    }

    /// Blocks in the pool.
    pub fn num_blocks(&self) -> usize {
        self.pool.borrow().blocks.len()
    }

    /// Blocks with a zero count (including cached ones that may still be reused).
    pub fn num_free_blocks(&self) -> usize {
        self.pool.borrow().num_free
    }

    /// Blocks referenced by at least one table.
    pub fn num_used_blocks(&self) -> usize {
        self.num_blocks() - self.num_free_blocks()
    }

    fn blocks_for(&self, num_tokens: usize) -> usize {
        num_tokens.div_ceil(self.block_size())
    }

    /// The blocks a new table for `tokens` starts with: the longest prefix-cache hit or the shared
    /// sibling prefix, whichever is longer. The last token is never reused (its logits are needed).
    fn reusable(
        &self,
        tokens: &[u32],
        shared: Option<SharedPrefix<'_>>,
        salt: Option<u64>,
    ) -> Vec<BlockId> {
        if !self.shares_prefixes() {
            return Vec::new();
        }
        let pool = self.pool.borrow();
        let limit = tokens.len().saturating_sub(1) / pool.block_size;
        let mut reuse = pool.cached_prefix(&tokens[..limit * pool.block_size], salt);
        if let Some(s) = shared {
            let n = s.num_blocks.min(limit).min(s.table.blocks.len());
            if n > reuse.len() {
                reuse = s.table.blocks[..n].to_vec();
            }
        }
        reuse
    }

    /// Fresh blocks needed to start a table covering `num_tokens` after reusing `reuse`, and the
    /// free blocks that remain usable (reused blocks on the free list are not available twice).
    fn fresh_needed(&self, reuse: &[BlockId], num_tokens: usize) -> (usize, usize) {
        let pool = self.pool.borrow();
        let needed = self.blocks_for(num_tokens).saturating_sub(reuse.len());
        let reused_free = reuse
            .iter()
            .filter(|&&b| pool.blocks[b as usize].ref_count == 0)
            .count();
        (needed, pool.num_free - reused_free)
    }

    /// Leading tokens of `tokens` a new table would reuse (cache hit or sibling prefix).
    /// `salt` scopes the prefix cache: blocks registered under one salt are never found under
    /// another (see [`BlockManager::allocate`]).
    pub fn num_reusable_tokens(
        &self,
        tokens: &[u32],
        shared: Option<SharedPrefix<'_>>,
        salt: Option<u64>,
    ) -> usize {
        self.reusable(tokens, shared, salt).len() * self.block_size()
    }

    /// Whether [`BlockManager::allocate`] with the same arguments would succeed.
    pub fn can_allocate(
        &self,
        tokens: &[u32],
        num_tokens: usize,
        shared: Option<SharedPrefix<'_>>,
        salt: Option<u64>,
    ) -> bool {
        let reuse = self.reusable(tokens, shared, salt);
        let (needed, free) = self.fresh_needed(&reuse, num_tokens);
        needed <= free && self.window_room(self.window_needed_new(num_tokens)).is_ok()
    }

    /// `Err` when the window pool (if any) has fewer than `needed` free blocks.
    fn window_room(&self, needed: usize) -> Result<(), OutOfBlocks> {
        match &self.window {
            Some(pool) if needed > pool.num_free() => Err(OutOfBlocks {
                needed,
                free: pool.num_free(),
            }),
            _ => Ok(()),
        }
    }

    /// Window blocks a new table covering `num_tokens` takes.
    fn window_needed_new(&self, num_tokens: usize) -> usize {
        (self.window.as_ref()).map_or(0, |w| w.needed_from_start(num_tokens))
    }

    /// A table for a sequence with `tokens`, covering at least its first `num_tokens` (the reused
    /// prefix plus what the coming step computes). Either everything is allocated or nothing is.
    ///
    /// `salt` is the root of the table's chain of block keys: the prefix cache finds blocks
    /// only for a sequence with the same salt, so callers with different salts (API keys)
    /// cannot learn from cache hits what the others sent.
    pub fn allocate(
        &mut self,
        tokens: &[u32],
        num_tokens: usize,
        shared: Option<SharedPrefix<'_>>,
        salt: Option<u64>,
    ) -> Result<BlockTable, OutOfBlocks> {
        let reuse = self.reusable(tokens, shared, salt);
        let (needed, free) = self.fresh_needed(&reuse, num_tokens);
        if needed > free {
            return Err(OutOfBlocks { needed, free });
        }
        self.window_room(self.window_needed_new(num_tokens))?;
        let window = self.window.as_ref().map(|w| w.allocate(num_tokens));
        let mut pool = self.pool.borrow_mut();
        let block_size = pool.block_size;
        for &b in &reuse {
            pool.acquire(b);
        }
        let registered = reuse
            .last()
            .and_then(|&b| pool.blocks[b as usize].cached.as_ref().map(|c| c.key));
        let num_registered = if registered.is_some() { reuse.len() } else { 0 };
        let registered = registered.or(salt);
        let num_cached_tokens = reuse.len() * block_size;
        let mut blocks = reuse;
        for _ in 0..needed {
            blocks.push(pool.take_fresh());
        }
        drop(pool);
        Ok(BlockTable {
            pool: Rc::clone(&self.pool),
            blocks,
            num_registered,
            last_key: registered,
            num_cached_tokens,
            window,
        })
    }

    /// Whether `table` can grow to cover `num_tokens`.
    pub fn can_append(&self, table: &BlockTable, num_tokens: usize) -> bool {
        let needed = self
            .blocks_for(num_tokens)
            .saturating_sub(table.blocks.len());
        needed <= self.num_free_blocks()
            && (self.window_room(Self::window_needed_append(table, num_tokens))).is_ok()
    }

    /// Window blocks `table` takes to grow to `num_tokens`.
    fn window_needed_append(table: &BlockTable, num_tokens: usize) -> usize {
        (table.window.as_ref()).map_or(0, |w| w.needed(num_tokens))
    }

    /// Grows `table` to cover `num_tokens`; on failure nothing changes.
    pub fn append(&mut self, table: &mut BlockTable, num_tokens: usize) -> Result<(), OutOfBlocks> {
        let needed = self
            .blocks_for(num_tokens)
            .saturating_sub(table.blocks.len());
        self.window_room(Self::window_needed_append(table, num_tokens))?;
        let mut pool = self.pool.borrow_mut();
        if needed > pool.num_free {
            return Err(OutOfBlocks {
                needed,
                free: pool.num_free,
            });
        }
        for _ in 0..needed {
            table.blocks.push(pool.take_fresh());
        }
        if let Some(window) = table.window.as_mut() {
            window.grow(num_tokens);
        }
        Ok(())
    }

    /// Registers the blocks of `table` that `num_computed` computed `tokens` have filled, so later
    /// sequences can reuse them. A block whose content is already cached elsewhere stays private.
    /// Window blocks the next token no longer reaches go back to the window pool.
    pub fn register_computed(
        &mut self,
        table: &mut BlockTable,
        tokens: &[u32],
        num_computed: usize,
    ) {
        if let Some(window) = table.window.as_mut() {
            window.release_behind(num_computed);
        }
        let mut pool = self.pool.borrow_mut();
        let block_size = pool.block_size;
        let full = (num_computed / block_size).min(table.blocks.len());
        while table.num_registered < full {
            let i = table.num_registered;
            let chunk = &tokens[i * block_size..(i + 1) * block_size];
            let key = block_key(table.last_key, chunk);
            if pool.prefix_caching {
                let b = table.blocks[i];
                if !pool.cache.contains_key(&key) && pool.blocks[b as usize].cached.is_none() {
                    pool.cache.insert(key, b);
                    pool.blocks[b as usize].cached = Some(CachedContent {
                        key,
                        parent: table.last_key,
                        tokens: chunk.to_vec(),
                    });
                }
            }
            table.last_key = Some(key);
            table.num_registered += 1;
        }
    }

    /// Reference count of a block (for tests and invariants).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.pool.borrow().blocks[block as usize].ref_count
    }
}

#[cfg(test)]
mod tests;
