//! Each token's bytes as it appears in generated text, for constrained decoding, which must
//! know what a token would add to the output before it is sampled.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::Tokenizer;

impl Tokenizer {
    /// Token `id`'s bytes for every id below [`Tokenizer::vocab_size`], for constrained
    /// decoding; `None` for special tokens and for a vocabulary entry that cannot be mapped
    /// back to bytes.
    ///
    /// Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, SmolLM) write each byte as one
    /// printable character; they are mapped back through that table. Other vocabularies are
    /// SentencePiece-style: `▁` is a space and `<0xNN>` is the byte `NN`. An added token that
    /// is not special (Qwen's `<tool_call>`, `<think>`) stands for its decoded text (its
    /// content goes through the decoder too: an added `aĊb` in a byte-level vocabulary decodes
    /// with a raw newline), so a constraint that expects that text accepts the token the model
    /// was trained to write. Special tokens never appear in constrained output.
    pub fn token_bytes(&self) -> Vec<Option<Vec<u8>>> {
        let special: std::collections::HashSet<u32> = (self.inner().get_added_tokens_decoder())
            .iter()
            .filter(|(_, token)| token.special)
            .map(|(&id, _)| id)
            .collect();
        (0..self.vocab_size() as u32)
            .map(|id| {
                if special.contains(&id) {
                    None
                } else if self.is_added(id) {
                    self.token_str(id)
                        .filter(|text| !text.is_empty())
                        .map(String::into_bytes)
                } else {
                    self.piece_bytes(id)
                }
            })
            .collect()
    }

    /// The bytes token `id` stands for, special tokens included (as their text): what OpenAI's
    /// logprobs `bytes` field reports, which differs from the token's text when the token holds
    /// part of a multi-byte character. `None` for an id outside the vocabulary.
    pub fn bytes_of(&self, id: u32) -> Option<Vec<u8>> {
        self.inner().id_to_token(id)?;
        if self.is_added(id) {
            self.token_str(id).map(String::into_bytes)
        } else {
            self.piece_bytes(id)
        }
    }

    fn is_added(&self, id: u32) -> bool {
        let added = self.inner().get_added_vocabulary().get_vocab();
        self.inner()
            .id_to_token(id)
            .is_some_and(|content| added.get(&content) == Some(&id))
    }

    /// The bytes of a vocabulary (not added) token.
    fn piece_bytes(&self, id: u32) -> Option<Vec<u8>> {
        let piece = self.inner().id_to_token(id)?;
        if self.is_byte_level() {
            let from_char = byte_level_bytes();
            piece.chars().map(|c| from_char.get(&c).copied()).collect()
        } else {
            Some(sentencepiece_bytes(&piece))
        }
    }
}

/// The byte each character of a byte-level BPE vocabulary stands for (the inverse of GPT-2's
/// `bytes_to_unicode`): printable Latin-1 bytes stand for themselves, the other 68 take the
/// code points from U+0100 on.
fn byte_level_bytes() -> &'static HashMap<char, u8> {
    static TABLE: OnceLock<HashMap<char, u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut next = 256u32;
        (0..=255u8)
            .map(|byte| {
                let printable = matches!(byte, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
                let c = if printable {
                    char::from(byte)
                } else {
                    next += 1;
                    char::from_u32(next - 1).expect("below U+0200")
                };
                (c, byte)
            })
            .collect()
    })
}

