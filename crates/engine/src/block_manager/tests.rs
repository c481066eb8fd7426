use super::*;
use proptest::prelude::*;
use sluice_model::KvPools;

fn tokens(n: usize, offset: u32) -> Vec<u32> {
    (0..n as u32).map(|t| t + offset).collect()
}

#[test]
fn dropping_a_table_returns_its_blocks() {
    let mut bm = BlockManager::new(4, 4, true);
    let t = bm.allocate(&tokens(10, 0), 10, None, None).unwrap();
    assert_eq!(t.block_ids().len(), 3);
    assert_eq!(bm.num_free_blocks(), 1);
    drop(t);
    assert_eq!(bm.num_free_blocks(), 4);
}

#[test]
fn allocation_that_does_not_fit_changes_nothing() {
    let mut bm = BlockManager::new(2, 4, true);
    assert!(!bm.can_allocate(&tokens(9, 0), 9, None, None));
    let err = bm.allocate(&tokens(9, 0), 9, None, None).unwrap_err();
    assert_eq!(err, OutOfBlocks { needed: 3, free: 2 });
    assert_eq!(bm.num_free_blocks(), 2);
}

#[test]
fn append_grows_the_table_only_at_block_boundaries() {
    let mut bm = BlockManager::new(3, 4, true);
    let mut t = bm.allocate(&tokens(4, 0), 4, None, None).unwrap();
    bm.append(&mut t, 4).unwrap();
    assert_eq!(t.block_ids().len(), 1);
    bm.append(&mut t, 5).unwrap();
    assert_eq!(t.block_ids().len(), 2);
    assert!(bm.can_append(&t, 12));
    assert!(!bm.can_append(&t, 13));
    assert!(bm.append(&mut t, 13).is_err());
    assert_eq!(t.block_ids().len(), 2);
}

#[test]
fn computed_full_blocks_are_reused_by_a_later_sequence_with_the_same_prefix() {
    let mut bm = BlockManager::new(8, 4, true);
    let prompt = tokens(10, 0);
    let mut first = bm.allocate(&prompt, 10, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 10);
    let first_blocks = first.block_ids().to_vec();
    drop(first);
    let second = bm.allocate(&prompt, 10, None, None).unwrap();
    assert_eq!(second.num_cached_tokens(), 8);
    assert_eq!(&second.block_ids()[..2], &first_blocks[..2]);
}

#[test]
fn cached_blocks_are_found_only_under_the_salt_they_were_computed_with() {
    let mut bm = BlockManager::new(16, 4, true);
    let prompt = tokens(10, 0);
    let mut first = bm.allocate(&prompt, 10, None, Some(7)).unwrap();
    bm.register_computed(&mut first, &prompt, 10);
    drop(first);
    // Another caller (another salt, or none) learns nothing: no hit, fresh blocks.
    assert_eq!(bm.num_reusable_tokens(&prompt, None, Some(8)), 0);
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 0);
    // The same caller hits, including blocks registered after a salted hit.
    let mut again = bm.allocate(&prompt, 10, None, Some(7)).unwrap();
    assert_eq!(again.num_cached_tokens(), 8);
    let longer = tokens(14, 0);
    bm.append(&mut again, 14).unwrap();
    bm.register_computed(&mut again, &longer, 14);
    drop(again);
    assert_eq!(bm.num_reusable_tokens(&longer, None, Some(7)), 12);
    assert_eq!(bm.num_reusable_tokens(&longer, None, Some(8)), 0);
}

#[test]
fn last_prompt_token_is_never_served_from_the_cache() {
    let mut bm = BlockManager::new(8, 4, true);
    let prompt = tokens(8, 0);
    let mut first = bm.allocate(&prompt, 8, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 8);
    let second = bm.allocate(&prompt, 8, None, None).unwrap();
    // Two full blocks are cached, but the second holds the last token: only one is reused.
    assert_eq!(second.num_cached_tokens(), 4);
    assert_eq!(bm.ref_count(first.block_ids()[0]), 2);
}

