//! Malformed variants of the fixture GGUF files, each one read by the same entry points a
//! model load uses (the reader, the metadata-to-config step, the tokenizer from metadata, the
//! weights): every variant must give a clean error or a load, never a panic, an abort or a
//! hang. The variants run in a child process under an address-space limit and a time limit,
//! so a huge allocation shows up as a failure here rather than as a machine out of memory.
//!
//! This is the stable-Rust half of the fuzzing of issue 30; `fuzz/` holds the cargo-fuzz
//! target for the same entry points.

#[path = "support/gguf_writer.rs"]
mod gguf_writer;
#[path = "support/limits.rs"]
mod limits;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gguf_writer::GgufWriter;
use sluice_gguf::Value;
use sluice_model::{LoadOptions, Model, ModelFiles};
use sluice_text::Tokenizer;

/// Set in the child process that runs the variants.
const CHILD: &str = "SLUICE_MALFORMED_CHILD";
/// Address space the child may use.
const ADDRESS_SPACE: u64 = 4 << 30;
/// Time the child may take for all variants.
const TIME_LIMIT: Duration = Duration::from_secs(600);
/// Time any one variant may take.
const VARIANT_LIMIT: Duration = Duration::from_secs(20);

/// Fixtures the variants are made from: a dense model, a mixture of experts, a quantized
/// model with sliding windows, and a SentencePiece vocabulary.
const SEEDS: &[&str] = &[
    "fixtures/gguf/qwen3-f16.gguf",
    "fixtures/gguf/olmoe-f16.gguf",
    "fixtures/gguf/gemma3-p6-q4_k_m.gguf",
    "fixtures/gguf-tokenizer/spm.gguf",
];

/// The sizes a hostile file claims: zero, one, 2^32, 2^63, all ones (`-1` read as signed).
const HUGE: &[u64] = &[0, 1, 1 << 32, 1 << 63, u64::MAX];

