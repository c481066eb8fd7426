use super::*;
use crate::tokenizer::tests::test_data;
use proptest::prelude::*;
use std::sync::OnceLock;

fn load(name: &str) -> Arc<Tokenizer> {
    Arc::new(Tokenizer::from_dir(&test_data(name)).unwrap())
}

fn byte_bpe() -> Arc<Tokenizer> {
    static TOKENIZER: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    TOKENIZER.get_or_init(|| load("byte_bpe")).clone()
}

fn sentencepiece() -> Arc<Tokenizer> {
    static TOKENIZER: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    TOKENIZER.get_or_init(|| load("sentencepiece")).clone()
}

/// Pushes every id, then finishes; returns each push's delta and the finish text.
fn stream(tokenizer: &Arc<Tokenizer>, ids: &[u32]) -> (Vec<String>, String) {
    let mut decoder = IncrementalDecoder::new(tokenizer.clone());
    let deltas = ids.iter().map(|&id| decoder.push(id).unwrap()).collect();
    (deltas, decoder.finish())
}

#[test]
fn emoji_spread_over_byte_fallback_tokens_is_held_until_complete() {
    let tokenizer = sentencepiece();
    let ids = tokenizer.encode("a🙂", false).unwrap();
    let bytes: Vec<&u32> = ids
        .iter()
        .filter(|&&id| {
            tokenizer
                .inner()
                .id_to_token(id)
                .unwrap()
                .starts_with("<0x")
        })
        .collect();
    assert_eq!(
        bytes.len(),
        4,
        "🙂 should fall back to its 4 UTF-8 bytes: {ids:?}"
    );
    let (deltas, rest) = stream(&tokenizer, &ids);
    let last = deltas.len() - 1;
    assert!(
        deltas[last - 3..last].iter().all(String::is_empty),
        "{deltas:?}"
    );
    assert_eq!(deltas[last], "🙂");
    assert_eq!(rest, "");
}

#[test]
fn sentencepiece_words_keep_the_spaces_between_them() {
    let tokenizer = sentencepiece();
    let ids = tokenizer.encode("the quick brown fox", false).unwrap();
    let (deltas, rest) = stream(&tokenizer, &ids);
    assert_eq!(deltas.concat() + &rest, "the quick brown fox");
    assert_eq!(
        deltas.iter().filter(|d| d.starts_with(' ')).count(),
        3,
        "{deltas:?}"
    );
}

#[test]
fn context_tokens_give_the_first_output_token_its_leading_space() {
    let tokenizer = sentencepiece();
    let prompt = tokenizer.encode("Hello", false).unwrap();
    let both = tokenizer.encode("Hello world", false).unwrap();
    assert_eq!(both[..prompt.len()], prompt[..]);
    let mut decoder = IncrementalDecoder::with_context(tokenizer.clone(), &prompt);
    let text: String = both[prompt.len()..]
        .iter()
        .map(|&id| decoder.push(id).unwrap())
        .collect();
    assert_eq!(text + &decoder.finish(), " world");
}

#[test]
fn finish_releases_an_incomplete_character_as_replacement_character() {
    let tokenizer = byte_bpe();
    let e_acute_first_byte = tokenizer.token_to_id("Ã").unwrap(); // byte 0xC3
    let ids = [tokenizer.encode("x", false).unwrap()[0], e_acute_first_byte];
    let (deltas, rest) = stream(&tokenizer, &ids);
    assert_eq!(deltas, ["x", ""]);
    assert_eq!(rest, "\u{FFFD}");
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), "x\u{FFFD}");
}

#[test]
fn special_tokens_produce_no_text() {
    let tokenizer = byte_bpe();
    let ids = tokenizer.encode("hi<|im_end|>", false).unwrap();
    let (deltas, rest) = stream(&tokenizer, &ids);
    assert_eq!(deltas.last().map(String::as_str), Some(""));
    assert_eq!(deltas.concat() + &rest, "hi");
}

#[test]
fn an_out_of_vocabulary_id_is_an_error_and_the_decoder_carries_on() {
    let tokenizer = byte_bpe();
    let mut decoder = IncrementalDecoder::new(tokenizer.clone());
    assert_eq!(
        decoder.push(tokenizer.token_to_id("a").unwrap()).unwrap(),
        "a"
    );
    assert!(decoder.push(tokenizer.vocab_size() as u32 + 7).is_err());
    assert_eq!(
        decoder.push(tokenizer.token_to_id("b").unwrap()).unwrap(),
        "b"
    );
}

const TEXT_CHARS: &str = "[a-zA-Z .,'éñüç日本語中文テ🙂🚀👍🏽\n]{0,40}";

fn special_ids(tokenizer: &Tokenizer, names: &[&str]) -> Vec<u32> {
    names
        .iter()
        .map(|n| tokenizer.token_to_id(n).unwrap())
        .collect()
}

/// Inserts each of `specials` (by index into `ids`) to model a model emitting special tokens.
fn with_specials(mut ids: Vec<u32>, specials: &[(usize, u32)]) -> Vec<u32> {
    for &(at, id) in specials {
        ids.insert(at % (ids.len() + 1), id);
    }
    ids
}