#[test]
fn different_tokens_miss_the_cache() {
    let mut bm = BlockManager::new(8, 4, true);
    let mut first = bm.allocate(&tokens(9, 0), 9, None, None).unwrap();
    bm.register_computed(&mut first, &tokens(9, 0), 9);
    let other = bm.allocate(&tokens(9, 100), 9, None, None).unwrap();
    assert_eq!(other.num_cached_tokens(), 0);
}

#[test]
fn a_hit_requires_the_whole_chain_of_parents() {
    let mut bm = BlockManager::new(8, 2, true);
    let a = vec![1, 2, 3, 4, 5];
    let mut first = bm.allocate(&a, 5, None, None).unwrap();
    bm.register_computed(&mut first, &a, 5);
    // Same second block, different first block: nothing is reused.
    let b = vec![9, 9, 3, 4, 5];
    assert_eq!(
        bm.allocate(&b, 5, None, None).unwrap().num_cached_tokens(),
        0
    );
}

#[test]
fn disabled_prefix_caching_never_reuses() {
    let mut bm = BlockManager::new(8, 4, false);
    let prompt = tokens(10, 0);
    let mut first = bm.allocate(&prompt, 10, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 10);
    drop(first);
    assert_eq!(
        bm.allocate(&prompt, 10, None, None)
            .unwrap()
            .num_cached_tokens(),
        0
    );
}

#[test]
fn cached_free_blocks_are_evicted_least_recently_freed_first_and_after_plain_ones() {
    let mut bm = BlockManager::new(4, 2, true);
    let a = vec![1, 2, 3];
    let b = vec![7, 8, 9];
    let mut ta = bm.allocate(&a, 3, None, None).unwrap(); // a keyed block and a partial one
    bm.register_computed(&mut ta, &a, 3);
    let mut tb = bm.allocate(&b, 2, None, None).unwrap(); // one keyed block
    bm.register_computed(&mut tb, &b, 2);
    drop(ta); // freed first: a's cached block is the least recently freed
    drop(tb);
    // Two fresh blocks: the plain ones are taken, both cached prefixes survive.
    let plain = bm.allocate(&[50, 51, 52], 3, None, None).unwrap();
    assert_eq!(bm.num_reusable_tokens(&a, None, None), 2);
    assert_eq!(bm.num_reusable_tokens(&b, None, None), 2);
    // One more evicts a's block before b's.
    let more = bm.allocate(&[60], 1, None, None).unwrap();
    assert_eq!(bm.num_reusable_tokens(&a, None, None), 0);
    assert_eq!(bm.num_reusable_tokens(&b, None, None), 2);
    drop((plain, more));
}

#[test]
fn referenced_cached_block_is_never_evicted() {
    let mut bm = BlockManager::new(2, 2, true);
    let a = vec![1, 2, 3];
    let mut ta = bm.allocate(&a, 3, None, None).unwrap();
    bm.register_computed(&mut ta, &a, 3);
    // Reusing block 0 still needs one fresh block, and none is free: nothing changes.
    assert!(bm.allocate(&a, 3, None, None).is_err());
    assert!(bm.allocate(&[5, 6], 2, None, None).is_err());
    assert_eq!(bm.ref_count(ta.block_ids()[0]), 1);
    drop(ta);
    // Once unreferenced, the cached block is reusable again.
    assert_eq!(
        bm.allocate(&a, 3, None, None).unwrap().num_cached_tokens(),
        2
    );
}

#[test]
fn sibling_shares_its_computed_prompt_blocks_without_prefix_caching() {
    let mut bm = BlockManager::new(8, 4, false);
    let prompt = tokens(10, 0);
    let leader = bm.allocate(&prompt, 10, None, None).unwrap();
    let shared = SharedPrefix {
        table: &leader,
        num_blocks: 2,
    };
    assert!(bm.can_allocate(&prompt, 10, Some(shared), None));
    let sibling = bm.allocate(&prompt, 10, Some(shared), None).unwrap();
    assert_eq!(sibling.num_cached_tokens(), 8);
    assert_eq!(&sibling.block_ids()[..2], &leader.block_ids()[..2]);
    assert_ne!(sibling.block_ids()[2], leader.block_ids()[2]);
    assert_eq!(bm.num_used_blocks(), 4);
    drop(leader);
    assert_eq!(bm.num_used_blocks(), 3);
}

