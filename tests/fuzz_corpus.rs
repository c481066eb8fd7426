//! The fuzz target's entry points on stable Rust, inside the suite: every file of the committed
//! seed corpus (`fuzz/corpus/gguf_load`), then deterministic mutations of them (bit flips, bytes
//! set to 0x00/0xff, little-endian counts set huge, truncations) for a bounded time, through the
//! GGUF reader, the metadata-to-config step and the tokenizer built from the metadata. Each input
//! must give an error or a value: a panic fails the test, an abort (a huge allocation) ends the
//! test process. `cargo +nightly fuzz run gguf_load` (`fuzz/`) explores with coverage feedback;
//! this keeps its corpus and the cheap mutations checked on every run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_gguf::GgufModel;
use sluice_model::gguf::config::config_from_gguf;
use sluice_text::Tokenizer;

/// Time spent on mutations after the corpus itself.
const MUTATION_TIME: Duration = Duration::from_secs(3);

/// What the fuzz target does with one input (`fuzz/fuzz_targets/gguf_load.rs`).
fn load(path: &Path) {
    if let Ok(header) = GgufModel::open_header(path) {
        let _ = config_from_gguf(&header);
    }
    if let Ok(model) = GgufModel::open(path) {
        let _ = config_from_gguf(&model);
        if let Ok(tokenizer) = Tokenizer::from_gguf(model.metadata()) {
            let _ = tokenizer.encode("Hello, wörld! 12345 <|im_end|>", true);
        }
    }
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gguf_load");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seed corpus in {}", dir.display());
    files
}

/// Mutation `i` of `seed` (deterministic: the same `i` gives the same bytes).
fn mutate(seed: &[u8], i: u64) -> Vec<u8> {
    let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut bytes = seed.to_vec();
    let at = |r: u64, len: usize| (r % len.max(1) as u64) as usize;
    match i % 5 {
        0 => {
            let p = at(next(), bytes.len());
            bytes[p] ^= 1 << (next() % 8);
        }
        1 => {
            let p = at(next(), bytes.len());
            bytes[p] = if next() % 2 == 0 { 0 } else { 0xff };
        }
        2 => {
            // A little-endian u64 (counts, lengths, offsets, dims) set huge.
            let p = at(next(), bytes.len().saturating_sub(8));
            let huge = [1u64 << 32, 1 << 63, u64::MAX, (1 << 31) - 1][(next() % 4) as usize];
            bytes[p..p + 8].copy_from_slice(&huge.to_le_bytes());
        }
        3 => bytes.truncate(at(next(), bytes.len())),
        _ => {
            for _ in 0..4 {
                let p = at(next(), bytes.len());
                bytes[p] = next() as u8;
            }
        }
    }
    bytes
}

#[test]
fn the_seed_corpus_and_its_mutations_give_errors_or_values() {
    let dir = std::env::temp_dir().join(format!("sluice-fuzz-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("input.gguf");
    let seeds = corpus();
    for (name, bytes) in &seeds {
        std::fs::write(&path, bytes).unwrap();
        println!("seed {name}");
        load(&path);
    }
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < MUTATION_TIME {
        let (name, seed) = &seeds[(i % seeds.len() as u64) as usize];
        std::fs::write(&path, mutate(seed, i)).unwrap();
        // Printed before the input runs, so a crash names the input that caused it.
        println!("mutation {i} of {name}");
        load(&path);
        i += 1;
    }
    println!("{} seeds, {i} mutations", seeds.len());
    std::fs::remove_dir_all(&dir).unwrap();
}
