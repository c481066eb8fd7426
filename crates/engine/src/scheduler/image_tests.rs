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
        max_tokens: 2,
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
