use std::collections::BTreeMap;

use sluice_gguf::{Metadata, Value};

use crate::{TextError, Tokenizer};

fn strings<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|s| Value::String(s.as_ref().to_string()))
            .collect(),
    )
}

fn metadata(pairs: Vec<(&str, Value)>) -> Metadata {
    Metadata::new(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// `base` with `changes` applied (a `None` value removes the key).
fn with(base: Vec<(&'static str, Value)>, changes: Vec<(&'static str, Option<Value>)>) -> Metadata {
    let mut pairs: BTreeMap<&str, Value> = base.into_iter().collect();
    for (key, value) in changes {
        match value {
            Some(value) => pairs.insert(key, value),
            None => pairs.remove(key),
        };
    }
    metadata(pairs.into_iter().collect())
}

/// GPT-2's printable character for `byte`.
fn byte_char(byte: u8) -> String {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    if printable(byte) {
        return char::from(byte).to_string();
    }
    let rank = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(256 + rank).unwrap().to_string()
}

const BPE_WORDS: &[&str] = &[
    "he", "ll", "hell", "hello", "Ġw", "or", "ld", "Ġwor", "Ġworld",
];
const BPE_MERGES: &[&str] = &[
    "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "l d", "Ġw or", "Ġwor ld",
];

/// A byte-level BPE vocabulary: the 256 byte characters, the merges of "hello world", then
/// `<|endoftext|>` (control, EOS) and `<|im_end|>` typed as a normal token, as some converted
/// files have it.
fn byte_level_bpe() -> Vec<(&'static str, Value)> {
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.extend(BPE_WORDS.iter().map(|w| w.to_string()));
    tokens.extend(["<|endoftext|>".to_string(), "<|im_end|>".to_string()]);
    let mut types = vec![Value::I32(1); tokens.len()];
    types[tokens.len() - 2] = Value::I32(3);
    vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("gpt-2".into())),
        (
            "tokenizer.ggml.eos_token_id",
            Value::U32(tokens.len() as u32 - 2),
        ),
        ("tokenizer.ggml.tokens", strings(&tokens)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.merges", strings(BPE_MERGES)),
    ]
}

const ENDOFTEXT: u32 = 256 + 9;
const IM_END: u32 = 256 + 10;

/// A SentencePiece vocabulary: `<unk>`, `<s>`, `</s>`, two byte pieces, then scored pieces.
fn sentencepiece(pieces: &[(&str, f32)]) -> Vec<(&'static str, Value)> {
    let mut tokens = vec!["<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>"];
    let mut scores = vec![0.0, 0.0, 0.0, 0.0, 0.0];
    let mut types = vec![2, 3, 3, 6, 6];
    for &(piece, score) in pieces {
        tokens.push(piece);
        scores.push(score);
        types.push(1);
    }
    vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(&tokens)),
        (
            "tokenizer.ggml.scores",
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
    ]
}

fn pieces(tokenizer: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| tokenizer.inner().id_to_token(id).unwrap())
        .collect()
}

#[test]
fn byte_level_bpe_merges_words_and_keeps_special_tokens_whole() {
    let tokenizer = Tokenizer::from_gguf(&metadata(byte_level_bpe())).unwrap();
    let ids = tokenizer.encode("hello world<|im_end|>", true).unwrap();
    assert_eq!(pieces(&tokenizer, &ids), ["hello", "Ġworld", "<|im_end|>"]);
    assert_eq!(
        tokenizer.decode(&ids, false).unwrap(),
        "hello world<|im_end|>"
    );
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), "hello world");
}

#[test]
fn chat_end_tokens_found_by_text_end_generation_with_eos() {
    let tokenizer = Tokenizer::from_gguf(&metadata(byte_level_bpe())).unwrap();
    assert_eq!(tokenizer.end_of_generation_ids(), [ENDOFTEXT, IM_END]);
    assert_eq!(tokenizer.eos_token_id(), Some(ENDOFTEXT));
    assert_eq!(tokenizer.eos_token(), Some("<|endoftext|>"));
}

#[test]
fn eot_and_eom_ids_end_generation_and_ids_outside_the_vocabulary_are_ignored() {
    let md = with(
        byte_level_bpe(),
        vec![
            ("tokenizer.ggml.eot_token_id", Some(Value::U32(300))),
            ("tokenizer.ggml.eom_token_id", Some(Value::U32(104))),
        ],
    );
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(tokenizer.end_of_generation_ids(), [104, ENDOFTEXT, IM_END]);
}

#[test]
fn gpt_oss_end_is_not_end_of_generation_beside_return_and_call() {
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.extend(["<|end|>", "<|return|>", "<|call|>"].map(String::from));
    let md = with(
        byte_level_bpe(),
        vec![
            ("tokenizer.ggml.tokens", Some(strings(&tokens))),
            ("tokenizer.ggml.token_type", None),
            ("tokenizer.ggml.merges", Some(strings::<&str>(&[]))),
            ("tokenizer.ggml.eos_token_id", Some(Value::U32(257))),
        ],
    );
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(tokenizer.end_of_generation_ids(), [257, 258]);
}

#[test]
fn llama3_pre_tokenizer_adds_bos_unless_the_file_says_not_to() {
    let llama3 = |add_bos: Option<bool>| {
        let md = with(
            byte_level_bpe(),
            vec![
                (
                    "tokenizer.ggml.pre",
                    Some(Value::String("llama-bpe".into())),
                ),
                ("tokenizer.ggml.bos_token_id", Some(Value::U32(ENDOFTEXT))),
                ("tokenizer.ggml.add_bos_token", add_bos.map(Value::Bool)),
            ],
        );
        Tokenizer::from_gguf(&md)
            .unwrap()
            .encode("hello", true)
            .unwrap()
    };
    assert_eq!(llama3(None), [ENDOFTEXT, 259]);
    assert_eq!(llama3(Some(false)), [259]);
    let gpt2 = Tokenizer::from_gguf(&metadata(byte_level_bpe())).unwrap();
    assert_eq!(gpt2.encode("hello", true).unwrap(), [259]);
}

