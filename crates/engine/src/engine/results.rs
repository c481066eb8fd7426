//! What a computed step leaves behind: sampled runs applied to their sequences, the step's
//! metrics, finished choices' last events, delivery and gauges.

use std::sync::Arc;
use std::time::Instant;

use sluice_model::Logits;

use crate::executor::ExecutorError;

use super::EngineLoop;
use crate::metrics::EngineMetrics;
use crate::outbox::{flush, Flush};
use crate::request::{Event, FinishReason, Usage};
use crate::scheduler::{ModelOutput, ScheduledSeq, SchedulerOutput};
use crate::sequence::{SeqId, Sequence, SequenceStatus};

impl EngineLoop {
    /// Runs the step's forward pass and checks the logits and hidden states have the shapes
    /// the batch asked for.
    pub(super) fn execute(&mut self, out: &SchedulerOutput) -> Result<Logits, ExecutorError> {
        let logits = self.executor.execute(&out.batch)?;
        let expected_rows = out.batch.logits_indices.len();
        let expected_vocab = self.executor.vocab_size();
        if logits.rows() != expected_rows
            || logits.vocab_size != expected_vocab
            || logits.data.len() != expected_rows * expected_vocab
        {
            return Err(ExecutorError::WrongLogitsShape {
                rows: logits.rows(),
                vocab: logits.vocab_size,
                expected_rows,
                expected_vocab,
            });
        }
        let expected_rows = out.batch.hidden_indices.len();
        if logits.hidden.len() != expected_rows * logits.hidden_size
            || (expected_rows > 0 && logits.hidden_size == 0)
        {
            return Err(ExecutorError::WrongHiddenShape {
                floats: logits.hidden.len(),
                expected_rows,
            });
        }
        Ok(logits)
    }

    pub(super) fn process_logits(&mut self, out: &SchedulerOutput, logits: &Logits) {
        let mut samples = Vec::new();
        // (sequence, when its previous token came), in step order.
        let mut previous_token_at = Vec::new();
        for s in &out.scheduled {
            let Some(seq) = self.scheduler.sequence_mut(s.seq_id) else {
                continue;
            };
            let next_token_row = s.logits_row.filter(|_| ends_prompt(s, seq));
            if let (Some(rows), Some(scoring)) = (&s.prompt_rows, seq.prompt_scoring_mut()) {
                scoring.record(logits, rows, next_token_row);
                if scoring.is_complete() {
                    let scores = seq.take_prompt_scores().map(Box::new);
                    let (request_id, choice) = (seq.request_id, seq.choice as usize);
                    if let Some(r) = self.requests.get_mut(&request_id) {
                        r.choices[choice].prompt = scores;
                    }
                }
            }
            let Some(row) = s.logits_row.filter(|_| !seq.scores_only()) else {
                continue;
            };
            previous_token_at.push((s.seq_id, seq.last_token_at));
            samples.push((s.seq_id, seq.sample_verified(logits, row, &s.draft)));
        }
        let now = Instant::now();
        let outcome = self
            .scheduler
            .update_from_output(out, ModelOutput { samples }, now);
        let m = Arc::clone(&self.shared.metrics);
        for &verified in &outcome.verified {
            m.spec_decode.record(verified);
        }
        // `appended` lists sequences in step order too: walk both lists once.
        let mut previous = previous_token_at.iter();
        for &(id, num_tokens) in &outcome.appended {
            EngineMetrics::add(&m.generation_tokens, num_tokens as u64);
            let before = previous
                .by_ref()
                .find(|(p, _)| *p == id)
                .and_then(|(_, t)| *t);
            let Some(seq) = self.scheduler.sequence(id) else {
                continue;
            };
            match before {
                Some(t) => m.inter_token_latency.observe(now - t),
                None => m.time_to_first_token.observe(now - seq.arrival),
            }
        }
        for (id, _) in previous_token_at {
            let Some(seq) = self.scheduler.sequence_mut(id) else {
                continue;
            };
            let pending = seq.take_pending();
            let (request_id, choice) = (seq.request_id, seq.choice as usize);
            if let Some(r) = self.requests.get_mut(&request_id) {
                r.choices[choice].delta.merge(pending);
            }
        }
        for (id, _) in outcome.finished {
            self.collect_finished(id, now);
        }
    }

    /// Takes a finished sequence out of the scheduler and queues its last events.
    pub(super) fn collect_finished(&mut self, id: SeqId, now: Instant) {
        if let Some(seq) = self.scheduler.remove(id) {
            self.release_queue_slot(&seq);
            self.record_finished(seq, now);
        }
    }

    pub(super) fn record_finished(&mut self, mut seq: Sequence, now: Instant) {
        let m = &self.shared.metrics;
        EngineMetrics::add(&m.requests_finished, 1);
        m.e2e_request_latency.observe(now - seq.arrival);
        let SequenceStatus::Finished(ending) = seq.status().clone() else {
            return;
        };
        let (reason, error) = (ending.reason(), ending.message());
        let usage = Usage {
            prompt_tokens: seq.prompt().len() as u32,
            completion_tokens: seq.output().len() as u32,
            cached_prompt_tokens: seq.num_cached_prompt_tokens as u32,
        };
        let queue_time = seq
            .first_scheduled_at
            .map_or(now - seq.arrival, |t| t - seq.arrival);
        let stop_string = seq.stop_string().map(str::to_owned);
        let pending = seq.take_pending();
        if let Some(r) = self.requests.get_mut(&seq.request_id) {
            if matches!(reason, FinishReason::Stop | FinishReason::Length) {
                self.shared.metrics.count_success(r.task);
            }
            let outbox = &mut r.choices[seq.choice as usize];
            outbox.delta.merge(pending);
            outbox.finished = Some(Event::Finished {
                choice: seq.choice,
                reason,
                error,
                stop_string,
                usage,
                queue_time,
            });
        }
    }

    /// Sends what each request's channel will take; the rest waits for a later loop.
    pub(super) fn deliver_events(&mut self) {
        let mut done = Vec::new();
        for (&id, request) in self.requests.iter_mut() {
            match flush(request, &self.shared.unfinished) {
                Flush::AllDelivered => done.push(id),
                Flush::Pending => {}
                // Noticed (and aborted) at the next loop's `abort_closed_requests`.
                Flush::Closed => {}
            }
        }
        // (`flush` took each of these off the unfinished count as it sent the last event.)
        for id in done {
            self.requests.remove(&id);
        }
    }

    pub(super) fn publish_gauges(&self) {
        let m = &self.shared.metrics;
        EngineMetrics::set(&m.running, self.scheduler.num_running());
        EngineMetrics::set(&m.waiting, self.scheduler.num_waiting());
        let callers = self.scheduler.callers();
        EngineMetrics::set(&m.active_callers, callers.active_callers());
        EngineMetrics::set(&m.max_running_per_caller, callers.max_running());
        EngineMetrics::set(
            &m.kv_blocks_used,
            self.scheduler.block_manager().num_used_blocks(),
        );
        let blocks = self.scheduler.block_manager();
        if let Some(window) = (self.window_group).map(|g| blocks.group_blocks(g)) {
            EngineMetrics::set(&m.kv_window_blocks_used, window.0 - window.1);
        }
    }
}

/// True when the scheduled chunk's last token is the last prompt token (its logits score the
/// token after the prompt). Read before the chunk is counted as computed.
fn ends_prompt(s: &ScheduledSeq, seq: &Sequence) -> bool {
    seq.num_computed_tokens() + s.num_new_tokens == seq.prompt().len()
}
