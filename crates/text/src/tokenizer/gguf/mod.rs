//! A tokenizer built from a GGUF file's metadata alone (`tokenizer.ggml.*` and
//! `tokenizer.chat_template`), tokenizing as llama.cpp does for the same file.
//!
//! The result is the same [`Tokenizer`] a Hugging Face directory gives: a `tokenizers` BPE model
//! with the matching normalizer, pre-tokenizer, decoder and post-processor, so encoding,
//! incremental decoding, token bytes and the chat template work unchanged.
//!
//! - `llama` (SentencePiece BPE): llama.cpp merges the adjacent pair whose joined text is the
//!   highest-scoring token. A BPE model whose merge list is every (left, right) split of every
//!   token, ranked by the token's score, merges in the same order (Hugging Face's
//!   `convert_slow_tokenizer` converts Llama this way; built in time and memory linear in the
//!   vocabulary's bytes, within limits: `merges.rs`). Spaces become `▁`; one `▁` is
//!   prepended to each text run (`tokenizer.ggml.add_space_prefix`); characters without a token
//!   fall back to `<0xNN>` byte tokens.
//! - `gpt2` (byte-level BPE): the file's merges, and the pre-tokenizer `tokenizer.ggml.pre`
//!   names (see `pre_tokenizer.rs`).
//!
//! Control, user-defined and unknown tokens (`tokenizer.ggml.token_type` 3, 4 and 2) are added
//! tokens: written in text, they are matched whole before anything else, as llama.cpp's
//! special-token partition does.

mod merges;
mod pre_tokenizer;
mod special_tokens;
mod vocab;

use serde_json::json;
use sluice_gguf::Metadata;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{
    NormalizerWrapper, Prepend, Replace, Sequence as NormalizerSequence,
};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::AddedToken;

use crate::{TextError, Tokenizer};
use pre_tokenizer::BpePreTokenizer;
use vocab::{GgufVocab, VocabKind};

/// SentencePiece's meta symbol for a space.
const SPACE: &str = "▁";

impl Tokenizer {
    /// Builds the tokenizer a GGUF file describes in its metadata: vocabulary, merges or
    /// scores, pre-tokenizer, special tokens, BOS/EOS insertion, the end-of-generation tokens
    /// and the chat template (`tokenizer.chat_template`; one that fails to compile is kept in
    /// [`Tokenizer::chat_template_error`] as with [`Tokenizer::from_dir`]).
    ///
    /// An unknown `tokenizer.ggml.model` or `tokenizer.ggml.pre` is an error naming it.
    pub fn from_gguf(metadata: &Metadata) -> Result<Tokenizer, TextError> {
        let vocab = GgufVocab::read(metadata)?;
        let (mut inner, adds_bos_by_default) = match vocab.kind {
            VocabKind::SentencePiece => (sentencepiece(&vocab)?, true),
            VocabKind::BytePairs => {
                let pre = BpePreTokenizer::named(vocab.pre.as_deref())?;
                (byte_level_bpe(&vocab, &pre)?, pre.adds_bos_by_default)
            }
        };
        let added: Vec<AddedToken> = (0..vocab.tokens.len())
            .filter(|&id| special_tokens::is_added(&vocab, id))
            .map(|id| {
                AddedToken::from(vocab.tokens[id].clone(), false)
                    .special(special_tokens::is_special(&vocab, id))
                    .normalized(false)
            })
            .collect();
        inner.add_tokens(&added);
        let add_bos = vocab.add_bos.unwrap_or(adds_bos_by_default);
        let add_eos = vocab.add_eos.unwrap_or(false);
        inner.with_post_processor(Some(bos_eos_template(&vocab, add_bos, add_eos)?));

        let mut tokenizer = Tokenizer::new(
            inner,
            vocab.text(vocab.bos),
            vocab.text(vocab.eos),
            vocab.text(vocab.pad),
            vocab.chat_template.as_deref(),
        );
        tokenizer.end_of_generation = special_tokens::end_of_generation_ids(&vocab);
        Ok(tokenizer)
    }
}

/// Token text to id, for the BPE model.
fn bpe_vocab(vocab: &GgufVocab) -> Vocab {
    vocab
        .tokens
        .iter()
        .enumerate()
        .map(|(id, text)| (text.clone(), id as u32))
        .collect()
}

