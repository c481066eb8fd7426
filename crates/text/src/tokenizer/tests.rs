use super::*;
use serde_json::json;

pub(crate) fn test_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A scratch copy of a test tokenizer directory, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn copy_of(fixture: &str, test_name: &str) -> ScratchDir {
        let dir =
            std::env::temp_dir().join(format!("sluice-text-{}-{test_name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["tokenizer.json", "tokenizer_config.json"] {
            std::fs::copy(test_data(fixture).join(file), dir.join(file)).unwrap();
        }
        ScratchDir(dir)
    }

    fn write(&self, file: &str, contents: &str) {
        std::fs::write(self.0.join(file), contents).unwrap();
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Deserialize)]
struct ExpectedEncoding {
    text: String,
    ids: Vec<u32>,
    ids_with_special: Vec<u32>,
    decoded: String,
}

fn assert_matches_python(fixture: &str) {
    let tokenizer = Tokenizer::from_dir(&test_data(fixture)).unwrap();
    let expected: Vec<ExpectedEncoding> = serde_json::from_slice(
        &std::fs::read(test_data(fixture).join("expected_encodings.json")).unwrap(),
    )
    .unwrap();
    assert!(!expected.is_empty());
    for case in expected {
        assert_eq!(
            tokenizer.encode(&case.text, false).unwrap(),
            case.ids,
            "{:?}",
            case.text
        );
        assert_eq!(
            tokenizer.encode(&case.text, true).unwrap(),
            case.ids_with_special,
            "{:?}",
            case.text
        );
        assert_eq!(tokenizer.decode(&case.ids, true).unwrap(), case.decoded);
    }
}

#[test]
fn byte_level_bpe_with_lookahead_split_regex_encodes_like_python_tokenizers() {
    // The split regex has `\s+(?!\S)`: this only works with the fancy-regex backend.
    assert_matches_python("byte_bpe");
}

#[test]
fn sentencepiece_style_byte_fallback_tokenizer_encodes_like_python_tokenizers() {
    assert_matches_python("sentencepiece");
}

#[test]
fn special_tokens_are_read_as_strings_or_content_objects() {
    let bpe = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    assert_eq!(bpe.bos_token(), Some("<|begin_of_text|>"));
    assert_eq!(bpe.eos_token(), Some("<|im_end|>"));
    assert_eq!(bpe.pad_token(), None);
    assert_eq!(bpe.eos_token_id(), bpe.token_to_id("<|im_end|>"));
    assert!(bpe.eos_token_id().is_some());

    let sp = Tokenizer::from_dir(&test_data("sentencepiece")).unwrap();
    assert_eq!(sp.bos_token(), Some("<s>"));
    assert_eq!(sp.eos_token(), Some("</s>"));
    assert_eq!(sp.bos_token_id(), Some(1));
    assert_eq!(sp.eos_token_id(), Some(2));
}

#[test]
fn chat_template_string_in_config_is_loaded() {
    let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    let template = tokenizer
        .chat_template()
        .expect("fixture has a ChatML template");
    let text = template
        .render(&json!([{"role": "user", "content": "hi"}]), true, None)
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn chat_template_list_prefers_the_one_named_default_and_sees_special_tokens() {
    let tokenizer = Tokenizer::from_dir(&test_data("sentencepiece")).unwrap();
    let template = tokenizer.chat_template().unwrap();
    let messages = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}
    ]);
    assert_eq!(
        template.render(&messages, false, None).unwrap(),
        "<s>[INST] hi [/INST] hello</s>"
    );
}

#[test]
fn chat_template_jinja_file_wins_over_the_config() {
    let dir = ScratchDir::copy_of("byte_bpe", "jinja-wins");
    dir.write("chat_template.jinja", "{{ bos_token }}from the jinja file");
    let tokenizer = Tokenizer::from_dir(&dir.0).unwrap();
    let text = tokenizer
        .chat_template()
        .unwrap()
        .render(&json!([]), true, None)
        .unwrap();
    assert_eq!(text, "<|begin_of_text|>from the jinja file");
}

