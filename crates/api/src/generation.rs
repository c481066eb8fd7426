//! Runs a validated request on a model's engine and answers it, streamed or in one body. Shared
//! by chat and completions, which differ only in how they build prompts and shape chunks.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, select_all, Stream, StreamExt};
use sluice_engine::{Event, GenerationRequest, RequestStream, SubmitError};

use crate::assemble::{ResponseAssembler, ResponseMeta};
use crate::dialect::{Dialect, Ending};
use crate::error::ApiError;
use crate::registry::ServedModel;
use crate::sse::{sse_response, StreamSpec};
use crate::wire::system_fingerprint;
use crate::AppState;

/// The merged events of every engine request of one response, tagged with the prompt index.
type MergedEvents = stream::SelectAll<Pin<Box<dyn Stream<Item = (usize, Event)> + Send>>>;

/// How the answer is shaped, besides the engine requests themselves.
pub struct ResponsePlan {
    /// The endpoint's wire shapes.
    pub dialect: Box<dyn Dialect>,
    /// Choices per engine request.
    pub n: u32,
    /// Answer with server-sent events rather than one body.
    pub stream: bool,
    /// Whether logprobs were requested (then every choice carries a logprobs object).
    pub logprobs: bool,
    /// Completions' `echo`: one text per prompt.
    pub echo: Option<Vec<String>>,
    /// Leave `usage.prompt_tokens_details` out.
    pub hide_cached_tokens: bool,
    /// With `echo` and `logprobs: k`: `Some(k)`, the echo carries its tokens' logprobs.
    pub echo_logprobs: Option<u32>,
    /// vLLM's `prompt_logprobs: k` (not streamed).
    pub prompt_logprobs: Option<u32>,
    /// Each prompt's tokens (what echoed logprobs and `prompt_logprobs` describe).
    pub prompt_tokens: Vec<Vec<u32>>,
    /// How often a quiet stream asks its dialect for keep-alive events
    /// ([`crate::ApiConfig::stream_keep_alive`]).
    pub keep_alive: std::time::Duration,
}

/// A fresh response id with the given prefix (`chatcmpl`, `cmpl`).
pub fn response_id(prefix: &str) -> String {
    format!("{prefix}-{:032x}", rand::random::<u128>())
}

impl ResponseMeta {
    /// A new response of `model`, its id made from `id_prefix`, created now.
    pub fn new(id_prefix: &str, model: &str) -> Self {
        ResponseMeta {
            id: response_id(id_prefix),
            created: unix_now(),
            model: model.to_string(),
            system_fingerprint: system_fingerprint(),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Submits every request (all or none: a refused one drops, and so aborts, those already
/// submitted) and answers with their events.
pub async fn run(
    model: Arc<ServedModel>,
    requests: Vec<GenerationRequest>,
    plan: ResponsePlan,
    retry_after_secs: u64,
) -> Result<Response, ApiError> {
    let streams = model.engine.submit_all(requests).map_err(|e| match e {
        SubmitError::QueueFull => ApiError::Overloaded { retry_after_secs },
        SubmitError::ShutDown => ApiError::Unavailable("the engine has shut down".into()),
        SubmitError::GroupTooLarge { requests, limit } => ApiError::invalid(
            "prompt",
            format!(
                "a request may have at most {limit} prompts (the server's --max-queue), got \
                 {requests}"
            ),
        ),
    })?;
    let num_prompts = streams.len();
    let events = merge(streams);
    let shape = plan.dialect.logprobs_shape();
    let mut assembler =
        ResponseAssembler::new(shape, num_prompts, plan.n, plan.echo, plan.logprobs)
            .hiding_cached_tokens(plan.hide_cached_tokens);
    if plan.echo_logprobs.is_some() || plan.prompt_logprobs.is_some() {
        assembler = assembler.with_prompt_tokens(plan.prompt_tokens);
    }
    if let Some(k) = plan.echo_logprobs {
        assembler = assembler.with_echo_logprobs(k);
    }
    if let Some(k) = plan.prompt_logprobs {
        assembler = assembler.with_prompt_logprobs(k);
    }
    let tokens = model.tokenizer.clone();
    if plan.stream {
        let spec = StreamSpec {
            dialect: plan.dialect,
            tokens,
            keep_alive: Some(plan.keep_alive),
        };
        return Ok(sse_response(events, assembler, spec).into_response());
    }
    collect(events, assembler, plan.dialect, tokens.as_ref()).await
}

/// One stream over several engine requests' events. Dropping it drops every `RequestStream`.
fn merge(streams: Vec<RequestStream>) -> MergedEvents {
    select_all(streams.into_iter().enumerate().map(|(prompt, stream)| {
        let events = stream::unfold(stream, move |mut s| async move {
            s.recv().await.map(|e| ((prompt, e), s))
        });
        Box::pin(events) as Pin<Box<dyn Stream<Item = (usize, Event)> + Send>>
    }))
}

/// Waits for every choice to finish and answers with one body.
async fn collect(
    mut events: MergedEvents,
    mut assembler: ResponseAssembler,
    mut dialect: Box<dyn Dialect>,
    tokens: &dyn crate::assemble::TokenTexts,
) -> Result<Response, ApiError> {
    while !assembler.is_complete() {
        let (prompt, event) = events.next().await.ok_or_else(|| {
            ApiError::Internal("the engine stopped before the response was complete".into())
        })?;
        for update in assembler.apply(prompt, event, tokens)? {
            // The frames are for streaming; the dialect folds the update into its state.
            dialect.update(update);
        }
    }
    let ending = Ending {
        usage: assembler.usage(),
        assembler: &assembler,
        tokens,
    };
    let body = dialect.body(ending);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// [`off_runtime`] for a request's prompt, holding one of the server's tokenizing slots
/// ([`crate::ApiConfig::max_concurrent_tokenizations`]) for as long as the work runs, even when
/// the client goes away meanwhile: tokenizing a large prompt takes seconds and hundreds of MB,
/// and without a bound sixteen of them at once took 7 GB. `caller` (the fair-share caller)
/// decides who gets a contended slot first ([`crate::tokenizing`]).
pub async fn tokenize_off_runtime<T, F>(
    state: &AppState,
    caller: Option<u64>,
    work: F,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    let slot = state.tokenizing.acquire(caller).await;
    off_runtime(move || {
        let _slot = slot;
        work()
    })
    .await
}

/// [`tokenize_off_runtime`] for work that can stop early (a chat template's render): `work`
/// gets a flag that is set when this future is dropped, as when the client goes away, so the
/// render ends at its next check instead of running to its budget.
pub async fn tokenize_off_runtime_until_gone<T, F>(
    state: &AppState,
    caller: Option<u64>,
    work: F,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(Arc<AtomicBool>) -> Result<T, ApiError> + Send + 'static,
{
    /// Sets the flag when the request's future goes away (finished or dropped).
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let gone = SetOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = Arc::clone(&gone.0);
    let result = tokenize_off_runtime(state, caller, move || work(flag)).await;
    drop(gone);
    result
}

/// Runs blocking tokenizer work (templating, encoding) off the async runtime's core threads.
pub async fn off_runtime<T, F>(work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
}
