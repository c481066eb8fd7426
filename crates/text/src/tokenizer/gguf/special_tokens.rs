//! Which tokens are added tokens (matched whole in text) and which of those are special, which
//! tokens end generation, and which llama.cpp treats as control tokens because of their text.
//!
//! GGUF files name only EOS, EOT and EOM by id; chat models end turns with other tokens too
//! (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`), which llama.cpp finds by their text
//! (`llama_vocab::impl::load`; see llama.cpp issue 9606). sluice finds the same set.

use std::collections::BTreeSet;

use super::vocab::{GgufVocab, TokenType};

/// Token texts that end generation wherever they are in a vocabulary.
const END_OF_GENERATION_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Fill-in-the-middle pad, repository and file-separator tokens by text, looked for when the
/// file does not name them by id. llama.cpp stops on them too (a code model that writes one has
/// left the file it was completing).
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// Other texts llama.cpp promotes to control tokens when it looks for EOT, EOM and the
/// fill-in-the-middle tokens; they are split out of text even when typed as normal tokens.
const OTHER_CONTROL_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];

/// Whether llama.cpp makes a token with this text a control token whatever its stored type.
pub(crate) fn looks_like_control(text: &str) -> bool {
    END_OF_GENERATION_TEXTS.contains(&text)
        || FIM_PAD_TEXTS.contains(&text)
        || FIM_REP_TEXTS.contains(&text)
        || FIM_SEP_TEXTS.contains(&text)
        || OTHER_CONTROL_TEXTS.contains(&text)
}

/// The ids that end generation, ascending: EOS, EOT and EOM by id, the fill-in-the-middle
/// pad, repository and file-separator tokens, and every token whose text is in llama.cpp's end-of-generation list, with llama.cpp's
/// two exceptions: `<|end|>` only ends a message where `<|return|>` and `<|call|>` (or
/// `<|calls|>` and `<|flush|>`) exist (gpt-oss, Solar Open), and `</s>` is ordinary text where
/// `<|tool_response>` or `<|plamo:eos|>` exist (Gemma 4, PLaMo).
pub(crate) fn end_of_generation_ids(vocab: &GgufVocab) -> Vec<u32> {
    let by_text = |texts: &[&str]| -> Vec<u32> {
        texts
            .iter()
            .filter_map(|text| vocab.ids.get(*text).copied())
            .collect()
    };
    let mut ids: BTreeSet<u32> = [vocab.eos, vocab.eot, vocab.eom]
        .into_iter()
        .flatten()
        .chain(by_text(END_OF_GENERATION_TEXTS))
        .collect();
    // llama.cpp takes the first match of each kind in hash order; vocabularies with two
    // spellings of one kind are not known, so sluice takes every match.
    for (named, texts) in [
        (vocab.fim_pad, FIM_PAD_TEXTS),
        (vocab.fim_rep, FIM_REP_TEXTS),
        (vocab.fim_sep, FIM_SEP_TEXTS),
    ] {
        match named {
            Some(id) => {
                ids.insert(id);
            }
            None => ids.extend(by_text(texts)),
        }
    }
    let has = |text: &str| vocab.ids.contains_key(text);
    if has("<|end|>")
        && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>")))
    {
        ids.remove(&vocab.ids["<|end|>"]);
    }
    if has("</s>") && (has("<|tool_response>") || has("<|plamo:eos|>")) {
        ids.remove(&vocab.ids["</s>"]);
    }
    ids.into_iter().collect()
}

/// Whether `id` is split out of text as a whole (llama.cpp's special-token partition: control,
/// user-defined and unknown tokens, and tokens promoted to control by their text).
pub(crate) fn is_added(vocab: &GgufVocab, id: usize) -> bool {
    matches!(
        vocab.types[id],
        TokenType::Control | TokenType::UserDefined | TokenType::Unknown
    ) || looks_like_control(&vocab.tokens[id])
}

/// Whether added token `id` is special: hidden when decoding with `skip_special_tokens`.
/// User-defined tokens are text the model writes, so they stay visible.
pub(crate) fn is_special(vocab: &GgufVocab, id: usize) -> bool {
    vocab.types[id] != TokenType::UserDefined || looks_like_control(&vocab.tokens[id])
}
