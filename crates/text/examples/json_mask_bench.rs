//! Times JSON mode's per-token work on a real vocabulary: building the trie once, and computing
//! the mask of a recognizer state (what a constrained choice pays on each step the state is not
//! cached).
//!
//! `cargo run --release -p sluice-text --example json_mask_bench -- <model dir>`

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sluice_text::constraint::{
    JsonRecognizer, JsonTokenMasks, Recognizer, Schema, SchemaRecognizer, TokenMasks, TokenTrie,
};
use sluice_text::Tokenizer;

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: json_mask_bench <model dir>"),
    );
    let tokenizer = Tokenizer::from_dir(&dir).expect("a tokenizer");
    let started = Instant::now();
    let bytes = tokenizer.token_bytes();
    let trie = Arc::new(TokenTrie::new(bytes.clone(), tokenizer.vocab_size()));
    let masks = JsonTokenMasks::json_object(Arc::clone(&trie));
    println!(
        "vocabulary {} tokens: token bytes + trie in {:.1} ms",
        tokenizer.vocab_size(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let prefixes: [(&str, &[u8]); 6] = [
        ("start", b""),
        ("after {", b"{"),
        ("in a key", b"{\"na"),
        ("after :", b"{\"name\":"),
        ("in a string value", b"{\"name\": \"Ad"),
        ("in a number", b"{\"age\": 93"),
    ];
    for (name, prefix) in prefixes {
        let state = JsonRecognizer::new().after(prefix).expect("a valid prefix");
        let started = Instant::now();
        let allowed = masks.allowed(&state);
        let first = started.elapsed();
        let started = Instant::now();
        let _ = masks.allowed(&state);
        let cached = started.elapsed();
        // The trie walk must find what trying every token finds.
        let brute = bytes
            .iter()
            .filter(|b| {
                b.as_ref()
                    .is_some_and(|b| !b.is_empty() && state.after(b).is_some())
            })
            .count();
        assert_eq!(allowed.len(), brute, "{name}");
        println!(
            "{name:>18}: {:>6} tokens allowed, mask {:>7.3} ms, cached {:>6.3} µs",
            allowed.len(),
            first.as_secs_f64() * 1e3,
            cached.as_secs_f64() * 1e6
        );
    }

    // The same positions under a schema (what a pydantic model sends).
    let schema = Schema::compile(&serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}}
        },
        "required": ["name", "age"]
    }))
    .expect("a supported schema");
    let schema_masks = TokenMasks::<SchemaRecognizer>::new(trie, Arc::new(schema));
    let schema = schema_masks.rules();
    let prefixes: [(&str, &[u8]); 4] = [
        ("after {", b"{"),
        ("in a key", b"{\"na"),
        ("in a string value", b"{\"name\": \"Ad"),
        ("in an integer", b"{\"age\": 93"),
    ];
    for (name, prefix) in prefixes {
        let state = SchemaRecognizer::new(schema)
            .after(schema, prefix)
            .expect("a valid prefix");
        let started = Instant::now();
        let allowed = schema_masks.allowed(&state);
        println!(
            "schema {name:>18}: {:>6} tokens allowed, mask {:>7.3} ms",
            allowed.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
