//! Sliding-window layers in a pool of their own: a sequence holds only the window blocks its
//! window still reaches, released blocks are handed to other sequences (and overwritten), and
//! the logits are bit-identical to a cache that keeps every position of every layer.

mod common;

use common::{argmax, cache, load, reference, BlockPool, Sequence, BLOCK_SIZE};
use sluice_model::{
    kv_layout, Batch, ForwardError, KvCache, KvDtype, KvPools, Model, WeightDtype, RELEASED_BLOCK,
};

/// A sequence's window-pool blocks: a logical table with the blocks behind the window released
/// back to a shared free list.
struct WindowTable {
    table: Vec<u32>,
}

impl WindowTable {
    /// Covers positions up to `end`, after releasing the blocks no position from `first` on
    /// reads (`first - window + 1` is the earliest any of them sees).
    fn advance(&mut self, first: usize, end: usize, window: usize, free: &mut Vec<u32>) {
        let reached = kv_layout::blocks_behind(first, window, BLOCK_SIZE);
        let held = reached.min(self.table.len());
        for b in &mut self.table[..held] {
            if *b != RELEASED_BLOCK {
                free.push(*b);
                *b = RELEASED_BLOCK;
            }
        }
        while self.table.len() * BLOCK_SIZE < end {
            self.table.push(free.pop().expect("window pool exhausted"));
        }
    }
}

/// Greedy decoding of two prompts side by side (chunked prefill of 3, then one token a step),
/// returning every step's logits; `window` set runs the window layers from a pool of
/// `window_blocks` blocks.
fn generate(model: &Model, window_blocks: Option<usize>, steps: usize) -> Vec<Vec<f32>> {
    let config = model.config();
    let mut kv = match window_blocks {
        None => cache(model),
        Some(n) => {
            let window = config.sliding_window.unwrap();
            let pools = KvPools::with_window(128, window, n);
            KvCache::with_pools(config, KvDtype::F32, BLOCK_SIZE, pools)
        }
    };
    // The uniform cache's window layers read the full block tables.
    let window = window_blocks.and(config.sliding_window);
    let mut pool = BlockPool::new(128);
    let mut free: Vec<u32> = (0..window_blocks.unwrap_or(0) as u32).rev().collect();
    let prompt = reference("gemma3").prompt_ids;
    let mut seqs = [
        (Sequence::new(prompt.clone()), WindowTable { table: vec![] }),
        (
            Sequence::new(prompt[2..].to_vec()),
            WindowTable { table: vec![] },
        ),
    ];
    let mut out = Vec::new();
    for _ in 0..steps {
        let mut batch = Batch::default();
        for (seq, wt) in &mut seqs {
            let first = seq.num_computed;
            let n = (seq.tokens.len() - first).min(3);
            let mut other_groups = Vec::new();
            if let Some(window) = window {
                wt.advance(first, first + n, window, &mut free);
                other_groups.push(wt.table.clone());
            }
            seq.schedule_with_groups(n, &mut pool, &mut batch, other_groups);
        }
        let logits = model.forward(&batch, &mut kv).unwrap();
        for (i, (seq, _)) in seqs.iter_mut().enumerate() {
            if seq.num_computed == seq.tokens.len() {
                seq.tokens.push(argmax(logits.row(i)));
            }
        }
        out.push(logits.data);
    }
    out
}

#[test]
fn window_layers_from_a_small_pool_give_the_same_logits_as_keeping_every_position() {
    for name in ["gemma3", "gemma3-p6"] {
        let model = load(name, WeightDtype::F32);
        let window = model.config().sliding_window.unwrap();
        assert_eq!(window, 8);
        // 40 steps reach position ~50, six windows past the start; two sequences need at most
        // 2 * ((8 - 1) / 4 + 2) = 8 window blocks at a time (chunks of 3 fit the spare one).
        let full = generate(&model, None, 40);
        let windowed = generate(&model, Some(8), 40);
        assert_eq!(full.len(), windowed.len());
        for (step, (a, b)) in full.iter().zip(&windowed).enumerate() {
            assert!(a == b, "{name}: step {step} differs");
        }
    }
}

#[test]
fn a_released_block_the_window_still_reaches_is_rejected() {
    let model = load("gemma3", WeightDtype::F32);
    let config = model.config();
    let mut kv = KvCache::with_pools(
        config,
        KvDtype::F32,
        BLOCK_SIZE,
        KvPools::with_window(16, 8, 4),
    );
    // Position 12 reads positions 5..=12: logical blocks 1, 2 and 3.
    let tokens = [1u32];
    let forward = |kv: &mut KvCache, window_table: Vec<u32>| {
        let mut batch = Batch::default();
        let tables = vec![vec![0, 1, 2, 3], window_table];
        batch.push_sequence_tables(&tokens, 12, tables, BLOCK_SIZE, true);
        model.forward(&batch, kv)
    };
    let released = RELEASED_BLOCK;
    assert!(forward(&mut kv, vec![released, 0, 1, 2]).is_ok());
    assert!(matches!(
        forward(&mut kv, vec![released, released, 1, 2]),
        Err(ForwardError::SlotOutOfRange { .. })
    ));
    // Without window tables, the window layers would need a pool as large as the full one.
    let mut batch = Batch::default();
    batch.push_sequence(&tokens, 12, vec![0, 1, 2, 3], BLOCK_SIZE, true);
    assert!(matches!(
        model.forward(&batch, &mut kv),
        Err(ForwardError::InconsistentBatch(_))
    ));
}

#[test]
fn an_empty_batch_computes_nothing_whatever_the_pools() {
    let model = load("gemma3", WeightDtype::F32);
    let config = model.config();
    for mut kv in [
        cache(&model),
        KvCache::with_pools(
            config,
            KvDtype::F32,
            BLOCK_SIZE,
            KvPools::with_window(16, 8, 4),
        ),
    ] {
        let logits = model.forward(&Batch::default(), &mut kv).unwrap();
        assert_eq!(logits.rows(), 0);
    }
}