fn check_stream(tokenizer: &Arc<Tokenizer>, ids: &[u32]) -> Result<(), TestCaseError> {
    let (deltas, rest) = stream(tokenizer, ids);
    let full = tokenizer.decode(ids, true).unwrap();
    prop_assert_eq!(deltas.concat() + &rest, full.clone());
    if !full.contains('\u{FFFD}') {
        // Valid text never streams a replacement character: no half characters.
        prop_assert!(
            !deltas.iter().any(|d| d.contains('\u{FFFD}')),
            "{:?}",
            deltas
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn byte_level_stream_of_encoded_text_equals_full_decode(
        text in TEXT_CHARS,
        specials in proptest::collection::vec((0usize..64, 0usize..4), 0..3),
    ) {
        let tokenizer = byte_bpe();
        let names = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"];
        let special = special_ids(&tokenizer, &names);
        let specials: Vec<(usize, u32)> = specials.iter().map(|&(at, i)| (at, special[i])).collect();
        let ids = with_specials(tokenizer.encode(&text, false).unwrap(), &specials);
        check_stream(&tokenizer, &ids)?;
        prop_assert_eq!(tokenizer.decode(&ids, true).unwrap(), text);
    }

    #[test]
    fn byte_level_stream_of_arbitrary_ids_equals_full_decode(
        raw in proptest::collection::vec(0u32..100_000, 0..40),
    ) {
        // Any id sequence, including byte tokens that never form valid UTF-8.
        let tokenizer = byte_bpe();
        let vocab = tokenizer.vocab_size() as u32;
        let ids: Vec<u32> = raw.iter().map(|id| id % vocab).collect();
        check_stream(&tokenizer, &ids)?;
    }

    #[test]
    fn sentencepiece_stream_of_encoded_text_equals_full_decode(
        text in TEXT_CHARS,
        specials in proptest::collection::vec((0usize..64, 0usize..3), 0..3),
    ) {
        let tokenizer = sentencepiece();
        let special = special_ids(&tokenizer, &["<unk>", "<s>", "</s>"]);
        let specials: Vec<(usize, u32)> = specials.iter().map(|&(at, i)| (at, special[i])).collect();
        let ids = with_specials(tokenizer.encode(&text, false).unwrap(), &specials);
        check_stream(&tokenizer, &ids)?;
    }

    #[test]
    fn sentencepiece_stream_of_concatenated_pieces_equals_full_decode(
        pieces in proptest::collection::vec(TEXT_CHARS, 0..6),
    ) {
        // Tokens a model may emit in an order the tokenizer itself would not produce.
        let tokenizer = sentencepiece();
        let ids: Vec<u32> = pieces
            .iter()
            .flat_map(|piece| tokenizer.encode(piece, false).unwrap())
            .collect();
        check_stream(&tokenizer, &ids)?;
    }
}

proptest! {
    #[test]
    fn stream_after_context_equals_the_full_decode_minus_the_contexts_text(
        context_text in "[a-zA-Z .éñ日🙂]{1,20}",
        output_text in TEXT_CHARS,
        use_sentencepiece in any::<bool>(),
    ) {
        let tokenizer = if use_sentencepiece { sentencepiece() } else { byte_bpe() };
        let context = tokenizer.encode(&context_text, false).unwrap();
        let output = tokenizer.encode(&output_text, false).unwrap();
        let mut decoder = IncrementalDecoder::with_context(tokenizer.clone(), &context);
        let mut streamed = String::new();
        for &id in &output {
            let delta = decoder.push(id).unwrap();
            prop_assert!(!delta.contains('\u{FFFD}'), "{:?}", delta);
            streamed.push_str(&delta);
        }
        streamed.push_str(&decoder.finish());
        let whole: Vec<u32> = context.iter().chain(&output).copied().collect();
        let full = tokenizer.decode(&whole, true).unwrap();
        let context_decoded = tokenizer.decode(&context, true).unwrap();
        prop_assert_eq!(Some(streamed.as_str()), full.strip_prefix(context_decoded.as_str()));
    }
}

/// A kept special token streams as its text between the text around it; other special tokens
/// stay skipped; the whole equals decoding the pieces on either side with the marker between.
#[test]
fn kept_special_tokens_are_written_as_their_text() {
    for tokenizer in [byte_bpe(), sentencepiece()] {
        let specials: Vec<u32> = ["<|im_end|>", "<|end_of_text|>", "</s>", "<s>"]
            .iter()
            .filter_map(|t| tokenizer.token_to_id(t))
            .collect();
        let (marker, other) = (specials[0], specials[1]);
        let before = tokenizer.encode("Call it now", false).unwrap();
        let after = tokenizer.encode(" {\"a\": 1}", false).unwrap();
        let mut ids = before.clone();
        ids.push(marker);
        ids.push(other);
        ids.extend(&after);
        let mut decoder = IncrementalDecoder::new(tokenizer.clone());
        decoder.keep_special(&[marker]);
        let mut text: String = ids.iter().map(|&id| decoder.push(id).unwrap()).collect();
        text.push_str(&decoder.finish());
        let expected = format!(
            "{}{}{}",
            tokenizer.decode(&before, true).unwrap(),
            tokenizer.decode(&[marker], false).unwrap(),
            tokenizer.decode(&after, true).unwrap()
        );
        assert_eq!(text, expected);
        // Not kept: skipped, as before.
        let (deltas, rest) = stream(&tokenizer, &ids);
        assert!(!(deltas.concat() + &rest).contains(&tokenizer.decode(&[marker], false).unwrap()));
    }
}
