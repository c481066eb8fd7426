//! One KV group's block pool: reference counts, the free list (unkeyed blocks at the front,
//! cached ones at the back) and the prefix cache's key -> block map.

use std::collections::HashMap;

use sluice_model::KvGroupId;

use super::block_hash::BlockHash;
use super::events::{EventSink, KvEvent};
use super::BlockId;

/// Content identity of a full block, stored to verify a hash hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CachedContent {
    pub(super) key: BlockHash,
    pub(super) parent: BlockHash,
    pub(super) tokens: Vec<u32>,
}

#[derive(Debug, Default)]
pub(super) struct BlockMeta {
    pub(super) ref_count: u32,
    pub(super) cached: Option<CachedContent>,
    pub(super) prev: Option<BlockId>,
    pub(super) next: Option<BlockId>,
}

/// One group's pool, shared by the [`super::BlockManager`] and every [`super::BlockTable`].
#[derive(Debug)]
pub(super) struct BlockPool {
    pub(super) group: KvGroupId,
    pub(super) block_size: usize,
    pub(super) blocks: Vec<BlockMeta>,
    pub(super) free_head: Option<BlockId>,
    pub(super) free_tail: Option<BlockId>,
    pub(super) num_free: usize,
    /// Key of a full computed block -> the block holding it.
    pub(super) cache: HashMap<BlockHash, BlockId>,
    pub(super) prefix_caching: bool,
    events: EventSink,
}

impl BlockPool {
    pub(super) fn new(
        group: KvGroupId,
        num_blocks: usize,
        block_size: usize,
        prefix_caching: bool,
        events: EventSink,
    ) -> Self {
        let mut pool = BlockPool {
            group,
            block_size,
            blocks: (0..num_blocks).map(|_| BlockMeta::default()).collect(),
            free_head: None,
            free_tail: None,
            num_free: 0,
            cache: HashMap::new(),
            prefix_caching,
            events,
        };
        for b in 0..num_blocks {
            pool.push_back(b as BlockId);
        }
        pool
    }

    pub(super) fn unlink(&mut self, b: BlockId) {
        let (prev, next) = {
            let m = &mut self.blocks[b as usize];
            (m.prev.take(), m.next.take())
        };
        match prev {
            Some(p) => self.blocks[p as usize].next = next,
            None => self.free_head = next,
        }
        match next {
            Some(n) => self.blocks[n as usize].prev = prev,
            None => self.free_tail = prev,
        }
        self.num_free -= 1;
    }

    pub(super) fn push_back(&mut self, b: BlockId) {
        self.blocks[b as usize].prev = self.free_tail;
        match self.free_tail {
            Some(t) => self.blocks[t as usize].next = Some(b),
            None => self.free_head = Some(b),
        }
        self.free_tail = Some(b);
        self.num_free += 1;
    }

    pub(super) fn push_front(&mut self, b: BlockId) {
        self.blocks[b as usize].next = self.free_head;
        match self.free_head {
            Some(h) => self.blocks[h as usize].prev = Some(b),
            None => self.free_tail = Some(b),
        }
        self.free_head = Some(b);
        self.num_free += 1;
    }

    /// Takes a reference on `b`, removing it from the free list if it was there.
    pub(super) fn acquire(&mut self, b: BlockId) {
        if self.blocks[b as usize].ref_count == 0 {
            self.unlink(b);
        }
        self.blocks[b as usize].ref_count += 1;
    }

    /// Takes the least valuable free block, evicting whatever it cached.
    pub(super) fn take_fresh(&mut self) -> BlockId {
        let b = self.free_head.expect("caller checked the free count");
        self.unlink(b);
        if let Some(content) = self.blocks[b as usize].cached.take() {
            if self.cache.get(&content.key) == Some(&b) {
                self.cache.remove(&content.key);
                self.events.push(KvEvent::Removed {
                    group: self.group,
                    block_hashes: vec![content.key],
                });
            }
        }
        self.blocks[b as usize].ref_count = 1;
        b
    }

    pub(super) fn release(&mut self, b: BlockId) {
        let m = &mut self.blocks[b as usize];
        m.ref_count -= 1;
        if m.ref_count == 0 {
            if m.cached.is_some() {
                self.push_back(b);
            } else {
                self.push_front(b);
            }
        }
    }

    /// The block holding the content keyed `key` (the block after `parent`'s, holding
    /// `tokens`), after comparing the stored parent and tokens.
    pub(super) fn find(
        &self,
        key: BlockHash,
        parent: BlockHash,
        tokens: &[u32],
    ) -> Option<BlockId> {
        if !self.prefix_caching {
            return None;
        }
        let b = *self.cache.get(&key)?;
        let content = self.blocks[b as usize].cached.as_ref()?;
        (content.key == key && content.parent == parent && content.tokens == tokens).then_some(b)
    }

    /// Makes block `b` (holding `tokens`, the block after `parent`'s) findable under `key`,
    /// unless that content is cached already (another copy stays private). Returns whether it
    /// was stored.
    pub(super) fn store(
        &mut self,
        b: BlockId,
        key: BlockHash,
        parent: BlockHash,
        tokens: &[u32],
    ) -> bool {
        if self.cache.contains_key(&key) || self.blocks[b as usize].cached.is_some() {
            return false;
        }
        self.cache.insert(key, b);
        self.blocks[b as usize].cached = Some(CachedContent {
            key,
            parent,
            tokens: tokens.to_vec(),
        });
        true
    }

    /// Appends a [`KvEvent::Stored`] for consecutive blocks of one chain.
    pub(super) fn report_stored(
        &self,
        hashes: Vec<BlockHash>,
        parent: Option<BlockHash>,
        tokens: Vec<u32>,
    ) {
        if hashes.is_empty() {
            return;
        }
        self.events.push(KvEvent::Stored {
            group: self.group,
            block_hashes: hashes,
            parent,
            token_ids: tokens,
            block_size: self.block_size,
        });
    }

    /// Forgets every cached block's content; the caller checked that no block is referenced.
    pub(super) fn forget_cached(&mut self) {
        for meta in &mut self.blocks {
            meta.cached = None;
        }
        self.cache.clear();
    }
}