#[derive(Debug, Clone)]
enum Op {
    Allocate { prompt: u8, len: usize },
    Grow { table: usize, by: usize },
    Compute { table: usize },
    Drop { table: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 1usize..12).prop_map(|(prompt, len)| Op::Allocate { prompt, len }),
        (0usize..8, 1usize..6).prop_map(|(table, by)| Op::Grow { table, by }),
        (0usize..8).prop_map(|table| Op::Compute { table }),
        (0usize..8).prop_map(|table| Op::Drop { table }),
    ]
}

proptest! {
    #[test]
    fn ref_counts_match_live_tables_and_every_block_returns(ops in prop::collection::vec(op(), 1..60)) {
        let mut bm = BlockManager::new(6, 2, true);
        let mut live: Vec<(Vec<u32>, usize, BlockTable)> = Vec::new();
        for op in ops {
            match op {
                Op::Allocate { prompt, len } => {
                    let toks: Vec<u32> = (0..len as u32).map(|i| i % 3 + prompt as u32 * 10).collect();
                    let ok = bm.can_allocate(&toks, len, None, None);
                    let free_before = bm.num_free_blocks();
                    match bm.allocate(&toks, len, None, None) {
                        Ok(t) => { prop_assert!(ok); let c = t.num_cached_tokens(); live.push((toks, c, t)); }
                        Err(_) => { prop_assert!(!ok); prop_assert_eq!(bm.num_free_blocks(), free_before); }
                    }
                }
                Op::Grow { table, by } => {
                    if let Some((toks, _, t)) = live.get_mut(table) {
                        toks.extend(std::iter::repeat_n(1, by));
                        let _ = bm.append(t, toks.len());
                    }
                }
                Op::Compute { table } => {
                    if let Some((toks, computed, t)) = live.get_mut(table) {
                        let covered = (t.block_ids().len() * 2).min(toks.len());
                        *computed = covered;
                        bm.register_computed(t, toks, covered);
                    }
                }
                Op::Drop { table } => {
                    if table < live.len() { live.remove(table); }
                }
            }
            let mut expected = [0u32; 6];
            for (_, _, t) in &live {
                for &b in t.block_ids() { expected[b as usize] += 1; }
            }
            for (b, &count) in expected.iter().enumerate() {
                prop_assert_eq!(bm.ref_count(b as u32), count);
            }
            prop_assert_eq!(bm.num_used_blocks(), expected.iter().filter(|&&c| c > 0).count());
        }
        live.clear();
        prop_assert_eq!(bm.num_free_blocks(), 6);
    }
}

/// A manager whose window layers read the last 5 positions, 4 tokens a block.
fn windowed(full: usize, window_blocks: usize) -> BlockManager {
    BlockManager::for_pools(&KvPools::with_window(full, 5, window_blocks), 4, true)
}

/// The window group's index.
const WINDOW: usize = 1;

#[test]
fn window_blocks_are_released_once_the_window_has_moved_past_them() {
    let mut bm = windowed(16, 8);
    let toks = tokens(40, 0);
    let mut t = bm.allocate(&toks, 10, None, None).unwrap();
    assert_eq!(t.group_table(WINDOW).len(), 3);
    bm.register_computed(&mut t, &toks, 10);
    // The next token (position 10) reads positions 6..=10: block 0 is behind the window.
    let released = sluice_model::RELEASED_BLOCK;
    let table = t.group_table(WINDOW);
    assert_eq!((table[0], table.len()), (released, 3));
    for computed in 11..=40 {
        bm.append(&mut t, computed).unwrap();
        bm.register_computed(&mut t, &toks, computed);
        // Positions computed - 4 ..= computed span at most 2 blocks (plus the one growing).
        assert!(t.num_held(WINDOW) <= 3, "{computed}");
        let table = t.group_table(WINDOW);
        let reach = (computed + 1 - 5) / 4;
        assert!(table[..reach].iter().all(|&b| b == released));
        assert!(table[reach..].iter().all(|&b| b != released));
    }
    // The full pool keeps every block; both pools get everything back with the table.
    assert_eq!(t.block_ids().len(), 10);
    assert_eq!(bm.group_blocks(WINDOW), (8, 8 - t.num_held(WINDOW)));
    drop(t);
    assert_eq!(bm.num_free_blocks(), 16);
    assert_eq!(bm.group_blocks(WINDOW), (8, 8));
}

