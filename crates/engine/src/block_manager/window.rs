//! The window pool: blocks of a model's sliding-window layers (see `sluice_model::kv_layout`).
//!
//! A sequence's window blocks cover the same logical positions as its full blocks, but once
//! every position a later token can read lies past a block (a token sees its own position and
//! the `window - 1` before it), the block goes back to the pool. A sequence therefore holds about
//! `window / block_size + 1` window blocks however long it grows. Nothing in this pool is shared
//! or cached: a cache hit in the full pool would find no window blocks to go with it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use sluice_model::kv_layout::blocks_behind;
use sluice_model::RELEASED_BLOCK;

use super::pool::BlockPool;
use super::BlockId;

/// The shared window pool behind the [`WindowBlocks`] of every table.
#[derive(Debug)]
pub(super) struct WindowPool {
    pool: Rc<RefCell<BlockPool>>,
    window: usize,
}

impl WindowPool {
    pub(super) fn new(window: usize, num_blocks: usize, block_size: usize) -> Self {
        assert!(window > 0, "a window of no positions");
        WindowPool {
            pool: Rc::new(RefCell::new(BlockPool::new(num_blocks, block_size, false))),
            window,
        }
    }

    pub(super) fn num_blocks(&self) -> usize {
        self.pool.borrow().blocks.len()
    }

    pub(super) fn num_free(&self) -> usize {
        self.pool.borrow().num_free
    }

    /// Blocks a new table needs to cover its first `num_tokens` positions.
    pub(super) fn needed_from_start(&self, num_tokens: usize) -> usize {
        num_tokens.div_ceil(self.pool.borrow().block_size)
    }

    /// A table holding the blocks for the first `num_tokens` positions (the caller checked
    /// they are free).
    pub(super) fn allocate(&self, num_tokens: usize) -> WindowBlocks {
        let mut table = WindowBlocks {
            pool: Rc::clone(&self.pool),
            window: self.window,
            released: 0,
            blocks: VecDeque::new(),
        };
        table.grow(num_tokens);
        table
    }
}

/// One sequence's window blocks: logical blocks `released..` are held, the ones before were
/// released. Dropping it releases the rest.
#[derive(Debug)]
pub struct WindowBlocks {
    pool: Rc<RefCell<BlockPool>>,
    window: usize,
    /// Leading logical blocks already given back.
    released: usize,
    blocks: VecDeque<BlockId>,
}

impl WindowBlocks {
    fn block_size(&self) -> usize {
        self.pool.borrow().block_size
    }

    /// Fresh blocks needed to cover `num_tokens` positions.
    pub(super) fn needed(&self, num_tokens: usize) -> usize {
        let covered = self.released + self.blocks.len();
        num_tokens
            .div_ceil(self.block_size())
            .saturating_sub(covered)
    }

    /// Takes the blocks to cover `num_tokens` positions (the caller checked they are free).
    pub(super) fn grow(&mut self, num_tokens: usize) {
        let needed = self.needed(num_tokens);
        let mut pool = self.pool.borrow_mut();
        for _ in 0..needed {
            self.blocks.push_back(pool.take_fresh());
        }
    }

    /// Gives back the blocks no token after the first `num_computed` will read.
    pub(super) fn release_behind(&mut self, num_computed: usize) {
        // The next token is at position `num_computed`.
        let unreachable = blocks_behind(num_computed, self.window, self.block_size());
        let mut pool = self.pool.borrow_mut();
        while self.released < unreachable {
            let Some(b) = self.blocks.pop_front() else {
                break;
            };
            pool.release(b);
            self.released += 1;
        }
    }

    /// Blocks held now.
    pub fn num_held(&self) -> usize {
        self.blocks.len()
    }

    /// The logical table: [`RELEASED_BLOCK`] for the released blocks, then the held ones.
    pub fn table(&self) -> Vec<u32> {
        let mut table = vec![RELEASED_BLOCK; self.released];
        table.extend(self.blocks.iter().copied());
        table
    }
}

impl Drop for WindowBlocks {
    fn drop(&mut self) {
        let mut pool = self.pool.borrow_mut();
        for &b in self.blocks.iter().rev() {
            pool.release(b);
        }
    }
}