#[test]
fn every_malformed_variant_is_a_clean_error_or_a_load() {
    if std::env::var_os(CHILD).is_none() {
        return run_in_limited_child("every_malformed_variant_is_a_clean_error_or_a_load");
    }
    let dir = scratch("variants");
    let mut counts = Counts::default();
    for seed in SEEDS {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(seed);
        let bytes = std::fs::read(&source).unwrap();
        let writer = GgufWriter::read(&source);
        let mut variants = byte_variants(&bytes, data_start(&source), seed);
        variants.extend(structure_variants(&writer));
        for (name, bytes) in variants {
            let path = dir.join("variant.gguf");
            std::fs::write(&path, &bytes).unwrap();
            // Printed first, so the child's output names the variant that killed it.
            println!("{seed}: {name}");
            let started = Instant::now();
            counts.add(load_everything(&path));
            let took = started.elapsed();
            assert!(took < VARIANT_LIMIT, "{seed}: {name} took {took:?}");
        }
    }
    println!("{counts:?}");
    // Most variants must be refused; some must still load (the generator is not only noise).
    assert!(counts.errors > 1000 && counts.loads > 10, "{counts:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// How the variants ended.
#[derive(Debug, Default)]
struct Counts {
    errors: usize,
    loads: usize,
}

impl Counts {
    fn add(&mut self, loaded: bool) {
        match loaded {
            true => self.loads += 1,
            false => self.errors += 1,
        }
    }
}

/// Runs every entry point on `path`; `true` when the model (or, for a vocabulary-only file,
/// its tokenizer) loaded. An error is the expected outcome of most variants; a panic fails.
fn load_everything(path: &Path) -> bool {
    let _ = ModelFiles::config_at(path);
    let files = match ModelFiles::open(path) {
        Ok(files) => files,
        Err(_) => {
            // A vocabulary-only file has no config, but its tokenizer can still be built.
            return match sluice_gguf::GgufModel::open(path) {
                Ok(model) => Tokenizer::from_gguf(model.metadata()).is_ok(),
                Err(_) => false,
            };
        }
    };
    let tokenizer = Tokenizer::from_gguf(files.gguf_metadata().unwrap());
    let model = Model::from_files(&files, &LoadOptions::default());
    if let Ok(tokenizer) = &tokenizer {
        let _ = tokenizer.encode("Hello, wörld! 12345 <|im_end|>", true);
    }
    tokenizer.is_ok() && model.is_ok()
}

/// Truncations, bit flips (dense in the header, where parsing happens) and huge counts
/// written over the header's count fields.
fn byte_variants(bytes: &[u8], header: usize, seed: &str) -> Vec<(String, Vec<u8>)> {
    let mut rng = XorShift((seed.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut out = Vec::new();
    for cut in (0..header.min(512))
        .step_by(13)
        .chain([header, bytes.len() - 1])
    {
        out.push((format!("cut at {cut}"), bytes[..cut].to_vec()));
    }
    for _ in 0..200 {
        let at = rng.below(header as u64) as usize;
        let bit = rng.below(8);
        let mut flipped = bytes.to_vec();
        flipped[at] ^= 1 << bit;
        out.push((format!("bit {bit} of byte {at}"), flipped));
    }
    for (field, at) in [("tensor count", 8), ("metadata count", 16)] {
        for &value in HUGE {
            let mut edited = bytes.to_vec();
            edited[at..at + 8].copy_from_slice(&value.to_le_bytes());
            out.push((format!("{field} {value}"), edited));
        }
    }
    out
}

/// Where the tensor data of the file at `path` starts (its length when it has no tensors):
/// the header is everything before.
fn data_start(path: &Path) -> usize {
    let model = sluice_gguf::GgufModel::open(path).unwrap();
    let first = model.tensors().map(|t| t.start).min();
    first.unwrap_or(model.file_bytes())
}

/// Every metadata value replaced by huge, zero, negative and wrongly typed values; arrays
/// emptied, cut, grown and retyped; tensors' dimensions, types and offsets changed; and the
/// hostile vocabularies of issue 30.
fn structure_variants(base: &GgufWriter) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut variant = |name: String, edit: &dyn Fn(&mut GgufWriter)| {
        let mut writer = base.clone();
        edit(&mut writer);
        out.push((name, writer.bytes()));
    };
    for (key, value) in &base.pairs {
        match value {
            Value::Array(items) => {
                let items = items.clone();
                variant(format!("{key} empty"), &|w| {
                    w.set(key, Value::Array(vec![]));
                });
                let half = items[..items.len() / 2].to_vec();
                variant(format!("{key} cut in half"), &|w| {
                    w.set(key, Value::Array(half.clone()));
                });
                let doubled: Vec<Value> = items.iter().chain(&items).cloned().collect();
                variant(format!("{key} doubled"), &|w| {
                    w.set(key, Value::Array(doubled.clone()));
                });
                let numbers = vec![Value::U64(u64::MAX); items.len()];
                variant(format!("{key} as u64s"), &|w| {
                    w.set(key, Value::Array(numbers.clone()));
                });
                variant(format!("{key} as a string"), &|w| {
                    w.set(key, Value::String("x".into()));
                });
            }
            Value::String(_) => {
                variant(format!("{key} = 2^63"), &|w| {
                    w.set(key, Value::U64(1 << 63));
                });
                variant(format!("{key} empty"), &|w| {
                    w.set(key, Value::String(String::new()));
                });
            }
            _ => {
                for &huge in HUGE {
                    variant(format!("{key} = {huge}"), &|w| {
                        w.set(key, Value::U64(huge));
                    });
                }
                variant(format!("{key} = -1"), &|w| {
                    w.set(key, Value::I64(-1));
                });
                variant(format!("{key} = NaN"), &|w| {
                    w.set(key, Value::F32(f32::NAN));
                });
            }
        }
    }
    for t in 0..base.tensors.len().min(8) {
        let name = base.tensors[t].name.clone();
        for &huge in &HUGE[..4] {
            variant(format!("{name} dims [{huge}, ...]"), &|w| {
                w.tensors[t].dims[0] = huge;
            });
        }
        for tag in [39, 0, 12] {
            variant(format!("{name} type {tag}"), &|w| w.tensors[t].tag = tag);
        }
        for shift in [1, 32, 1 << 40, u64::MAX - 31] {
            variant(format!("{name} offset + {shift}"), &|w| {
                w.tensors[t].offset_shift = shift;
            });
        }
        variant(format!("{name} named twice"), &|w| {
            let other = (t + 1) % w.tensors.len();
            w.tensors[other].name = w.tensors[t].name.clone();
        });
    }
    if base.get("tokenizer.ggml.tokens").is_some() {
        variant("prefix-chain vocabulary".into(), &|w| {
            hostile_vocabulary(w, (1..=2600).map(|n| "a".repeat(n)).collect())
        });
        variant("a 1,000,000-character token".into(), &|w| {
            let mut tokens = vec!["a".to_string(), "b".to_string(), "ab".to_string()];
            tokens.push("ab".repeat(500_000));
            hostile_vocabulary(w, tokens)
        });
    }
    out
}

/// Replaces the vocabulary with a SentencePiece one of `pieces` after `<unk>`, `<s>`, `</s>`.
fn hostile_vocabulary(w: &mut GgufWriter, pieces: Vec<String>) {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    tokens.extend(pieces);
    let n = tokens.len();
    w.set("tokenizer.ggml.model", Value::String("llama".into()));
    w.set(
        "tokenizer.ggml.tokens",
        Value::Array(tokens.into_iter().map(Value::String).collect()),
    );
    w.set(
        "tokenizer.ggml.scores",
        Value::Array((0..n).map(|i| Value::F32(-(i as f32))).collect()),
    );
    w.set(
        "tokenizer.ggml.token_type",
        Value::Array(vec![Value::I32(1); n]),
    );
}

/// A deterministic xorshift generator: the same variants on every run.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-malformed-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the test `name` of this binary again, in a child process limited to
/// [`ADDRESS_SPACE`] bytes of address space and [`TIME_LIMIT`], and fails unless it passes:
/// an abort, a signal or a timeout is a failure with the child's output.
fn run_in_limited_child(name: &str) {
    // Output goes to a file: a pipe nobody reads while the child runs would fill and stop it.
    let log_path = scratch("child").join("output.txt");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    limits::limit_address_space(&mut command, ADDRESS_SPACE);
    let mut child = command.spawn().unwrap();
    let status = limits::wait_at_most(&mut child, TIME_LIMIT);
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    std::fs::remove_dir_all(log_path.parent().unwrap()).unwrap();
    let tail: String = text
        .chars()
        .rev()
        .take(4000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    match status {
        Some(status) if status.success() => println!("{tail}"),
        Some(status) => panic!("the variants' process ended with {status}:\n{tail}"),
        None => panic!("the variants' process ran past {TIME_LIMIT:?}:\n{tail}"),
    }
}