#[test]
fn a_full_window_pool_refuses_growth_and_changes_nothing() {
    let mut bm = windowed(16, 3);
    let toks = tokens(16, 0);
    assert!(!bm.can_allocate(&toks, 13, None, None));
    assert_eq!(
        bm.allocate(&toks, 13, None, None).unwrap_err(),
        OutOfBlocks { needed: 4, free: 3 }
    );
    assert_eq!(
        (bm.num_free_blocks(), bm.group_blocks(WINDOW)),
        (16, (3, 3))
    );
    let mut t = bm.allocate(&toks, 12, None, None).unwrap();
    // Nothing computed yet, so nothing released: a 13th position needs a 4th window block.
    assert!(!bm.can_append(&t, 13));
    assert!(bm.append(&mut t, 13).is_err());
    assert_eq!((t.block_ids().len(), t.num_held(WINDOW)), (3, 3));
    bm.register_computed(&mut t, &toks, 12);
    assert!(bm.can_append(&t, 13));
    bm.append(&mut t, 13).unwrap();
}

#[test]
fn a_window_hit_needs_the_last_window_blocks_and_reads_the_rest_as_released() {
    // Window 5, blocks of 4: a prefix of n blocks needs window blocks from
    // (4n + 1 - 5) / 4 = n - 1 on, i.e. the last one.
    let mut bm = windowed(16, 8);
    let prompt = tokens(17, 0);
    let mut first = bm.allocate(&prompt, 17, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 17);
    // Everything behind position 17's window went back, still cached.
    assert_eq!(
        first.group_table(WINDOW)[..3],
        [sluice_model::RELEASED_BLOCK; 3]
    );
    let held_window = first.group_table(WINDOW)[3];
    drop(first);
    // The same prompt again: 4 blocks (16 tokens) hit; the window table reuses only block 3.
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 16);
    let again = bm.allocate(&prompt, 17, None, None).unwrap();
    assert_eq!(again.num_cached_tokens(), 16);
    let table = again.group_table(WINDOW);
    assert_eq!(table[..3], [sluice_model::RELEASED_BLOCK; 3]);
    assert_eq!(table[3], held_window);
    assert_eq!((table.len(), again.num_held(WINDOW)), (5, 2));
    drop(again);
    assert_eq!(bm.group_blocks(WINDOW), (8, 8));
    assert_eq!(bm.num_free_blocks(), 16);
}

#[test]
fn a_window_hit_shrinks_to_what_the_window_pool_still_caches() {
    let mut bm = windowed(32, 8);
    let prompt = tokens(25, 0);
    let mut first = bm.allocate(&prompt, 25, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 25);
    drop(first);
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 24);
    // Another prompt takes every window block, evicting the cached ones: the full group still
    // has the prefix, but its last window is gone: no hit.
    let other = tokens(32, 100);
    let mut o = bm.allocate(&other, 32, None, None).unwrap();
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 0);
    // Window blocks it leaves behind stay findable: a prompt ending inside them hits.
    bm.register_computed(&mut o, &other, 32);
    assert_eq!(o.group_table(WINDOW)[1], sluice_model::RELEASED_BLOCK);
    assert_eq!(bm.num_reusable_tokens(&tokens(9, 100), None, None), 8);
    assert_eq!(bm.num_reusable_tokens(&tokens(21, 100), None, None), 20);
}

