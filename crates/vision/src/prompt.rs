//! Where an image goes in a Gemma 3 prompt: each `<start_of_image>` the prompt (or its chat
//! template) holds becomes `"\n\n<start_of_image>" + N × "<image_soft_token>" +
//! "<end_of_image>\n\n"`, as `Gemma3Processor` expands it (without pan-and-scan), and the text
//! model reads the N image embeddings at the soft tokens' positions.
//!
//! The token strings come from `tokenizer_config.json` (`boi_token`, `eoi_token`, `image_token`,
//! at the top level or under `model_specific_special_tokens`), N from `image_seq_length` in
//! `processor_config.json` or `preprocessor_config.json`, else `mm_tokens_per_image` in
//! `config.json`; each falls back to Gemma 3's own.

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
}
