//! Each token's bytes as it appears in generated text, for constrained decoding, which must
//! know what a token would add to the output before it is sampled.

use std::collections::HashMap;

use crate::Tokenizer;

impl Tokenizer {
    /// Token `id`'s bytes for every id below [`Tokenizer::vocab_size`]; `None` for special
    /// tokens (and for a vocabulary entry that cannot be mapped back to bytes).
    ///
    /// Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, SmolLM) write each byte as one
    /// printable character; they are mapped back through that table. Other vocabularies are
    /// SentencePiece-style: `▁` is a space and `<0xNN>` is the byte `NN`. Added tokens that are
    /// not special are their text.
    pub fn token_bytes(&self) -> Vec<Option<Vec<u8>>> {
        let inner = self.inner();
        let added = inner.get_added_tokens_decoder();
        let byte_level = inner.get_decoder().is_some_and(|d| {
            serde_json::to_string(d).is_ok_and(|json| json.contains(r#""type":"ByteLevel""#))
        });
        let from_char = if byte_level {
            byte_level_chars()
                .into_iter()
                .enumerate()
                .map(|(byte, c)| (c, byte as u8))
                .collect()
        } else {
            HashMap::new()
        };
        (0..self.vocab_size() as u32)
            .map(|id| {
                if let Some(token) = added.get(&id) {
                    return (!token.special).then(|| token.content.as_bytes().to_vec());
                }
                let piece = inner.id_to_token(id)?;
                if byte_level {
                    piece.chars().map(|c| from_char.get(&c).copied()).collect()
                } else {
                    Some(sentencepiece_bytes(&piece))
                }
            })
            .collect()
    }
}

/// The character byte-level BPE writes for each byte (GPT-2's `bytes_to_unicode`): printable
/// Latin-1 bytes stand for themselves, the other 68 take the code points from U+0100 on.
fn byte_level_chars() -> [char; 256] {
    let mut chars = ['\0'; 256];
    let mut next = 256u32;
    for (byte, c) in chars.iter_mut().enumerate() {
        let printable = matches!(byte as u8, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
        *c = if printable {
            char::from(byte as u8)
        } else {
            next += 1;
            char::from_u32(next - 1).expect("below U+0200")
        };
    }
    chars
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
