//! The engine with the prefix cache's disk tier: blocks written by one engine are read back by
//! the next (a restart), give the tokens computing them gives, and are never used across
//! tenants or when damaged.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::tests::{collect, prompt, request, start, wait_until, Choice};
use super::*;
use crate::block_manager::BlockHash;
use crate::executor::fake::HistoryExecutor;
use crate::kv_disk::tests::block_files;
use crate::kv_disk::DiskCache;
use crate::request::GenerationRequest;

const BLOCK: usize = 4;

fn disk(dir: &Path) -> (Arc<DiskCache>, ModelDisk) {
    let cache = DiskCache::open(&dir.join("kv"), 1 << 30).unwrap();
    let weights = dir.join("weights.bin");
    fs::write(&weights, b"fake weights").unwrap();
    // The fake executor's block: a u32 token id per slot.
    let model = cache
        .model(&[weights], "fake", vec![4 * BLOCK], None)
        .unwrap();
    (cache, model)
}

/// Runs `requests` one after another on a fresh engine (an empty KV cache) over `disk`;
/// returns the choices and the tokens the executor computed. The engine is shut down (its
/// blocks written) before this returns.
fn run(disk: &ModelDisk, requests: &[GenerationRequest]) -> (Vec<Choice>, usize) {
    let exec = HistoryExecutor::new(super::tests::VOCAB, BLOCK, 64);
    let computed = Arc::clone(&exec.tokens_computed);
    let config = EngineConfig {
        kv_disk: Some(disk.clone()),
        ..EngineConfig::default()
    };
    let engine = start(exec, config);
    let choices = (requests.iter())
        .map(|r| collect(engine.submit(r.clone()).unwrap(), 1).remove(0))
        .collect();
    engine.shutdown();
    wait_until("the engine stopped", || !engine.is_alive());
    (choices, computed.load(Ordering::Relaxed))
}

#[test]
fn a_restarted_engine_reads_the_prompt_back_and_gives_the_same_tokens() {
    let root = tempfile::tempdir().unwrap();
    let (_cache, disk) = disk(root.path());
    let long = request(prompt(1, 30), 7, 6);
    let (cold, cold_computed) = run(&disk, std::slice::from_ref(&long));
    assert_eq!(cold[0].usage.cached_prompt_tokens, 0);
    assert_eq!(
        cold_computed,
        30 + 5,
        "the prompt and every sampled token but the last"
    );
    // 35 tokens computed: 8 full blocks registered, and written.
    assert_eq!(disk.snapshot().blocks_written, 8);
    assert_eq!(block_files(&root.path().join("kv")).len(), 8);

    // A new engine: the KV cache is empty, the disk is not.
    let (warm, warm_computed) = run(&disk, std::slice::from_ref(&long));
    assert_eq!(warm[0].tokens, cold[0].tokens);
    assert_eq!(
        warm[0].usage.cached_prompt_tokens, 28,
        "every full block before the last token"
    );
    assert_eq!(warm_computed, 2 + 5);
    assert_eq!(disk.snapshot().blocks_read, 7);

    // A prompt sharing its first two blocks reads those two; another tenant reads nothing.
    let mut shared = prompt(1, 30);
    shared[9] += 1;
    let mut salted = long.clone();
    salted.cache_salt = Some(99);
    let (choices, _) = run(&disk, &[request(shared, 7, 6), salted]);
    assert_eq!(choices[0].usage.cached_prompt_tokens, 8);
    assert_eq!(
        choices[1].usage.cached_prompt_tokens, 0,
        "a cache scope is never crossed"
    );
    assert_eq!(choices[1].tokens, cold[0].tokens);
}

#[test]
fn damaged_block_files_are_computed_again_with_the_same_tokens() {
    let root = tempfile::tempdir().unwrap();
    let (_cache, disk) = disk(root.path());
    let long = request(prompt(2, 30), 3, 4);
    let (cold, _) = run(&disk, std::slice::from_ref(&long));
    // Damage the fourth block of the chain: the first three are still used.
    let tokens = prompt(2, 30);
    let mut key = BlockHash::root(None);
    for chunk in tokens.chunks_exact(BLOCK).take(4) {
        key = key.child(chunk, &[]);
    }
    let name = format!("{:016x}.kv", key.0);
    let files = block_files(&root.path().join("kv"));
    let fourth = files
        .iter()
        .find(|p| p.ends_with(&name))
        .expect("the fourth block's file");
    let mut bytes = fs::read(fourth).unwrap();
    let last = bytes.len() - 40;
    bytes[last] ^= 0xff;
    fs::write(fourth, &bytes).unwrap();
    let (warm, _) = run(&disk, std::slice::from_ref(&long));
    assert_eq!(warm[0].tokens, cold[0].tokens);
    assert_eq!(warm[0].usage.cached_prompt_tokens, 12);
    assert_eq!(disk.snapshot().read_errors, 1);
    // The damaged file was removed, and the block computed again was written anew.
    assert_ne!(fs::read(fourth).unwrap(), bytes);
    let (again, _) = run(&disk, std::slice::from_ref(&long));
    assert_eq!(again[0].usage.cached_prompt_tokens, 28);
    assert_eq!(again[0].tokens, cold[0].tokens);
}
