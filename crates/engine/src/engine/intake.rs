//! Taking a request in: one sequence per choice, with its text state and the constraint masks
//! the request's choices share.

use std::sync::Arc;
use std::time::Instant;

use sluice_text::constraint::{
    GrammarRecognizer, GrammarStates, JsonTokenMasks, Recognizer, RegexRecognizer,
    SchemaRecognizer, TokenMasks, TokenTrie, ToolCallRecognizer,
};
use tokio::sync::mpsc;

use super::EngineLoop;
use crate::constraint::ConstraintMasks;
use crate::handle::RequestId;
use crate::metrics::EngineMetrics;
use crate::outbox::RequestState;
use crate::output::{ChoiceError, OutputText};
use crate::request::{Event, GenerationRequest, ResponseFormat};
use crate::sequence::{Sequence, SequenceSpec};

impl EngineLoop {
    pub(super) fn add_request(
        &mut self,
        id: RequestId,
        request: GenerationRequest,
        events: mpsc::Sender<Event>,
        arrival: Instant,
    ) {
        let n = request.n.max(1);
        EngineMetrics::add(
            &self.shared.metrics.prompt_tokens,
            request.prompt_tokens.len() as u64,
        );
        self.requests
            .insert(id, RequestState::new(events, request.task(), n as usize));
        let masks = self.constraint_masks(&request.sampling.response_format);
        let sampling = Arc::new(request.sampling);
        let stop = Arc::new(request.stop);
        for choice in 0..n {
            let seq_id = self.next_seq_id;
            self.next_seq_id += 1;
            let text = OutputText::new(
                Arc::clone(&self.tokenizer),
                &request.prompt_tokens,
                stop.stop_strings.clone(),
            )
            .keeping_special(&stop.kept_special_tokens);
            let seq = Sequence::new(SequenceSpec {
                id: seq_id,
                request_id: id,
                choice,
                priority: request.priority,
                arrival,
                prompt: request.prompt_tokens.clone(),
                sampling: Arc::clone(&sampling),
                stop: Arc::clone(&stop),
                eos_token_ids: Arc::clone(&self.eos_token_ids),
                text: Some(text),
                constraint: masks.as_ref().map(ConstraintMasks::start),
                cache_salt: request.cache_salt,
            });
            // The prompt is the same for every choice: the first one scores it.
            let seq = (seq.with_caller(request.caller)).with_images(Arc::clone(&request.images));
            let seq = if choice == 0 {
                seq.with_prompt_outputs(request.prompt_outputs.clone())
            } else {
                seq
            };
            if request.prompt_tokens.is_empty() {
                self.finish_unscheduled(seq, ChoiceError::EmptyPrompt);
            } else if !self.scheduler.has_queue_room() {
                self.finish_unscheduled(seq, ChoiceError::QueueFull);
            } else if let Err(full) = self.scheduler.add(seq) {
                tracing::error!("request {id} choice {choice}: {full}");
            }
        }
    }

    /// The masks a request's choices share for its `response_format`, if it has one.
    fn constraint_masks(&mut self, format: &ResponseFormat) -> Option<ConstraintMasks> {
        match format {
            ResponseFormat::Text => None,
            ResponseFormat::JsonObject => {
                let trie = self.token_trie();
                let masks = self
                    .json_object_masks
                    .get_or_insert_with(|| Arc::new(JsonTokenMasks::json_object(trie)));
                Some(ConstraintMasks::new(Arc::clone(masks)))
            }
            ResponseFormat::JsonSchema(schema) => {
                Some(self.masks::<SchemaRecognizer>(Arc::clone(schema)))
            }
            ResponseFormat::Regex(regex) => Some(self.masks::<RegexRecognizer>(Arc::clone(regex))),
            ResponseFormat::Grammar(grammar) => {
                let states = GrammarStates::new(Arc::clone(grammar));
                Some(self.masks::<GrammarRecognizer>(Arc::new(states)))
            }
            ResponseFormat::ToolCalls(rules) => {
                Some(self.masks::<ToolCallRecognizer>(Arc::clone(rules)))
            }
        }
    }

    /// Masks of recognizer kind `R` over the model's trie, for one request.
    fn masks<R: Recognizer>(&mut self, rules: Arc<R::Rules>) -> ConstraintMasks {
        ConstraintMasks::new(Arc::new(TokenMasks::<R>::new(self.token_trie(), rules)))
    }

    /// The model's vocabulary trie for constrained decoding (built once: a pass over the
    /// vocabulary, ~90 ms for 152k tokens).
    fn token_trie(&mut self) -> Arc<TokenTrie> {
        let (tokenizer, vocab_size) = (&self.tokenizer, self.executor.vocab_size());
        let trie = self.token_trie.get_or_insert_with(|| {
            let started = Instant::now();
            let trie = TokenTrie::new(tokenizer.token_bytes(), vocab_size);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::info!(ms, "built the vocabulary trie for constrained decoding");
            Arc::new(trie)
        });
        Arc::clone(trie)
    }

    /// Finishes a sequence that never entered the scheduler with an error.
    fn finish_unscheduled(&mut self, mut seq: Sequence, error: ChoiceError) {
        self.release_queue_slot(&seq);
        seq.finish(error.into());
        self.record_finished(seq, Instant::now());
    }
}