#[test]
fn add_eos_token_appends_eos_and_add_special_tokens_false_adds_nothing() {
    let md = with(
        byte_level_bpe(),
        vec![("tokenizer.ggml.add_eos_token", Some(Value::Bool(true)))],
    );
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(tokenizer.encode("hello", true).unwrap(), [259, ENDOFTEXT]);
    assert_eq!(tokenizer.encode("hello", false).unwrap(), [259]);
}

#[test]
fn add_bos_without_a_bos_token_is_an_error() {
    let md = with(
        byte_level_bpe(),
        vec![("tokenizer.ggml.add_bos_token", Some(Value::Bool(true)))],
    );
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(err.to_string().contains("no bos token"), "{err}");
}

#[test]
fn unknown_pre_tokenizer_is_an_error_naming_it() {
    let md = with(
        byte_level_bpe(),
        vec![(
            "tokenizer.ggml.pre",
            Some(Value::String("brand-new-bpe".into())),
        )],
    );
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(
        matches!(&err, TextError::UnsupportedGgufTokenizer { key: "tokenizer.ggml.pre", value, .. } if value == "brand-new-bpe"),
        "{err}"
    );
    assert!(err.to_string().contains("`brand-new-bpe`"), "{err}");
}

#[test]
fn unknown_tokenizer_model_is_an_error_naming_it() {
    let md = with(
        byte_level_bpe(),
        vec![("tokenizer.ggml.model", Some(Value::String("bert".into())))],
    );
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(
        err.to_string().contains("tokenizer.ggml.model = `bert`"),
        "{err}"
    );
}

#[test]
fn missing_tokens_name_the_key() {
    let md = with(byte_level_bpe(), vec![("tokenizer.ggml.tokens", None)]);
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.tokens"), "{err}");
}

#[test]
fn duplicate_token_texts_are_rejected() {
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.push("a".into());
    let md = with(
        byte_level_bpe(),
        vec![
            ("tokenizer.ggml.tokens", Some(strings(&tokens))),
            ("tokenizer.ggml.token_type", None),
            ("tokenizer.ggml.merges", Some(strings::<&str>(&[]))),
            ("tokenizer.ggml.eos_token_id", None),
        ],
    );
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(err.to_string().contains("both `a`"), "{err}");
}

#[test]
fn short_token_type_array_is_rejected() {
    let md = with(
        byte_level_bpe(),
        vec![(
            "tokenizer.ggml.token_type",
            Some(Value::Array(vec![Value::I32(1)])),
        )],
    );
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(
        err.to_string()
            .contains("tokenizer.ggml.token_type has 1 entries"),
        "{err}"
    );
}

#[test]
fn sentencepiece_merges_the_highest_scoring_pair_first() {
    let vocab = |ab: f32, bc: f32| {
        sentencepiece(&[
            ("▁", -9.0),
            ("a", -9.0),
            ("b", -9.0),
            ("c", -9.0),
            ("ab", ab),
            ("bc", bc),
        ])
    };
    let ab_first = Tokenizer::from_gguf(&metadata(vocab(-1.0, -2.0))).unwrap();
    let ids = ab_first.encode("abc", false).unwrap();
    assert_eq!(pieces(&ab_first, &ids), ["▁", "ab", "c"]);
    let bc_first = Tokenizer::from_gguf(&metadata(vocab(-2.0, -1.0))).unwrap();
    let ids = bc_first.encode("abc", false).unwrap();
    assert_eq!(pieces(&bc_first, &ids), ["▁", "a", "bc"]);
}

#[test]
fn sentencepiece_prefixes_one_space_and_falls_back_to_bytes() {
    let md = metadata(sentencepiece(&[
        ("▁", -1.0),
        ("h", -2.0),
        ("i", -3.0),
        ("▁h", -4.0),
        ("▁hi", -5.0),
    ]));
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    let ids = tokenizer.encode(" hi é", true).unwrap();
    // BOS (SentencePiece adds it by default), then "▁" + " hi" + " é" with spaces as "▁".
    assert_eq!(
        pieces(&tokenizer, &ids),
        ["<s>", "▁", "▁hi", "▁", "<0xC3>", "<0xA9>"]
    );
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), " hi é");
    assert_eq!(tokenizer.end_of_generation_ids(), [2]);
}

#[test]
fn sentencepiece_without_space_prefix_keeps_text_as_is() {
    let md = with(
        sentencepiece(&[
            ("▁", -1.0),
            ("h", -2.0),
            ("i", -3.0),
            ("▁h", -4.0),
            ("▁hi", -5.0),
        ]),
        vec![("tokenizer.ggml.add_space_prefix", Some(Value::Bool(false)))],
    );
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    let ids = tokenizer.encode("hi hi", false).unwrap();
    assert_eq!(pieces(&tokenizer, &ids), ["h", "i", "▁hi"]);
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), "hi hi");
}

#[test]
fn chat_template_and_special_token_texts_come_from_the_metadata() {
    let md = with(
        byte_level_bpe(),
        vec![(
            "tokenizer.chat_template",
            Some(Value::String(
                "{{ messages[0]['content'] }}{{ eos_token }}".into(),
            )),
        )],
    );
    let tokenizer = Tokenizer::from_gguf(&md).unwrap();
    let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
    let prompt = tokenizer
        .chat_template()
        .unwrap()
        .render(&messages, false, None)
        .unwrap();
    assert_eq!(prompt, "hi<|endoftext|>");
}
