//! Where an image goes in a prompt.
//!
//! Gemma 3 ([`Gemma3ImagePrompt`]): each `<start_of_image>` the prompt (or its chat
//! template) holds becomes `"\n\n<start_of_image>" + N × "<image_soft_token>" +
//! "<end_of_image>\n\n"`, as `Gemma3Processor` expands it (without pan-and-scan), and the text
//! model reads the N image embeddings at the soft tokens' positions.
//!
//! The token strings come from `tokenizer_config.json` (`boi_token`, `eoi_token`, `image_token`,
//! at the top level or under `model_specific_special_tokens`), N from `image_seq_length` in
//! `processor_config.json` or `preprocessor_config.json`, else `mm_tokens_per_image` in
//! `config.json`; each falls back to Gemma 3's own.
//!
//! Qwen2-VL and Qwen2.5-VL ([`Qwen2VlImagePrompt`]): the chat template writes each image as
//! `<|vision_start|><|image_pad|><|vision_end|>`, and `Qwen2_5_VLProcessor` repeats the i-th
//! `<|image_pad|>` as many times as the i-th image has merged tokens (`GridThw::tokens`), so the
//! count differs per image. The pad token's text comes from `tokenizer_config.json`
//! (`image_token`, else `<|image_pad|>`); the ids the text model needs from `config.json`
//! (`image_token_id`, `vision_start_token_id`, `vision_end_token_id`, at its top level).

use std::path::Path;

use serde_json::Value;

use crate::error::ConfigError;

/// How one image is written into a Gemma 3 prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gemma3ImagePrompt {
    /// `<start_of_image>`: marks where an image goes, and opens its expansion.
    pub boi_token: String,
    /// `<end_of_image>`: closes the expansion.
    pub eoi_token: String,
    /// `<image_soft_token>`: one per image embedding.
    pub image_token: String,
    /// Soft tokens per image (`mm_tokens_per_image`).
    pub tokens_per_image: usize,
}

impl Gemma3ImagePrompt {
    /// Reads the token strings and the count from a model directory (see the module
    /// documentation for which file gives what).
    pub fn from_model_dir(dir: &Path) -> Result<Self, ConfigError> {
        let tokenizer = read_json(dir, "tokenizer_config.json")?;
        let token = |key: &str, default: &str| {
            let nested = tokenizer
                .as_ref()
                .and_then(|t| t.get("model_specific_special_tokens"));
            (tokenizer.as_ref().and_then(|t| t.get(key)))
                .or(nested.and_then(|n| n.get(key)))
                .and_then(special_token_text)
                .unwrap_or(default)
                .to_string()
        };
        let mut tokens_per_image = None;
        for (file, key) in [
            ("processor_config.json", "image_seq_length"),
            ("preprocessor_config.json", "image_seq_length"),
            ("config.json", "mm_tokens_per_image"),
        ] {
            if tokens_per_image.is_none() {
                tokens_per_image = (read_json(dir, file)?)
                    .and_then(|v| v.get(key).and_then(Value::as_u64))
                    .map(|n| n as usize);
            }
        }
        Ok(Self {
            boi_token: token("boi_token", "<start_of_image>"),
            eoi_token: token("eoi_token", "<end_of_image>"),
            image_token: token("image_token", "<image_soft_token>"),
            tokens_per_image: tokens_per_image.unwrap_or(256),
        })
    }

    /// The text one image becomes.
    pub fn expansion(&self) -> String {
        format!(
            "\n\n{}{}{}\n\n",
            self.boi_token,
            self.image_token.repeat(self.tokens_per_image),
            self.eoi_token
        )
    }

    /// `prompt` with every `boi_token` expanded, and how many there were (the number of images
    /// the prompt takes, in order).
    pub fn expand(&self, prompt: &str) -> (String, usize) {
        let count = prompt.matches(self.boi_token.as_str()).count();
        (prompt.replace(&self.boi_token, &self.expansion()), count)
    }
}

