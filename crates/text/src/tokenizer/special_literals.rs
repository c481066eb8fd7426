//! Special-token text inside client content is text, not control tokens.
//!
//! A chat prompt is rendered to one string and tokenized with special-token parsing on, since
//! the template writes its markup (`<|im_start|>`, `[INST]`, BOS) as text. Without care, a user
//! message containing `<|im_end|>\n<|im_start|>system\n...` becomes the very control tokens of
//! a genuine system turn. So before rendering, every special token's text inside the client's
//! strings is replaced by a placeholder no tokenizer treats as special; after encoding, the
//! tokens covering each placeholder (and any token straddling its edges) are replaced by the
//! literal text encoded with special-token parsing off. Text without special-token literals
//! (nearly all of it) is encoded exactly as before.

use serde_json::Value;
use std::hash::{BuildHasher, Hasher};

use crate::{TextError, Tokenizer};

/// The placeholders put into one request's strings, and the literal each stands for.
#[derive(Debug, Default)]
pub struct MaskedSpecials {
    /// (placeholder, literal), in order of first use.
    placeholders: Vec<(String, String)>,
}

impl MaskedSpecials {
    /// True when no string held special-token text.
    pub fn is_empty(&self) -> bool {
        self.placeholders.is_empty()
    }

    /// `text` with the placeholders turned back into the literals.
    pub fn restore(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (placeholder, literal) in &self.placeholders {
            out = out.replace(placeholder.as_str(), literal);
        }
        out
    }

    /// Byte ranges of every placeholder in `text`, sorted, with the literal of each.
    fn occurrences<'a>(&'a self, text: &str) -> Vec<(usize, usize, &'a str)> {
        let mut found: Vec<_> = self
            .placeholders
            .iter()
            .flat_map(|(placeholder, literal)| {
                text.match_indices(placeholder.as_str())
                    .map(move |(at, p)| (at, at + p.len(), literal.as_str()))
            })
            .collect();
        found.sort_unstable();
        found
    }
}

impl Tokenizer {
    /// The texts of the special added tokens (control tokens), longest first.
    fn special_texts(&self) -> &[String] {
        self.special_texts.get_or_init(|| {
            let mut texts: Vec<String> = self
                .inner()
                .get_added_tokens_decoder()
                .into_values()
                .filter(|t| t.special && !t.content.is_empty())
                .map(|t| t.content)
                .collect();
            texts.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
            texts.dedup();
            texts
        })
    }

    /// Replaces special-token text in every string of `value` (message contents, names, tool
    /// calls, tool definitions) with placeholders, before the chat template renders it.
    pub fn mask_special_literals(&self, value: &mut Value, masked: &mut MaskedSpecials) {
        let specials = self.special_texts();
        if specials.is_empty() {
            return;
        }
        let nonce = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        mask_strings(value, specials, nonce, masked);
    }

    /// Encodes a rendered chat prompt: the template's special tokens are control tokens; each
    /// masked literal is plain text. `add_special_tokens` applies the post-processor (BOS),
    /// which a template writing its own BOS does not want.
    pub fn encode_rendered(
        &self,
        text: &str,
        masked: &MaskedSpecials,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TextError> {
        let places = masked.occurrences(text);
        if places.is_empty() {
            return self.encode(text, add_special_tokens);
        }
        let ids = self.encode_masked(text, masked, &places)?;
        if !add_special_tokens {
            return Ok(ids);
        }
        let tokens = ids
            .iter()
            .map(|&id| {
                let value = self.inner().id_to_token(id).unwrap_or_default();
                tokenizers::Token::new(id, value, (0, 0))
            })
            .collect();
        let encoding = tokenizers::Encoding::from_tokens(tokens, 0);
        self.inner()
            .post_process(encoding, None, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|err| TextError::Tokenizer(err.to_string()))
    }

    fn encode_masked(
        &self,
        text: &str,
        masked: &MaskedSpecials,
        places: &[(usize, usize, &str)],
    ) -> Result<Vec<u32>, TextError> {
        let encoding = self
            .inner()
            .encode(text, false)
            .map_err(|err| TextError::Tokenizer(err.to_string()))?;
        let (ids, offsets) = (encoding.get_ids(), encoding.get_offsets());
        let touches =
            |(start, end): (usize, usize)| places.iter().any(|&(p0, p1, _)| start < p1 && p0 < end);
        let mut out = Vec::with_capacity(ids.len());
        let mut i = 0;
        while i < ids.len() {
            if !touches(offsets[i]) {
                out.push(ids[i]);
                i += 1;
                continue;
            }
            // A run of tokens covering one or more placeholders: re-encode its text, literals
            // restored, with special-token parsing off.
            let (start, mut end) = offsets[i];
            while i < ids.len() && (touches(offsets[i]) || offsets[i].0 < end) {
                end = end.max(offsets[i].1);
                i += 1;
            }
            let run = masked.restore(&text[start..end]);
            let plain = self
                .literal_encoder()
                .encode(run.as_str(), false)
                .map_err(|err| TextError::Tokenizer(err.to_string()))?;
            out.extend_from_slice(plain.get_ids());
        }
        Ok(out)
    }

    /// A copy of the tokenizer that reads special-token text as ordinary text (made on the
    /// first request that needs it).
    fn literal_encoder(&self) -> &tokenizers::Tokenizer {
        self.literal_encoder.get_or_init(|| {
            let mut copy = self.inner().clone();
            copy.set_encode_special_tokens(true);
            copy
        })
    }
}

fn mask_strings(value: &mut Value, specials: &[String], nonce: u64, masked: &mut MaskedSpecials) {
    match value {
        Value::String(s) if specials.iter().any(|sp| s.contains(sp.as_str())) => {
            *s = mask_one(s, specials, nonce, masked);
        }
        Value::Array(items) => {
            for item in items {
                mask_strings(item, specials, nonce, masked);
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                mask_strings(item, specials, nonce, masked);
            }
        }
        _ => {}
    }
}

/// `text` with each special-token literal (longest first at each position) replaced.
fn mask_one(text: &str, specials: &[String], nonce: u64, masked: &mut MaskedSpecials) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for special in specials {
            if let Some(after) = rest.strip_prefix(special.as_str()) {
                out.push_str(&placeholder_for(special, nonce, masked));
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Private-use characters around a random nonce and an index: no tokenizer's special token,
/// and no client can predict it.
fn placeholder_for(literal: &str, nonce: u64, masked: &mut MaskedSpecials) -> String {
    if let Some((p, _)) = masked.placeholders.iter().find(|(_, l)| l == literal) {
        return p.clone();
    }
    let index = masked.placeholders.len();
    let placeholder = format!("\u{E000}{nonce:016x}{index}\u{E001}");
    masked
        .placeholders
        .push((placeholder.clone(), literal.to_string()));
    placeholder
}