fn sentencepiece_bytes(piece: &str) -> Vec<u8> {
    let fallback = piece
        .strip_prefix("<0x")
        .and_then(|rest| rest.strip_suffix('>'))
        .filter(|hex| hex.len() == 2)
        .and_then(|hex| u8::from_str_radix(hex, 16).ok());
    match fallback {
        Some(byte) => vec![byte],
        None => piece.replace('\u{2581}', " ").into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use crate::tokenizer::tests::test_data;
    use crate::Tokenizer;

    /// Encoding then concatenating the tokens' bytes gives back the text (SentencePiece adds
    /// its leading space), for every string the fixtures were checked on against Python.
    fn assert_concatenation_is_the_text(fixture: &str, leading_space: bool) {
        let tokenizer = Tokenizer::from_dir(&test_data(fixture)).unwrap();
        let bytes = tokenizer.token_bytes();
        assert_eq!(bytes.len(), tokenizer.vocab_size());
        let cases: Vec<serde_json::Value> = serde_json::from_slice(
            &std::fs::read(test_data(fixture).join("expected_encodings.json")).unwrap(),
        )
        .unwrap();
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let ids = tokenizer.encode(text, false).unwrap();
            let joined: Vec<u8> = ids
                .iter()
                .flat_map(|&id| match &bytes[id as usize] {
                    Some(b) => b.clone(),
                    // A special token in the text: its own text, to compare the rest.
                    None => tokenizer.token_str(id).unwrap().into_bytes(),
                })
                .collect();
            let expected = if leading_space && !text.is_empty() {
                format!(" {text}")
            } else {
                text.to_string()
            };
            assert_eq!(String::from_utf8_lossy(&joined), expected, "{fixture}");
        }
    }

    #[test]
    fn byte_level_tokens_concatenate_to_the_text() {
        assert_concatenation_is_the_text("byte_bpe", false);
    }

    #[test]
    fn sentencepiece_tokens_concatenate_to_the_text() {
        assert_concatenation_is_the_text("sentencepiece", true);
    }

    #[test]
    fn bytes_of_one_token_keeps_partial_characters_and_names_special_tokens() {
        let tokenizer = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
        let table = tokenizer.token_bytes();
        let ids = tokenizer.encode("日本語 🙂", false).unwrap();
        let joined: Vec<u8> = ids
            .iter()
            .flat_map(|&id| tokenizer.bytes_of(id).unwrap())
            .collect();
        assert_eq!(joined, "日本語 🙂".as_bytes());
        assert!(
            ids.iter()
                .any(|&id| std::str::from_utf8(&tokenizer.bytes_of(id).unwrap()).is_err()),
            "some token holds part of a character"
        );
        for &id in &ids {
            assert_eq!(tokenizer.bytes_of(id), table[id as usize]);
        }
        let end = tokenizer.token_to_id("<|im_end|>").unwrap();
        assert_eq!(tokenizer.bytes_of(end).unwrap(), b"<|im_end|>");
        assert_eq!(tokenizer.bytes_of(tokenizer.vocab_size() as u32), None);
    }

    #[test]
    fn added_tokens_that_are_not_special_stand_for_their_decoded_text() {
        let base = Tokenizer::from_dir(&test_data("byte_bpe")).unwrap();
        let mut inner = base.inner().clone();
        inner.add_tokens(&[
            tokenizers::AddedToken::from("a\u{10a}b", false),
            tokenizers::AddedToken::from("<tool_call>", false),
        ]);
        inner.add_special_tokens(&[tokenizers::AddedToken::from("<|ctl|>", true)]);
        let tokenizer = Tokenizer::new(inner, None, None, None, None);
        let bytes = tokenizer.token_bytes();
        let id = tokenizer.token_to_id("a\u{10a}b").unwrap();
        // Its decoded text has a raw newline: what it adds to the output and what logprobs report.
        assert_eq!(bytes[id as usize].as_deref(), Some(&b"a\nb"[..]));
        assert_eq!(tokenizer.bytes_of(id).unwrap(), b"a\nb");
        let call = tokenizer.token_to_id("<tool_call>").unwrap();
        assert_eq!(bytes[call as usize].as_deref(), Some(&b"<tool_call>"[..]));
        let ctl = tokenizer.token_to_id("<|ctl|>").unwrap();
        assert_eq!(bytes[ctl as usize], None);
    }

    #[test]
    fn special_tokens_have_no_bytes() {
        for fixture in ["byte_bpe", "sentencepiece"] {
            let tokenizer = Tokenizer::from_dir(&test_data(fixture)).unwrap();
            let bytes = tokenizer.token_bytes();
            for name in ["<|im_end|>", "<|end_of_text|>", "</s>", "<s>"] {
                if let Some(id) = tokenizer.token_to_id(name) {
                    assert_eq!(bytes[id as usize], None, "{fixture} {name}");
                }
            }
        }
    }
}
