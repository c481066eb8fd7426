//! Finding what a new table can reuse: the blocks of the prefix cache (the pools, then the lower
//! tier) along the chain of a sequence's block keys, and a sibling choice's live blocks.

use std::collections::{HashMap, HashSet};

use sluice_model::{FULL_GROUP, RELEASED_BLOCK};

use super::reuse::{longest, Reuse, Source};
use super::table::GroupBlocks;
use super::tier::BlockBytes;
use super::{BlockHash, BlockManager, CacheKeys, SharedPrefix};

/// Lower-tier blocks that failed to read during one allocation: `(group, key)`.
pub(super) type Unreadable = HashSet<(usize, BlockHash)>;

impl BlockManager {
    /// The blocks a new table for `tokens` starts with: the longest prefix-cache hit or the
    /// shared sibling prefix, whichever is longer, that every group can serve. The last token
    /// is never reused (its logits are needed). Lower-tier blocks in `unreadable` count as
    /// absent.
    pub(super) fn reusable(
        &self,
        tokens: &[u32],
        shared: Option<SharedPrefix<'_>>,
        keys: &CacheKeys,
        unreadable: &Unreadable,
    ) -> Reuse {
        let limit = tokens.len().saturating_sub(1) / self.block_size;
        let span = |g: usize, n: usize| self.groups[g].policy.hit_span(n, self.block_size);
        let cached = self.cached(&tokens[..limit * self.block_size], keys, unreadable);
        let mut best = longest(&cached, span);
        if let Some(s) = shared {
            let n = s.num_blocks.min(limit).min(s.table.block_ids().len());
            let held = |blocks: &GroupBlocks| -> Vec<Option<Source>> {
                (blocks.blocks[..n].iter())
                    .map(|&b| (b != RELEASED_BLOCK).then_some(Source::Pool(b)))
                    .collect()
            };
            let present: Vec<_> = s.table.groups.iter().map(held).collect();
            let sibling = longest(&present, span);
            if sibling.num_blocks > best.num_blocks {
                best = sibling;
            }
        }
        best
    }

    /// Per group, where the block at each logical index of the full blocks of `tokens` (the
    /// chain of `keys`) can be had: its pool, else the lower tier; as far as the full
    /// group's run of hits goes.
    fn cached(
        &self,
        tokens: &[u32],
        keys: &CacheKeys,
        unreadable: &Unreadable,
    ) -> Vec<Vec<Option<Source>>> {
        let mut present = vec![Vec::new(); self.groups.len()];
        if !self.full_pool().prefix_caching {
            return present;
        }
        let lower = |g: usize, key: BlockHash, parent: BlockHash| {
            let tier = self.lower.as_ref()?;
            (!unreadable.contains(&(g, key)) && tier.contains(g, key))
                .then_some(Source::Lower { key, parent })
        };
        let mut parent = keys.root();
        for (i, chunk) in tokens.chunks_exact(self.block_size).enumerate() {
            let key = keys.child(parent, i, self.block_size, chunk);
            for (g, group) in self.groups.iter().enumerate() {
                let found = group.pool.borrow().find(key, parent, chunk);
                let source = found.map(Source::Pool).or_else(|| lower(g, key, parent));
                if g == FULL_GROUP && source.is_none() {
                    return present;
                }
                present[g].push(source);
            }
            parent = key;
        }
        present
    }

    /// What a new table reuses, with the bytes of every lower-tier block in it read and
    /// checked: a block that fails to read counts as absent and the prefix is found again
    /// (each round forgets at least one block, so this ends).
    pub(super) fn reusable_and_read(
        &self,
        tokens: &[u32],
        shared: Option<SharedPrefix<'_>>,
        keys: &CacheKeys,
    ) -> (Reuse, HashMap<(usize, BlockHash), BlockBytes>) {
        let mut unreadable = Unreadable::new();
        'find: loop {
            let reuse = self.reusable(tokens, shared, keys, &unreadable);
            let mut read = HashMap::new();
            for (g, (first_held, sources)) in reuse.groups.iter().enumerate() {
                for (i, source) in (*first_held..).zip(sources) {
                    let Source::Lower { key, parent } = *source else {
                        continue;
                    };
                    let tier = self.lower.as_ref().expect("a lower source has a tier");
                    let chunk = &tokens[i * self.block_size..(i + 1) * self.block_size];
                    match tier.read(g, key, parent, chunk) {
                        Some(bytes) => {
                            read.insert((g, key), bytes);
                        }
                        None => {
                            unreadable.insert((g, key));
                            continue 'find;
                        }
                    }
                }
            }
            return (reuse, read);
        }
    }
}
