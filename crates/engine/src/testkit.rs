//! What the crate's tests share: the fixture models and a word-level tokenizer.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use sluice_text::Tokenizer;

/// The tiny random-weight checkpoint `fixtures/models/{name}` (written by
/// `scripts/make_fixtures.py` with transformers).
pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

/// A word-level tokenizer over `w0 .. w{vocab - 1}`; decoding joins words with spaces.
pub(crate) fn word_tokenizer(vocab: usize) -> Arc<Tokenizer> {
    let vocab: Vec<String> = (0..vocab).map(|i| format!("\"w{i}\": {i}")).collect();
    let json = format!(
        r#"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
        "normalizer":null,"pre_tokenizer":{{"type":"Whitespace"}},"post_processor":null,
        "decoder":null,"model":{{"type":"WordLevel","vocab":{{{}}},"unk_token":"w0"}}}}"#,
        vocab.join(",")
    );
    let inner = tokenizers::Tokenizer::from_str(&json).expect("valid tokenizer json");
    Arc::new(Tokenizer::new(inner, None, None, None, None))
}
