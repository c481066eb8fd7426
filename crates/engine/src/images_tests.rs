use super::*;
use crate::block_manager::CacheKeys;

/// Images of `len` soft tokens at `starts`, hidden size 2, the hash from the start.
fn images(starts: &[usize], len: usize) -> PromptImages {
    let spans = (starts.iter())
        .map(|&start| ImageSpan {
            start,
            embeddings: (0..len * 2).map(|v| (start * 100 + v) as f32).collect(),
            content_hash: [start as u8; 32],
        })
        .collect();
    PromptImages::new(spans, 2).unwrap()
}

#[test]
fn a_chunk_ending_inside_an_image_stops_before_it() {
    let images = images(&[10], 4);
    assert_eq!(images.chunk_len(0, 12), 10);
    assert_eq!(images.chunk_len(0, 10), 10);
    assert_eq!(images.chunk_len(0, 14), 14);
    assert_eq!(images.chunk_len(0, 11), 10);
    assert_eq!(images.chunk_len(14, 1), 1);
}

#[test]
fn a_chunk_starting_inside_an_image_takes_the_rest_of_it() {
    let images = images(&[10], 4);
    // From the image's first row, or a cache hit that ended inside it.
    assert_eq!(images.chunk_len(10, 1), 4);
    assert_eq!(images.chunk_len(12, 1), 2);
    assert_eq!(images.chunk_len(12, 5), 5);
}

#[test]
fn only_the_images_rows_in_the_chunk_are_given_to_the_batch() {
    let images = images(&[2, 10], 4);
    let mut batch = Batch::default();
    batch.push_sequence(&[0; 20], 0, vec![0, 1, 2, 3, 4], 4, false);
    images.push_rows(&mut batch, 0, 14, 0);
    assert_eq!(batch.bidirectional_spans, vec![2..6, 10..14]);
    // A chunk that starts at the second image's third row, placed at batch row 5.
    let mut batch = Batch::default();
    batch.push_sequence(&[0; 9], 0, vec![0, 1, 2, 3, 4], 4, false);
    images.push_rows(&mut batch, 12, 4, 5);
    assert_eq!(batch.bidirectional_spans, vec![5..7]);
    assert_eq!(batch.input_embeddings.rows, vec![5, 6]);
    assert_eq!(batch.input_embeddings.values[0], 1004.0);
}

#[test]
fn blocks_holding_an_image_are_keyed_by_it_and_text_blocks_are_not() {
    let (bs, tokens) = (4, [5u32; 4]);
    let text = PromptImages::default().cache_keys(Some(3));
    assert_eq!(text, CacheKeys::from(Some(3)));
    // One image of 4 soft tokens at positions 10..14: blocks 2 (8..12) and 3 (12..16).
    let a = images(&[10], 4).cache_keys(None);
    let plain = PromptImages::default().cache_keys(None);
    let root = a.root();
    let key = |keys: &CacheKeys, i| keys.child(root, i, bs, &tokens);
    for i in [0, 1, 4] {
        assert_eq!(key(&a, i), key(&plain, i), "block {i} holds no image token");
    }
    for i in [2, 3] {
        assert_ne!(key(&a, i), key(&plain, i), "block {i} holds the image");
        assert_eq!(key(&images(&[10], 4).cache_keys(None), i), key(&a, i));
        assert_ne!(key(&images(&[11], 4).cache_keys(None), i), key(&a, i));
    }
    // A second image later leaves the first image's blocks as they were.
    let two = images(&[10, 20], 4).cache_keys(None);
    assert_eq!(key(&two, 2), key(&a, 2));
    assert_ne!(key(&two, 5), key(&a, 5));
    assert_eq!(
        images(&[10], 4).cache_keys(Some(1)).root(),
        CacheKeys::from(Some(1)).root()
    );
}

#[test]
fn overlapping_or_ragged_images_are_refused() {
    let span = |start, values: usize| ImageSpan {
        start,
        embeddings: vec![0.0; values].into(),
        content_hash: [0; 32],
    };
    assert!(PromptImages::new(vec![span(0, 4), span(1, 4)], 2).is_err());
    assert!(PromptImages::new(vec![span(0, 3)], 2).is_err());
    assert!(PromptImages::new(vec![span(0, 4), span(2, 4)], 2).is_ok());
}

#[test]
fn a_multimodal_rope_layout_reads_images_causally_and_positions_every_row() {
    // One image of 4 tokens at 10..14 from a 4x4 patch grid merged 2x2: a 2x2 token grid, so
    // the tokens after it sit 2 positions past the image's start instead of 4.
    let images = images(&[10], 4).with_mrope(20, &[[1, 4, 4]], 2).unwrap();
    let mut batch = Batch::default();
    batch.push_sequence(&[0; 16], 0, vec![0, 1, 2, 3], 4, false);
    images.push_rows(&mut batch, 0, 16, 0);
    images.push_positions(&mut batch, 0, 16, 0);
    assert!(
        batch.bidirectional_spans.is_empty(),
        "causal over the image"
    );
    assert_eq!(batch.input_embeddings.rows, vec![10, 11, 12, 13]);
    assert_eq!(batch.mrope_positions[9], [9, 9, 9]);
    assert_eq!(
        &batch.mrope_positions[10..14],
        &[[10, 10, 10], [10, 10, 11], [10, 11, 10], [10, 11, 11]]
    );
    assert_eq!(batch.mrope_positions[14], [12, 12, 12]);
    // A decode row past the prompt keeps the offset.
    let mut decode = Batch::default();
    decode.push_sequence(&[0], 25, vec![0, 1, 2, 3, 4, 5, 6], 4, false);
    images.push_positions(&mut decode, 25, 1, 0);
    assert_eq!(decode.mrope_positions, vec![[23, 23, 23]]);
    // Causal image rows are cut like text: a chunk may end inside the image, and only the
    // chunk's own rows of it are given.
    assert_eq!(images.chunk_len(0, 12), 12);
    assert_eq!(images.chunk_len(11, 1), 1);
    let mut batch = Batch::default();
    batch.push_sequence(&[0; 4], 0, vec![0, 1, 2, 3], 4, false);
    images.push_rows(&mut batch, 9, 3, 0);
    assert_eq!(batch.input_embeddings.rows, vec![1, 2]);
    assert_eq!(
        batch.input_embeddings.values,
        [1000.0, 1001.0, 1002.0, 1003.0]
    );
    // Gemma's layout sets no positions.
    let mut plain = Batch::default();
    plain.push_sequence(&[0; 4], 0, vec![0], 4, false);
    super::PromptImages::default().push_positions(&mut plain, 0, 4, 0);
    assert!(plain.mrope_positions.is_empty());
}
