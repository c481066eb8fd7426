//! A lower bound on a text's token count from its length alone, so that a prompt that cannot
//! fit the context whatever its tokenization is refused before it is tokenized (a 4 MB prompt
//! costs seconds of CPU and hundreds of MB to tokenize, only to be refused afterwards).

use crate::Tokenizer;

/// How much a normalizer may shrink text: a 4-byte character can become a 1-byte one (NFKC,
/// lower-casing), but the normalizers of generative models never delete characters.
const NORMALIZER_SHRINK: usize = 4;

impl Tokenizer {
    /// The fewest tokens any text of `bytes` UTF-8 bytes can encode to (without the
    /// post-processor's BOS/EOS): no token stands for more bytes than the longest token, and a
    /// normalizer shrinks text at most `NORMALIZER_SHRINK`-fold. 0 when the tokenizer's
    /// normalizer may delete text (BERT's, `Strip`, a `Replace` with nothing), which no length
    /// can bound.
    pub fn min_tokens_for_text_bytes(&self, bytes: usize) -> usize {
        let per_token = *self
            .max_token_bytes
            .get_or_init(|| self.longest_token_bytes());
        let shrink = match self.inner().get_normalizer() {
            None => 1,
            Some(normalizer) => {
                let json = serde_json::to_string(normalizer).unwrap_or_default();
                let may_delete = ["\"BertNormalizer\"", "\"Strip\"", "\"content\":\"\""]
                    .iter()
                    .any(|kind| json.contains(kind));
                if may_delete {
                    return 0;
                }
                NORMALIZER_SHRINK
            }
        };
        bytes / (per_token.max(1) * shrink)
    }

    /// Bytes of the longest token, added tokens included (as their text).
    fn longest_token_bytes(&self) -> usize {
        let pieces = self.token_bytes().into_iter().flatten().map(|b| b.len());
        let added = self
            .inner()
            .get_added_vocabulary()
            .get_vocab()
            .keys()
            .map(String::len);
        pieces.chain(added).max().unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use crate::tokenizer::tests::test_data;
    use crate::Tokenizer;

    #[test]
    fn no_text_encodes_to_fewer_tokens_than_the_bound() {
        for fixture in ["byte_bpe", "sentencepiece"] {
            let tokenizer = Tokenizer::from_dir(&test_data(fixture)).unwrap();
            check_bound(&tokenizer);
        }
    }

    fn check_bound(tokenizer: &Tokenizer) {
        let samples = [
            "hello world".repeat(50),
            " ".repeat(600),
            "a".repeat(700),
            "日本語のテキスト".repeat(40),
            "<|im_start|>user\n".repeat(30),
        ];
        for text in samples {
            let tokens = tokenizer.encode(&text, false).unwrap().len();
            let bound = tokenizer.min_tokens_for_text_bytes(text.len());
            assert!(bound <= tokens, "{bound} > {tokens} for {text:?}");
            assert!(bound > 0, "the bound says nothing for {} bytes", text.len());
        }
    }
}
