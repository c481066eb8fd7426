//! Prompts that start from blocks computed before: prefix-cache hits and sibling choices.

use super::*;

#[test]
fn prefix_cache_hit_skips_the_cached_blocks() {
    let t0 = Instant::now();
    let mut s = scheduler(16, 4, 64);
    let prompt: Vec<u32> = (1..=10).collect();
    let mk = |id| {
        seq(NewSeq {
            id,
            request: id,
            choice: 0,
            priority: Priority::Normal,
            arrival: t0,
            prompt: prompt.clone(),
            max_tokens: 1,
        })
    };
    s.add(mk(0)).unwrap();
    let out = s.schedule(t0);
    assert_eq!((out.prefix_cache_queries, out.prefix_cache_hits), (10, 0));
    let done = feed(&mut s, &out, 3, t0);
    s.remove(done[0]);
    s.add(mk(1)).unwrap();
    let out = s.schedule(t0);
    assert_eq!(
        scheduled_tokens(&out),
        vec![(1, 2)],
        "8 of 10 tokens come from the cache"
    );
    assert_eq!(out.batch.positions, vec![8, 9]);
    assert_eq!((out.prefix_cache_queries, out.prefix_cache_hits), (10, 8));
}

#[test]
fn choices_of_one_request_share_the_prompt_blocks() {
    let t0 = Instant::now();
    let mut s = scheduler(16, 4, 64);
    let prompt: Vec<u32> = (1..=10).collect();
    for choice in 0..3 {
        s.add(seq(NewSeq {
            id: choice as u64,
            request: 7,
            choice,
            priority: Priority::Normal,
            arrival: t0,
            prompt: prompt.clone(),
            max_tokens: 4,
        }))
        .unwrap();
    }
    // Choice 0 computes the prompt; the others wait for it rather than recompute it.
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 10)]);
    feed(&mut s, &out, 5, t0);
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 1), (1, 2), (2, 2)]);
    let tables: Vec<Vec<u32>> = (0..3)
        .map(|i| {
            s.sequence(i)
                .unwrap()
                .block_table()
                .unwrap()
                .block_ids()
                .to_vec()
        })
        .collect();
    assert_eq!(tables[0][..2], tables[1][..2]);
    assert_eq!(tables[0][..2], tables[2][..2]);
    assert_eq!(s.block_manager().ref_count(tables[0][0]), 3);
    // 2 shared + 3 private tail blocks.
    assert_eq!(s.block_manager().num_used_blocks(), 5);
}
