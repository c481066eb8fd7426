//! Prompts of a fixed token length that differ from request to request.
//!
//! Every prompt is a request number followed by the same run of ordinary words. The number comes
//! first so that no two prompts share even their first cache block: a server's prefix cache cannot
//! turn the workload into decode only. The word count is calibrated against the server's own
//! tokenizer when it has a `/tokenize` endpoint.

use std::sync::atomic::{AtomicU64, Ordering};

use super::client::{Endpoint, RequestError, TokenizeApi};

/// Filler vocabulary: common words most tokenizers hold as single tokens.
const WORDS: &[&str] = &[
    "the", "river", "runs", "past", "an", "old", "mill", "where", "people", "used", "to", "grind",
    "wheat", "into", "flour", "for", "bread", "and", "every", "morning", "a", "small", "boat",
    "carried", "sacks", "down", "town", "market", "while", "children", "watched", "from", "bridge",
    "as", "water", "turned", "wheel", "slowly", "under", "grey", "sky", "of", "autumn", "light",
    "fell", "on", "stone", "walls", "near", "field", "by", "road",
];

/// How many distinct request numbers calibration averages over.
const CALIBRATION_SAMPLES: u64 = 4;

/// Makes the prompts of one benchmark run.
#[derive(Debug)]
pub struct PromptFactory {
    /// Filler words after the request number.
    words: usize,
    /// First request number; differs between runs so a server reused across runs is not warm.
    first_number: u64,
    next: AtomicU64,
    /// Mean token count of a prompt by the server's tokenizer, when it could be asked.
    calibrated_tokens: Option<f64>,
}

impl PromptFactory {
    /// A factory whose prompts are `words` words after the request number, uncalibrated.
    pub fn with_words(words: usize, first_number: u64) -> Self {
        Self {
            words,
            first_number,
            next: AtomicU64::new(0),
            calibrated_tokens: None,
        }
    }

    /// Calibrates the word count so prompts come out at `target_tokens` by the server's tokenizer.
    /// Without a `/tokenize` endpoint it assumes one token per word (the benchmark then reports
    /// the prompt length the server counted in `usage`).
    pub async fn calibrated(
        endpoint: &Endpoint,
        model: &str,
        target_tokens: usize,
        first_number: u64,
    ) -> Result<Self, RequestError> {
        let mut factory = Self::with_words(target_tokens.max(1), first_number);
        let Some(api) = endpoint
            .detect_tokenize(model, &factory.text(first_number))
            .await
        else {
            return Ok(factory);
        };
        let target = target_tokens as f64;
        let mut best: Option<(usize, f64)> = None;
        for _ in 0..12 {
            let tokens = factory.mean_tokens(endpoint, api, model).await?;
            if best.is_none_or(|(_, b)| (tokens - target).abs() < (b - target).abs()) {
                best = Some((factory.words, tokens));
            }
            if (tokens - target).abs() < 0.5 {
                break;
            }
            // Scale by the observed tokens per word, stepping at least one word.
            let per_word = tokens / factory.words as f64;
            let step = ((target - tokens) / per_word.max(0.1)).round() as i64;
            let step = if step == 0 {
                (target - tokens).signum() as i64
            } else {
                step
            };
            let words = (factory.words as i64 + step).max(1) as usize;
            if words == factory.words {
                break;
            }
            factory.words = words;
        }
        if let Some((words, tokens)) = best {
            factory.words = words;
            factory.calibrated_tokens = Some(tokens);
        }
        Ok(factory)
    }

    async fn mean_tokens(
        &self,
        endpoint: &Endpoint,
        api: TokenizeApi,
        model: &str,
    ) -> Result<f64, RequestError> {
        let mut total = 0usize;
        for sample in 0..CALIBRATION_SAMPLES {
            let text = self.text(self.first_number + sample * 7919);
            total += endpoint.count_tokens(api, model, &text).await?;
        }
        Ok(total as f64 / CALIBRATION_SAMPLES as f64)
    }

    /// Mean prompt length by the server's tokenizer, when calibration could ask it.
    pub fn calibrated_tokens(&self) -> Option<f64> {
        self.calibrated_tokens
    }

    /// Number of filler words per prompt.
    pub fn words(&self) -> usize {
        self.words
    }

    /// The next prompt of the run; no two calls return the same text.
    pub fn next_prompt(&self) -> String {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        self.text(self.first_number.wrapping_add(index))
    }

    fn text(&self, number: u64) -> String {
        // Fixed width keeps the token count of the number itself steady across requests.
        let mut text = format!("{:08}.", number % 100_000_000);
        for word in WORDS.iter().cycle().take(self.words) {
            text.push(' ');
            text.push_str(word);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_prompts_differ_from_their_first_character_on() {
        let factory = PromptFactory::with_words(16, 42);
        let a = factory.next_prompt();
        let b = factory.next_prompt();
        assert_ne!(a, b);
        assert_eq!(a.split_whitespace().count(), 17);
        assert_eq!(
            a.split_whitespace().skip(1).collect::<Vec<_>>(),
            b.split_whitespace().skip(1).collect::<Vec<_>>()
        );
        assert!(a.starts_with("00000042."));
        assert!(b.starts_with("00000043."));
    }

    #[test]
    fn filler_longer_than_the_word_list_cycles() {
        let factory = PromptFactory::with_words(WORDS.len() + 3, 0);
        let prompt = factory.next_prompt();
        let words: Vec<&str> = prompt.split_whitespace().skip(1).collect();
        assert_eq!(words.len(), WORDS.len() + 3);
        assert_eq!(words[WORDS.len()], WORDS[0]);
    }
}
