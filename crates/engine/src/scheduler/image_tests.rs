//! Prompts with images: an image's rows are computed in one step, whatever the budget, and
//! reach the batch with their embeddings; the prefix cache tells images apart.

use std::sync::Arc;

use super::*;
use crate::images::{ImageSpan, PromptImages};

const HIDDEN: usize = 2;

/// A prompt of `len` tokens with images of `rows` soft tokens at `starts` (image `i`'s
/// content hash is `hashes[i]`).
fn image_seq(
    id: SeqId,
    t0: Instant,
    len: usize,
    starts: &[usize],
    rows: usize,
    hashes: &[u8],
) -> Sequence {
    image_seq_for(id, t0, len, starts, rows, hashes, 2)
}

/// [`image_seq`] generating `max_tokens` tokens.
fn image_seq_for(
    id: SeqId,
    t0: Instant,
    len: usize,
    starts: &[usize],
    rows: usize,
    hashes: &[u8],
    max_tokens: u32,
) -> Sequence {
    let spans = (starts.iter().zip(hashes))
        .map(|(&start, &hash)| ImageSpan {
            start,
            embeddings: vec![f32::from(hash); rows * HIDDEN].into(),
            content_hash: [hash; 32],
        })
        .collect();
    let images = PromptImages::new(spans, HIDDEN).unwrap();
    seq(NewSeq {
        id,
        request: id,
        choice: 0,
        priority: Priority::Normal,
        arrival: t0,
        prompt: (1..=len as u32).collect(),
        max_tokens,
    })
    .with_images(Arc::new(images))
}

#[test]
fn a_chunk_stops_before_an_image_then_takes_all_of_it_past_the_budget() {
    let t0 = Instant::now();
    // A budget of 8 tokens; the image's 12 rows start at position 5.
    let mut s = scheduler(32, 4, 8);
    s.add(image_seq(0, t0, 20, &[5], 12, &[1])).unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 5)]);
    assert!(out.batch.bidirectional_spans.is_empty());
    feed(&mut s, &out, 9, t0);
    let out = s.schedule(t0);
    assert_eq!(
        scheduled_tokens(&out),
        vec![(0, 12)],
        "the whole image, past the budget"
    );
    assert_eq!(out.batch.bidirectional_spans, vec![0..12]);
    assert_eq!(out.batch.input_embeddings.rows, (0..12).collect::<Vec<_>>());
    feed(&mut s, &out, 9, t0);
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 3)]);
    assert!(out.batch.bidirectional_spans.is_empty());
}

#[test]
fn an_image_beside_a_text_prompt_keeps_its_rows_in_batch_order() {
    let t0 = Instant::now();
    let mut s = scheduler(32, 4, 64);
    s.add(simple(0, t0, 6, 2)).unwrap();
    s.add(image_seq(1, t0, 10, &[2], 4, &[1])).unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 6), (1, 10)]);
    // The image's rows are the second sequence's positions 2..6: batch rows 8..12.
    assert_eq!(out.batch.bidirectional_spans, vec![8..12]);
}

#[test]
fn a_repeated_image_reuses_blocks_and_another_image_does_not() {
    let t0 = Instant::now();
    let mut s = scheduler(32, 4, 64);
    let run = |s: &mut Scheduler, id, hash| {
        s.add(image_seq(id, t0, 14, &[2], 8, &[hash])).unwrap();
        let out = s.schedule(t0);
        let hits = out.prefix_cache_hits;
        let done = feed(s, &out, 9, t0);
        assert!(done.is_empty());
        let out = s.schedule(t0);
        for id in feed(s, &out, 9, t0) {
            s.remove(id);
        }
        hits
    };
    assert_eq!(run(&mut s, 0, 1), 0);
    assert_eq!(run(&mut s, 1, 1), 12, "the same image: every full block");
    assert_eq!(run(&mut s, 2, 2), 0, "the same tokens, another image");
    assert_eq!(s.block_manager().num_used_blocks(), 0, "every block freed");
}

#[test]
fn a_preempted_image_prompt_is_recomputed_by_the_same_rule() {
    let t0 = Instant::now();
    // 6 blocks of 4 for two sequences that need 5 and 6: one is preempted, recomputed later.
    let mut s = scheduler(6, 4, 6);
    s.add(simple(0, t0, 4, 16)).unwrap();
    s.add(image_seq_for(1, t0, 12, &[2], 8, &[1], 12)).unwrap();
    let (mut preempted, mut image_steps, mut done) = (false, 0, 0);
    for _ in 0..200 {
        let out = s.schedule(t0);
        preempted |= out.preempted.contains(&1);
        let mut row = 0;
        for x in &out.scheduled {
            let start = out.batch.positions[row] as usize;
            let end = start + x.num_new_tokens;
            if x.seq_id == 1 && start < 10 && end > 2 {
                assert!(
                    end >= 10,
                    "a chunk {start}..{end} ends inside the image 2..10"
                );
                let first = row + start.max(2) - start;
                assert!(out
                    .batch
                    .bidirectional_spans
                    .contains(&(first..row + 10 - start)));
                image_steps += 1;
            }
            row += x.num_new_tokens + x.draft.len();
        }
        for id in feed(&mut s, &out, 9, t0) {
            s.remove(id);
            done += 1;
        }
        if done == 2 {
            break;
        }
    }
    assert_eq!(done, 2);
    assert!(
        preempted,
        "the pool is small enough to preempt the image prompt"
    );
    assert!(image_steps >= 1);
    assert_eq!(s.block_manager().num_used_blocks(), 0, "every block freed");
}