/// How images are written into a Qwen2-VL / Qwen2.5-VL prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qwen2VlImagePrompt {
    /// `<|image_pad|>`: one in the template per image, one per image token once expanded.
    pub image_token: String,
    /// Its id (`image_token_id`).
    pub image_token_id: u32,
    /// `<|vision_start|>`'s id (`vision_start_token_id`): the token before each image.
    pub vision_start_token_id: u32,
    /// `<|vision_end|>`'s id (`vision_end_token_id`): the token after each image.
    pub vision_end_token_id: u32,
}

impl Qwen2VlImagePrompt {
    /// Reads the token text and ids from a model directory; the ids default to Qwen2.5-VL's
    /// own (151655, 151652, 151653).
    pub fn from_model_dir(dir: &Path) -> Result<Self, ConfigError> {
        let tokenizer = read_json(dir, "tokenizer_config.json")?;
        let config = read_json(dir, "config.json")?;
        let id = |key: &str, default: u32| {
            (config.as_ref().and_then(|c| c.get(key)))
                .and_then(Value::as_u64)
                .map_or(default, |v| v as u32)
        };
        let image_token = (tokenizer.as_ref().and_then(|t| t.get("image_token")))
            .and_then(special_token_text)
            .unwrap_or("<|image_pad|>");
        Ok(Self {
            image_token: image_token.to_string(),
            image_token_id: id("image_token_id", 151_655),
            vision_start_token_id: id("vision_start_token_id", 151_652),
            vision_end_token_id: id("vision_end_token_id", 151_653),
        })
    }

    /// `prompt` with its i-th `image_token` repeated `tokens[i]` times; `None` unless the
    /// prompt holds exactly `tokens.len()` of them.
    pub fn expand(&self, prompt: &str, tokens: &[usize]) -> Option<String> {
        let mut pieces = prompt.split(self.image_token.as_str());
        let mut out = String::from(pieces.next()?);
        let mut counts = tokens.iter();
        for piece in pieces {
            out.push_str(&self.image_token.repeat(*counts.next()?));
            out.push_str(piece);
        }
        counts.next().is_none().then_some(out)
    }
}

/// A special token's text: a string, or an `AddedToken` object's `content`.
fn special_token_text(value: &Value) -> Option<&str> {
    value
        .as_str()
        .or_else(|| value.get("content").and_then(Value::as_str))
}

/// `dir/name` parsed, `None` when the file does not exist.
fn read_json(dir: &Path, name: &str) -> Result<Option<Value>, ConfigError> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ConfigError::Invalid {
            path,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_start_of_image_becomes_the_full_sequence() {
        let prompt = Gemma3ImagePrompt {
            boi_token: "<boi>".into(),
            eoi_token: "<eoi>".into(),
            image_token: "<s>".into(),
            tokens_per_image: 2,
        };
        let (text, images) = prompt.expand("a <boi> b <boi>");
        assert_eq!(images, 2);
        assert_eq!(
            text,
            "a \n\n<boi><s><s><eoi>\n\n b \n\n<boi><s><s><eoi>\n\n"
        );
        assert_eq!(prompt.expand("no image"), ("no image".to_string(), 0));
    }

    #[test]
    fn a_directory_without_the_files_gets_gemma3s_own_tokens() {
        let prompt = Gemma3ImagePrompt::from_model_dir(Path::new("/nonexistent")).unwrap();
        assert_eq!(prompt.boi_token, "<start_of_image>");
        assert_eq!(prompt.image_token, "<image_soft_token>");
        assert_eq!(prompt.tokens_per_image, 256);
    }

    #[test]
    fn each_image_pad_becomes_its_own_images_token_count() {
        let prompt = Qwen2VlImagePrompt {
            image_token: "<p>".into(),
            image_token_id: 3,
            vision_start_token_id: 1,
            vision_end_token_id: 2,
        };
        let text = "a <s><p><e> b <s><p><e>";
        let expanded = prompt.expand(text, &[2, 3]).unwrap();
        assert_eq!(expanded, "a <s><p><p><e> b <s><p><p><p><e>");
        assert_eq!(prompt.expand(text, &[2]), None);
        assert_eq!(prompt.expand(text, &[2, 3, 1]), None);
        assert_eq!(prompt.expand("no image", &[]).unwrap(), "no image");
    }
}