#[test]
fn missing_tokenizer_json_is_an_error_naming_the_file() {
    let dir = ScratchDir::copy_of("byte_bpe", "missing-json");
    std::fs::remove_file(dir.0.join("tokenizer.json")).unwrap();
    let err = Tokenizer::from_dir(&dir.0).unwrap_err();
    assert!(matches!(err, TextError::Io { ref path, .. } if path.ends_with("tokenizer.json")));
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    let dir = ScratchDir::copy_of("byte_bpe", "malformed");
    dir.write("tokenizer_config.json", "{\"bos_token\": 5}");
    let err = Tokenizer::from_dir(&dir.0).unwrap_err();
    assert!(err.to_string().contains("tokenizer_config.json"), "{err}");

    dir.write("tokenizer_config.json", "{}");
    dir.write("tokenizer.json", "{\"model\": ");
    let err = Tokenizer::from_dir(&dir.0).unwrap_err();
    assert!(
        matches!(err, TextError::InvalidFile { ref path, .. } if path.ends_with("tokenizer.json"))
    );
}

#[test]
fn missing_tokenizer_config_means_no_special_tokens_and_no_template() {
    let dir = ScratchDir::copy_of("byte_bpe", "no-config");
    std::fs::remove_file(dir.0.join("tokenizer_config.json")).unwrap();
    let tokenizer = Tokenizer::from_dir(&dir.0).unwrap();
    assert_eq!(tokenizer.eos_token(), None);
    assert!(tokenizer.chat_template().is_none());
    assert!(tokenizer.chat_template_error().is_none());
}

#[test]
fn a_template_that_does_not_compile_leaves_the_tokenizer_usable() {
    let dir = ScratchDir::copy_of("byte_bpe", "bad-template");
    dir.write(
        "tokenizer_config.json",
        r#"{"eos_token": "<|im_end|>", "chat_template": "{% for %}"}"#,
    );
    let tokenizer = Tokenizer::from_dir(&dir.0).unwrap();
    assert!(tokenizer.chat_template().is_none());
    assert!(tokenizer.chat_template_error().unwrap().contains("syntax"));
    assert!(!tokenizer.encode("still works", false).unwrap().is_empty());
}

#[test]
fn decode_skips_special_tokens_only_when_asked() {
    let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    let ids = tokenizer
        .encode("<|im_start|>user\nhi<|im_end|>", false)
        .unwrap();
    assert_eq!(ids[0], tokenizer.token_to_id("<|im_start|>").unwrap());
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), "user\nhi");
    assert_eq!(
        tokenizer.decode(&ids, false).unwrap(),
        "<|im_start|>user\nhi<|im_end|>"
    );
}

#[test]
fn out_of_vocabulary_ids_are_errors_and_have_no_token_string() {
    let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    let past_end = tokenizer.vocab_size() as u32;
    assert!(matches!(
        tokenizer.decode(&[1, past_end], true),
        Err(TextError::Tokenizer(_))
    ));
    assert_eq!(tokenizer.token_str(past_end), None);
}

#[test]
fn token_str_is_the_text_of_one_token_special_tokens_included() {
    let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    let hello = tokenizer.encode(" hello", false).unwrap();
    let joined: String = hello
        .iter()
        .map(|&id| tokenizer.token_str(id).unwrap())
        .collect();
    assert_eq!(joined, " hello");
    let eos = tokenizer.eos_token_id().unwrap();
    assert_eq!(tokenizer.token_str(eos).as_deref(), Some("<|im_end|>"));
}

#[test]
fn tokenizer_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tokenizer>();
}

#[test]
fn debug_output_is_a_summary_not_the_vocabulary() {
    let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
    let debug = format!("{tokenizer:?}");
    assert!(debug.contains("vocab_size"), "{debug}");
    assert!(debug.len() < 400, "{debug}");
}
