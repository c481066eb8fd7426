//! Loads the tokenizers of the tiny fixture models under `fixtures/models/` (written by the
//! model fixture script) when they exist: each must encode and decode text losslessly, stream
//! it through the incremental decoder unchanged, and render its chat template if it has one.
//! Without the fixtures the test prints a note and passes; the crate's own tests use
//! `tests/data/`.

use serde_json::json;
use sluice_text::{IncrementalDecoder, Tokenizer};
use std::path::Path;
use std::sync::Arc;

#[test]
fn fixture_model_tokenizers_round_trip_stream_and_render() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    let Ok(entries) = std::fs::read_dir(&root) else {
        eprintln!("note: {} not found; skipping", root.display());
        return;
    };
    let text = "Hello, world! Café 日本語 🙂 and\n  indented code(x) = 42;";
    let mut checked = 0;
    for entry in entries {
        let dir = entry.unwrap().path();
        if !dir.join("tokenizer.json").exists() {
            continue;
        }
        let tokenizer = Arc::new(
            Tokenizer::from_dir(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display())),
        );
        let ids = tokenizer.encode(text, false).unwrap();
        assert_eq!(
            tokenizer.decode(&ids, true).unwrap(),
            text,
            "{}",
            dir.display()
        );

        let mut decoder = IncrementalDecoder::new(tokenizer.clone());
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(&decoder.push(id).unwrap());
        }
        streamed.push_str(&decoder.finish());
        assert_eq!(streamed, text, "{}", dir.display());

        assert!(tokenizer.eos_token_id().is_some(), "{}", dir.display());
        if let Some(template) = tokenizer.chat_template() {
            let messages = json!([{"role": "user", "content": "What is 2+2?"}]);
            let prompt = template.render(&messages, true, None).unwrap();
            assert!(
                prompt.contains("What is 2+2?"),
                "{}: {prompt:?}",
                dir.display()
            );
        }
        checked += 1;
    }
    eprintln!("checked {checked} fixture tokenizers");
}