fn sentencepiece(vocab: &GgufVocab) -> Result<tokenizers::Tokenizer, TextError> {
    let mut builder = BPE::builder()
        .vocab_and_merges(bpe_vocab(vocab), merges::merges_by_score(vocab)?)
        .byte_fallback(true)
        .fuse_unk(true);
    if let Some(unk) = vocab.text(vocab.unk) {
        builder = builder.unk_token(unk);
    }
    let model = builder
        .build()
        .map_err(|err| TextError::Tokenizer(err.to_string()))?;
    let mut inner = tokenizers::Tokenizer::new(model);

    let add_space_prefix = vocab.add_space_prefix.unwrap_or(true);
    let escape_spaces: NormalizerWrapper = Replace::new(" ", SPACE)
        .map_err(|err| TextError::Tokenizer(err.to_string()))?
        .into();
    // A normalizer, not Hugging Face's `Metaspace` pre-tokenizer: `Metaspace` adds no `▁` to
    // text that already starts with a space; SentencePiece and llama.cpp always add it.
    let normalizer: NormalizerWrapper = if add_space_prefix {
        NormalizerSequence::new(vec![Prepend::new(SPACE.into()).into(), escape_spaces]).into()
    } else {
        escape_spaces
    };
    inner.with_normalizer(Some(normalizer));

    let unescape_spaces =
        Replace::new(SPACE, " ").map_err(|err| TextError::Tokenizer(err.to_string()))?;
    let mut decoders: Vec<DecoderWrapper> = vec![
        unescape_spaces.into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if add_space_prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    inner.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(inner)
}

fn byte_level_bpe(
    vocab: &GgufVocab,
    pre: &BpePreTokenizer,
) -> Result<tokenizers::Tokenizer, TextError> {
    let model = BPE::builder()
        .vocab_and_merges(bpe_vocab(vocab), vocab.merges.clone())
        .ignore_merges(pre.ignore_merges)
        .build()
        .map_err(|err| TextError::InvalidGgufVocab(err.to_string()))?;
    let mut inner = tokenizers::Tokenizer::new(model);
    inner.with_pre_tokenizer(Some(pre.build()?));
    inner.with_decoder(Some(ByteLevel::new(false, true, true)));
    Ok(inner)
}

/// BOS before and EOS after the text, as `tokenizer.ggml.add_bos_token` and
/// `add_eos_token` say. Written as `tokenizer.json` writes it: the builder's string form splits
/// pieces at `:` and spaces, which token texts may contain.
fn bos_eos_template(
    vocab: &GgufVocab,
    add_bos: bool,
    add_eos: bool,
) -> Result<TemplateProcessing, TextError> {
    let token =
        |wanted: bool, id: Option<u32>, what: &str| -> Result<Option<(String, u32)>, TextError> {
            match (wanted, id) {
                (false, _) => Ok(None),
                (true, Some(id)) => Ok(Some((vocab.tokens[id as usize].clone(), id))),
                (true, None) => Err(TextError::InvalidGgufVocab(format!(
                    "add_{what}_token is set but there is no {what} token"
                ))),
            }
        };
    let bos = token(add_bos, vocab.bos, "bos")?;
    let eos = token(add_eos, vocab.eos, "eos")?;
    let sequence = |type_id: u32| {
        let mut pieces = Vec::new();
        if let Some((text, _)) = &bos {
            pieces.push(json!({"SpecialToken": {"id": text, "type_id": type_id}}));
        }
        let name = if type_id == 0 { "A" } else { "B" };
        pieces.push(json!({"Sequence": {"id": name, "type_id": type_id}}));
        if let Some((text, _)) = &eos {
            pieces.push(json!({"SpecialToken": {"id": text, "type_id": type_id}}));
        }
        pieces
    };
    let special_tokens: serde_json::Map<String, serde_json::Value> = [&bos, &eos]
        .into_iter()
        .flatten()
        .map(|(text, id)| {
            (
                text.clone(),
                json!({"id": text, "ids": [id], "tokens": [text]}),
            )
        })
        .collect();
    let pair: Vec<_> = sequence(0).into_iter().chain(sequence(1)).collect();
    serde_json::from_value(json!({
        "type": "TemplateProcessing",
        "single": sequence(0),
        "pair": pair,
        "special_tokens": special_tokens,
    }))
    .map_err(|err| TextError::Tokenizer(format!("BOS/EOS template: {err}")))
}

#[cfg(test)]
mod tests;