#[test]
fn siblings_share_a_window_prefix_while_its_blocks_are_held() {
    let mut bm = windowed(16, 8);
    let prompt = tokens(10, 0);
    let mut first = bm.allocate(&prompt, 10, None, None).unwrap();
    bm.register_computed(&mut first, &prompt, 10);
    let shared = SharedPrefix {
        table: &first,
        num_blocks: 2,
    };
    // 2 blocks: the window needs block 1 (positions 4..8), which the sibling holds.
    assert_eq!(bm.num_reusable_tokens(&prompt, Some(shared), None), 8);
    let second = bm.allocate(&prompt, 10, Some(shared), None).unwrap();
    assert_eq!(second.num_cached_tokens(), 8);
    assert_eq!(second.group_table(WINDOW)[1], first.group_table(WINDOW)[1]);
    assert_eq!(bm.ref_count(first.block_ids()[0]), 2);
}

#[test]
fn registered_blocks_are_reported_stored_and_evicted_ones_removed() {
    let mut bm = BlockManager::new(4, 4, true);
    let prompt = tokens(10, 0);
    let mut t = bm.allocate(&prompt, 10, None, Some(3)).unwrap();
    bm.register_computed(&mut t, &prompt, 10);
    let root = BlockHash::root(Some(3));
    let k0 = root.child(&prompt[..4], &[]);
    let k1 = k0.child(&prompt[4..8], &[]).0;
    assert_eq!(
        bm.drain_events(),
        [KvEvent::Stored {
            group: 0,
            block_hashes: vec![k0, BlockHash(k1)],
            parent: None,
            token_ids: prompt[..8].to_vec(),
            block_size: 4,
        }]
    );
    assert!(bm.drain_events().is_empty(), "a drain empties the sink");
    // The third block fills later: its event names its parent.
    bm.append(&mut t, 12).unwrap();
    let longer = tokens(12, 0);
    bm.register_computed(&mut t, &longer, 12);
    let k2 = BlockHash(k1).child(&longer[8..12], &[]);
    assert_eq!(
        bm.drain_events(),
        [KvEvent::Stored {
            group: 0,
            block_hashes: vec![k2],
            parent: Some(BlockHash(k1)),
            token_ids: longer[8..12].to_vec(),
            block_size: 4,
        }]
    );
    drop(t);
    // Fresh blocks for another prompt evict cached ones, least recently freed first: the
    // unkeyed block goes first, then the tail of the chain.
    let other = tokens(8, 100);
    let _u = bm.allocate(&other, 8, None, None).unwrap();
    assert_eq!(
        bm.drain_events(),
        [KvEvent::Removed {
            group: 0,
            block_hashes: vec![k2],
        }]
    );
}

#[test]
fn clearing_the_prefix_cache_waits_for_idle_pools_and_forgets_every_key() {
    let mut bm = BlockManager::new(4, 4, true);
    let prompt = tokens(9, 0);
    let mut t = bm.allocate(&prompt, 9, None, None).unwrap();
    bm.register_computed(&mut t, &prompt, 9);
    bm.drain_events();
    assert!(!bm.clear_prefix_cache(), "a table still holds blocks");
    assert!(bm.drain_events().is_empty());
    drop(t);
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 8);
    assert!(bm.clear_prefix_cache());
    assert_eq!(bm.drain_events(), [KvEvent::AllCleared]);
    assert_eq!(bm.num_reusable_tokens(&prompt, None, None), 0);
    assert_eq!(bm.num_free_blocks(), 4);
}

#[test]
fn without_prefix_caching_nothing_is_hashed_or_reported() {
    let mut bm = BlockManager::new(4, 4, false);
    let prompt = tokens(9, 0);
    let mut t = bm.allocate(&prompt, 9, None, None).unwrap();
    bm.register_computed(&mut t, &prompt, 9);
    drop(t);
    let _again = bm.allocate(&prompt, 9, None, None).unwrap();
    assert!(bm.drain_events().is_empty());
}
