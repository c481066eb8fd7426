//! Any bytes as a GGUF file, through what loading a model reads from it before the weights:
//! the reader (header, metadata, tensor directory, data ranges), the metadata-to-config step
//! and the tokenizer built from the metadata. Every input must be an `Err` or a value: a
//! panic, an abort (a huge allocation) or a hang is a finding. Run with a memory limit, e.g.
//! `cargo +nightly fuzz run gguf_load fuzz/corpus/gguf_load -- -rss_limit_mb=4096 -timeout=10`.

#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use sluice_gguf::GgufModel;
use sluice_model::gguf::config::config_from_gguf;
use sluice_text::Tokenizer;

fuzz_target!(|data: &[u8]| {
    // The reader maps a file, so the input is one (a file per fuzzing process).
    thread_local! {
        static PATH: PathBuf = std::env::temp_dir()
            .join(format!("sluice-fuzz-gguf-{}.gguf", std::process::id()));
    }
    PATH.with(|path| {
        std::fs::write(path, data).expect("write the input");
        if let Ok(header) = GgufModel::open_header(path) {
            let _ = config_from_gguf(&header);
        }
        if let Ok(model) = GgufModel::open(path) {
            let _ = config_from_gguf(&model);
            if let Ok(tokenizer) = Tokenizer::from_gguf(model.metadata()) {
                let _ = tokenizer.encode("Hello, wörld! 12345 <|im_end|>", true);
            }
        }
    });
});
