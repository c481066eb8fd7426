//! Tokenizers built from GGUF metadata alone tokenize as the Hugging Face tokenizer and as
//! llama.cpp's `llama-tokenize` do, on a corpus of tricky text (whitespace runs, digits, CJK,
//! emoji, code, special tokens written in text, leading spaces).
//!
//! The vocab-only GGUF files and the expected ids under `fixtures/gguf-tokenizer/` come from
//! `scripts/make_gguf_tokenizer_fixtures.py`, which ran both references once. `bpe-wide.gguf`
//! is checked under every pre-tokenizer by swapping `tokenizer.ggml.pre` in memory, as the
//! script did on disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use sluice_gguf::{GgufModel, Metadata, Value};
use sluice_text::{IncrementalDecoder, Tokenizer};

#[derive(Deserialize)]
struct Fixture {
    corpus: Vec<String>,
    /// Keyed `file` or `file:pre`; per source (`hf`, `llama.cpp`), the ids of each text.
    expected: BTreeMap<String, BTreeMap<String, Vec<Vec<u32>>>>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn fixture() -> Fixture {
    let path = root().join("gguf-tokenizer/expected.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The metadata of `fixtures/gguf-tokenizer/{file}.gguf`, with `tokenizer.ggml.pre` replaced
/// when `pre` is given.
fn metadata(file: &str, pre: Option<&str>) -> Metadata {
    let model = GgufModel::open(&root().join(format!("gguf-tokenizer/{file}.gguf"))).unwrap();
    let source = model.metadata();
    let mut pairs: BTreeMap<String, Value> = source
        .keys()
        .map(|key| (key.to_string(), source.get(key).unwrap().clone()))
        .collect();
    if let Some(pre) = pre {
        pairs.insert("tokenizer.ggml.pre".into(), Value::String(pre.into()));
    }
    Metadata::new(pairs)
}

/// Encodes the corpus with the tokenizer of `key` (BOS/EOS as the file asks) and compares with
/// both references.
fn assert_matches_references(key: &str) {
    let fixture = fixture();
    let (file, pre) = match key.split_once(':') {
        Some((file, pre)) => (file, Some(pre)),
        None => (key, None),
    };
    let tokenizer = Tokenizer::from_gguf(&metadata(file, pre)).unwrap();
    let expected = &fixture.expected[key];
    for source in ["hf", "llama.cpp"] {
        let ids = &expected[source];
        assert_eq!(ids.len(), fixture.corpus.len());
        for (text, want) in fixture.corpus.iter().zip(ids) {
            let got = tokenizer.encode(text, true).unwrap();
            assert_eq!(&got, want, "{key} vs {source} on {text:?}");
        }
    }
}

#[test]
fn tiny_byte_level_bpe_matches_hugging_face_and_llama_cpp() {
    assert_matches_references("bpe-tiny");
}

#[test]
fn bundled_model_vocabulary_matches_hugging_face_and_llama_cpp() {
    assert_matches_references("kjv");
}

#[test]
fn sentencepiece_vocabulary_matches_hugging_face_and_llama_cpp() {
    assert_matches_references("spm");
}

#[test]
fn every_pre_tokenizer_matches_hugging_face_and_llama_cpp() {
    let fixture = fixture();
    let keys: Vec<&String> = fixture
        .expected
        .keys()
        .filter(|k| k.starts_with("bpe-wide:"))
        .collect();
    for pre in [
        "default",
        "gpt-2",
        "llama-bpe",
        "qwen2",
        "smollm",
        "tekken",
        "gpt-4o",
    ] {
        assert!(
            keys.iter().any(|k| k.ends_with(&format!(":{pre}"))),
            "{pre}"
        );
    }
    for key in keys {
        assert_matches_references(key);
    }
}

/// The GGUF files of the two bundled vocabularies give the same tokenizer as their
/// `tokenizer.json` directories: same ids, same decoded text, same rendered chat prompt.
#[test]
fn gguf_tokenizer_equals_its_tokenizer_json_directory() {
    let corpus = fixture().corpus;
    let messages = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "In the beginning?"},
    ]);
    for (file, dir) in [
        ("bpe-tiny", root().join("models/llama")),
        ("kjv", root().join("../models/sluice-kjv-mini")),
    ] {
        let from_gguf = Tokenizer::from_gguf(&metadata(file, None)).unwrap();
        let from_dir = Tokenizer::from_dir(&dir).unwrap();
        assert_eq!(from_gguf.vocab_size(), from_dir.vocab_size(), "{file}");
        for text in &corpus {
            let ids = from_dir.encode(text, false).unwrap();
            assert_eq!(
                from_gguf.encode(text, false).unwrap(),
                ids,
                "{file}: {text:?}"
            );
            for skip in [false, true] {
                assert_eq!(
                    from_gguf.decode(&ids, skip).unwrap(),
                    from_dir.decode(&ids, skip).unwrap(),
                    "{file}: {text:?}"
                );
            }
        }
        assert_eq!(from_gguf.token_bytes(), from_dir.token_bytes(), "{file}");
        assert_eq!(from_gguf.eos_token(), from_dir.eos_token(), "{file}");
        let render = |t: &Tokenizer| {
            t.chat_template()
                .unwrap()
                .render(&messages, true, None)
                .unwrap()
        };
        assert_eq!(render(&from_gguf), render(&from_dir), "{file}");
    }
}

#[test]
fn text_round_trips_through_every_gguf_tokenizer_and_the_incremental_decoder() {
    let corpus = fixture().corpus;
    for file in ["bpe-tiny", "kjv", "bpe-wide", "spm"] {
        let tokenizer = Arc::new(Tokenizer::from_gguf(&metadata(file, None)).unwrap());
        // SentencePiece adds a space in front of the text after a special token, so only
        // text without special tokens comes back unchanged there.
        let plain = corpus.iter().filter(|t| file != "spm" || !t.contains('<'));
        for text in plain {
            let ids = tokenizer.encode(text, false).unwrap();
            assert_eq!(&tokenizer.decode(&ids, false).unwrap(), text, "{file}");
            let mut decoder = IncrementalDecoder::new(Arc::clone(&tokenizer));
            let mut streamed = String::new();
            for &id in &ids {
                streamed.push_str(&decoder.push(id).unwrap());
            }
            streamed.push_str(&decoder.finish());
            // The stream leaves special tokens out.
            assert_eq!(
                streamed,
                tokenizer.decode(&ids, true).unwrap(),
                "{file} streamed"
            );
        }
    }
}

#[test]
fn end_of_generation_ids_include_the_chat_end_token() {
    let kjv = Tokenizer::from_gguf(&metadata("kjv", None)).unwrap();
    let im_end = kjv.token_to_id("<|im_end|>").unwrap();
    let endoftext = kjv.token_to_id("<|endoftext|>").unwrap();
    assert_eq!(kjv.end_of_generation_ids(), [endoftext, im_end]);

    let spm = Tokenizer::from_gguf(&metadata("spm", None)).unwrap();
    let eos = spm.token_to_id("</s>").unwrap();
    let im_end = spm.token_to_id("<|im_end|>").unwrap();
    assert_eq!(spm.eos_token_id(), Some(eos));
    assert_eq!(spm.end_of_generation_ids(), [eos, im_end]);
    assert_eq!(spm.bos_token(), Some("<s>"));
}
