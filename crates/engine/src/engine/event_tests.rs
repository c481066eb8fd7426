//! What an engine publishes on its KV event stream: every block the prefix cache stores (the
//! tokens along the parent links are the sequence's own), every block it evicts (exactly those
//! stored before), the disk tier's writes and removals, and a clear when it stops.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::tests::{collect, prompt, request, start, wait_until};
use super::*;
use crate::block_manager::BlockHash;
use crate::executor::fake::HistoryExecutor;
use crate::kv_disk::DiskCache;
use crate::kv_events::{KvEventStats, KvEventStream};

const BLOCK: usize = 4;

/// A stream that keeps everything published.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(Medium, KvEvent)>>);

impl KvEventStream for Recorder {
    fn publish(&self, medium: Medium, events: Vec<KvEvent>) -> bool {
        let mut all = self.0.lock().unwrap();
        all.extend(events.into_iter().map(|e| (medium, e)));
        true
    }

    fn stats(&self) -> KvEventStats {
        KvEventStats::default()
    }
}

impl Recorder {
    fn take(&self) -> Vec<(Medium, KvEvent)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The token ids of the chain ending at `last`, following parent links through `stored`.
fn chain_tokens(
    stored: &HashMap<BlockHash, (Option<BlockHash>, Vec<u32>)>,
    last: BlockHash,
) -> Vec<u32> {
    let mut blocks = Vec::new();
    let mut at = Some(last);
    while let Some(key) = at {
        let (parent, tokens) = &stored[&key];
        blocks.push(tokens.clone());
        at = *parent;
    }
    blocks.reverse();
    blocks.concat()
}

/// Each stored block's parent and tokens, by key, for the events of tier `medium`.
fn stored_blocks(
    events: &[(Medium, KvEvent)],
    medium: Medium,
) -> HashMap<BlockHash, (Option<BlockHash>, Vec<u32>)> {
    let mut out = HashMap::new();
    for (m, e) in events {
        if let (
            true,
            KvEvent::Stored {
                block_hashes,
                parent,
                token_ids,
                block_size,
                ..
            },
        ) = (*m == medium, e)
        {
            for (i, key) in block_hashes.iter().enumerate() {
                let parent = if i == 0 {
                    *parent
                } else {
                    Some(block_hashes[i - 1])
                };
                let tokens = token_ids[i * block_size..(i + 1) * block_size].to_vec();
                out.insert(*key, (parent, tokens));
            }
        }
    }
    out
}

/// Runs `request` on a fresh engine with a disk tier of `max_bytes` under `root`, both
/// publishing to one recorder; returns the choice and every event, once the engine stopped.
fn run_with_disk(
    root: &std::path::Path,
    max_bytes: u64,
    request: crate::request::GenerationRequest,
) -> (super::tests::Choice, Vec<(Medium, KvEvent)>) {
    let recorder = Arc::new(Recorder::default());
    let sink = KvEventSink(recorder.clone());
    let cache = DiskCache::open(&root.join("kv"), max_bytes).unwrap();
    let weights = root.join("weights.bin");
    std::fs::write(&weights, b"fake weights").unwrap();
    let disk = cache
        .model(&[weights], "fake", vec![4 * BLOCK], Some(sink.clone()))
        .unwrap();
    let config = EngineConfig {
        kv_disk: Some(disk),
        kv_events: Some(sink),
        ..EngineConfig::default()
    };
    let engine = start(HistoryExecutor::new(super::tests::VOCAB, BLOCK, 64), config);
    let choice = collect(engine.submit(request).unwrap(), 1).remove(0);
    engine.shutdown();
    wait_until("the engine stopped", || !engine.is_alive());
    (choice, recorder.take())
}

#[test]
fn stored_blocks_rebuild_the_sequence_on_both_tiers_and_a_stop_clears() {
    let root = tempfile::tempdir().unwrap();
    let long = prompt(1, 30);
    let (choice, events) = run_with_disk(root.path(), 1 << 30, request(long.clone(), 7, 6));

    // 35 tokens computed (the prompt, every sampled token but the last): 8 full blocks.
    let mut sequence = long.clone();
    sequence.extend(&choice.tokens);
    let memory = stored_blocks(&events, Medium::Memory);
    assert_eq!(memory.len(), 8);
    let last = (memory.keys())
        .find(|k| !memory.values().any(|(p, _)| p.as_ref() == Some(*k)))
        .copied()
        .unwrap();
    assert_eq!(chain_tokens(&memory, last), sequence[..32]);
    // The disk tier wrote the same blocks, with the same links, and said so.
    let on_disk = stored_blocks(&events, Medium::Disk);
    assert_eq!(on_disk, memory);
    // The engine's last word: its pool is gone.
    assert_eq!(events.last(), Some(&(Medium::Memory, KvEvent::AllCleared)));
    assert!(!events
        .iter()
        .any(|(_, e)| matches!(e, KvEvent::Removed { .. })));
}

#[test]
fn evicted_blocks_are_removed_exactly_once_after_being_stored() {
    let recorder = Arc::new(Recorder::default());
    let config = EngineConfig {
        kv_events: Some(KvEventSink(recorder.clone())),
        ..EngineConfig::default()
    };
    // 16 blocks of 4 tokens: every new 30-token prompt evicts older cached blocks.
    let engine = start(HistoryExecutor::new(super::tests::VOCAB, BLOCK, 16), config);
    for i in 0..6 {
        collect(
            engine
                .submit(request(prompt(i + 2, 30), i.into(), 4))
                .unwrap(),
            1,
        );
    }
    engine.shutdown();
    wait_until("the engine stopped", || !engine.is_alive());
    let events = recorder.take();
    let mut cached: HashSet<BlockHash> = HashSet::new();
    let mut removed = 0;
    for (medium, event) in &events {
        assert_eq!(*medium, Medium::Memory);
        match event {
            KvEvent::Stored { block_hashes, .. } => {
                for key in block_hashes {
                    assert!(cached.insert(*key), "stored while cached: {key:?}");
                }
            }
            KvEvent::Removed { block_hashes, .. } => {
                for key in block_hashes {
                    assert!(cached.remove(key), "removed but not cached: {key:?}");
                    removed += 1;
                }
            }
            KvEvent::AllCleared => cached.clear(),
        }
    }
    assert!(removed > 0, "the small pool evicted");
    assert_eq!(events.last(), Some(&(Medium::Memory, KvEvent::AllCleared)));
}

#[test]
fn the_disk_tier_announces_the_files_its_bound_removes() {
    let root = tempfile::tempdir().unwrap();
    // Room for three block files of this fake model.
    let (_, events) = run_with_disk(root.path(), 3 * 200, request(prompt(3, 30), 1, 2));
    let written: Vec<BlockHash> = stored_blocks(&events, Medium::Disk).into_keys().collect();
    let removed: Vec<BlockHash> = (events.iter())
        .filter(|(m, _)| *m == Medium::Disk)
        .filter_map(|(_, e)| match e {
            KvEvent::Removed { block_hashes, .. } => Some(block_hashes.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(!removed.is_empty(), "the bound removed files");
    assert!(removed.iter().all(|k| written.contains(k)));
    let files = crate::kv_disk::tests::block_files(&root.path().join("kv")).len();
    assert_eq!(
        written.len() - removed.len(),
        files,
        "what the events leave is on disk"
    );
}
