//! The HTTP side of the load generator: one streamed completion at a time, timed chunk by chunk,
//! plus the `/tokenize` and `/v1/models` look-ups used to set the workload up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::sse::{parse_stream_message, MalformedEvent, SseDecoder, StreamMessage, UsageCounts};

/// Why a request did not complete.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The server answered with a non-success status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// Connecting, sending or reading failed.
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server sent an error event inside the stream.
    #[error("error event: {0}")]
    Stream(String),
    /// The server sent an event that is not a completion chunk.
    #[error(transparent)]
    Malformed(#[from] MalformedEvent),
    /// The stream closed before `data: [DONE]`.
    #[error("stream closed before [DONE]")]
    Truncated,
    /// A response did not have the shape the endpoint promises.
    #[error("unexpected response from {endpoint}: {detail}")]
    UnexpectedResponse {
        /// Which endpoint answered.
        endpoint: &'static str,
        /// What was wrong with it.
        detail: String,
    },
}

/// How a timed request ended.
#[derive(Debug)]
pub enum Outcome {
    /// The stream reached `data: [DONE]`.
    Completed,
    /// The request failed; its chunks so far still count towards throughput.
    Failed(RequestError),
    /// The drain cap ran out while the request was still streaming.
    Cut,
}

/// Timings of one streamed completion.
#[derive(Debug)]
pub struct RequestRecord {
    /// When the request was sent.
    pub started: Instant,
    /// When the stream ended (or was cut).
    pub finished: Instant,
    /// Arrival time of every chunk that carried non-empty text, in order.
    pub content_chunks: Vec<Instant>,
    /// Usage as the server reported it, if it did.
    pub usage: Option<UsageCounts>,
    /// How the request ended.
    pub outcome: Outcome,
}

impl RequestRecord {
    /// Time to the first non-empty content chunk.
    pub fn time_to_first_token(&self) -> Option<Duration> {
        self.content_chunks.first().map(|t| *t - self.started)
    }

    /// Generated tokens: the server's count when it reported usage, otherwise one per chunk.
    pub fn completion_tokens(&self) -> u64 {
        self.usage
            .and_then(|u| u.completion_tokens)
            .unwrap_or(self.content_chunks.len() as u64)
    }

    /// Tokens attributed to each content chunk. Servers do not say how many tokens a chunk holds
    /// (a detokenizer holding back half a character sends two at once), so the request's count is
    /// spread evenly over its chunks.
    pub fn tokens_per_chunk(&self) -> f64 {
        if self.content_chunks.is_empty() {
            return 0.0;
        }
        self.completion_tokens() as f64 / self.content_chunks.len() as f64
    }

    /// Inter-token latencies in milliseconds: each gap between content chunks divided by the
    /// tokens its chunk carries.
    pub fn inter_token_latencies_ms(&self) -> impl Iterator<Item = f64> + '_ {
        let per_chunk = self.tokens_per_chunk().max(1.0);
        self.content_chunks
            .windows(2)
            .map(move |pair| (pair[1] - pair[0]).as_secs_f64() * 1e3 / per_chunk)
    }
}

/// Live counters the progress line reads while requests run.
#[derive(Debug, Default)]
pub struct LiveCounters {
    /// Content chunks received so far.
    pub chunks: AtomicU64,
    /// Requests that reached `[DONE]`.
    pub completed: AtomicU64,
    /// Requests that failed.
    pub failed: AtomicU64,
    /// Requests currently streaming.
    pub in_flight: AtomicU64,
}

/// The shape of a server's `/tokenize` endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeApi {
    /// vLLM and sluice: `{model, prompt}` answered with `{tokens, count}`.
    ModelPrompt,
    /// llama-server: `{content}` answered with `{tokens}`.
    Content,
}

/// One generation request of the workload.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// Model name as the server knows it.
    pub model: String,
    /// Prompt text.
    pub prompt: String,
    /// Exact number of tokens to generate (sent with `ignore_eos`).
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
}

/// An OpenAI-compatible server under test.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    /// Base URL of the OpenAI routes, without a trailing slash (`http://127.0.0.1:8000/v1`).
    base_url: String,
    api_key: Option<String>,
}

impl Endpoint {
    /// A client for `base_url` (the prefix of `/completions`, usually ending in `/v1`).
    pub fn new(base_url: &str, api_key: Option<String>) -> Result<Self, reqwest::Error> {
        // Mozilla's roots beside the system's: with the system's alone, building the client
        // fails (even for plain http) where the ca-certificates package is missing.
        let mozilla = (webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter())
            .filter_map(|der| reqwest::Certificate::from_der(der).ok());
        let http = reqwest::Client::builder()
            .tls_certs_merge(mozilla)
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .build()?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
        })
    }

    /// The server root: the base URL without its `/v1` suffix, where `/tokenize` lives.
    fn server_root(&self) -> &str {
        self.base_url
            .strip_suffix("/v1")
            .unwrap_or(self.base_url.as_str())
    }

    fn post(&self, url: String) -> reqwest::RequestBuilder {
        let request = self.http.post(url);
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// The first model `/v1/models` lists.
    pub async fn first_model(&self) -> Result<String, RequestError> {
        let mut request = self.http.get(format!("{}/models", self.base_url));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let body: Value = checked(request.send().await?).await?.json().await?;
        body.pointer("/data/0/id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RequestError::UnexpectedResponse {
                endpoint: "/v1/models",
                detail: body.to_string(),
            })
    }

    /// Finds which `/tokenize` dialect the server speaks, if any, by tokenizing `probe`.
    pub async fn detect_tokenize(&self, model: &str, probe: &str) -> Option<TokenizeApi> {
        for api in [TokenizeApi::ModelPrompt, TokenizeApi::Content] {
            // llama-server answers `{model, prompt}` with an empty token list, hence the `> 0`.
            if matches!(self.count_tokens(api, model, probe).await, Ok(n) if n > 0) {
                return Some(api);
            }
        }
        None
    }

    /// Number of tokens the server's tokenizer makes of `text`.
    pub async fn count_tokens(
        &self,
        api: TokenizeApi,
        model: &str,
        text: &str,
    ) -> Result<usize, RequestError> {
        let body = match api {
            TokenizeApi::ModelPrompt => json!({ "model": model, "prompt": text }),
            TokenizeApi::Content => json!({ "content": text }),
        };
        let url = format!("{}/tokenize", self.server_root());
        let answer: Value = checked(self.post(url).json(&body).send().await?)
            .await?
            .json()
            .await?;
        if let Some(count) = answer.get("count").and_then(Value::as_u64) {
            return Ok(count as usize);
        }
        answer
            .get("tokens")
            .and_then(Value::as_array)
            .map(Vec::len)
            .ok_or_else(|| RequestError::UnexpectedResponse {
                endpoint: "/tokenize",
                detail: answer.to_string(),
            })
    }

    /// Embeds `inputs` copies-worth of distinct prompts in one `/embeddings` request. Each
    /// returned embedding counts as one "output token" arriving when the response did, so the
    /// level's output rate is embeddings per second.
    pub async fn embed(
        &self,
        model: &str,
        inputs: Vec<String>,
        cut_at: Instant,
        live: &LiveCounters,
    ) -> RequestRecord {
        let started = Instant::now();
        let wanted = inputs.len();
        live.in_flight.fetch_add(1, Ordering::Relaxed);
        let body = json!({"model": model, "input": inputs});
        let url = format!("{}/embeddings", self.base_url);
        let answer = async {
            let response = checked(self.post(url).json(&body).send().await?).await?;
            let value: Value = response.json().await?;
            let got = value["data"].as_array().map_or(0, Vec::len);
            if got != wanted {
                return Err(RequestError::UnexpectedResponse {
                    endpoint: "/embeddings",
                    detail: format!("{got} embeddings for {wanted} inputs"),
                });
            }
            let prompt_tokens = value["usage"]["prompt_tokens"].as_u64();
            Ok(prompt_tokens)
        };
        let outcome = tokio::time::timeout_at(cut_at, answer).await;
        live.in_flight.fetch_sub(1, Ordering::Relaxed);
        let finished = Instant::now();
        let mut record = RequestRecord {
            started,
            finished,
            content_chunks: Vec::new(),
            usage: None,
            outcome: Outcome::Cut,
        };
        match outcome {
            Ok(Ok(prompt_tokens)) => {
                live.completed.fetch_add(1, Ordering::Relaxed);
                live.chunks.fetch_add(wanted as u64, Ordering::Relaxed);
                record.content_chunks = vec![finished; wanted];
                record.usage = Some(UsageCounts {
                    prompt_tokens,
                    completion_tokens: Some(wanted as u64),
                });
                record.outcome = Outcome::Completed;
            }
            Ok(Err(error)) => {
                live.failed.fetch_add(1, Ordering::Relaxed);
                record.outcome = Outcome::Failed(error);
            }
            Err(_elapsed) => {}
        }
        record
    }

    /// Streams one completion, timing every chunk. Gives up at `cut_at` with [`Outcome::Cut`].
    pub async fn stream_completion(
        &self,
        request: &CompletionRequest,
        cut_at: Instant,
        live: &LiveCounters,
    ) -> RequestRecord {
        let mut record = RequestRecord {
            started: Instant::now(),
            finished: Instant::now(),
            content_chunks: Vec::new(),
            usage: None,
            outcome: Outcome::Cut,
        };
        live.in_flight.fetch_add(1, Ordering::Relaxed);
        let streamed =
            tokio::time::timeout_at(cut_at, self.read_stream(request, &mut record, live));
        record.outcome = match streamed.await {
            Ok(Ok(())) => {
                live.completed.fetch_add(1, Ordering::Relaxed);
                Outcome::Completed
            }
            Ok(Err(error)) => {
                live.failed.fetch_add(1, Ordering::Relaxed);
                Outcome::Failed(error)
            }
            Err(_elapsed) => Outcome::Cut,
        };
        live.in_flight.fetch_sub(1, Ordering::Relaxed);
        record.finished = Instant::now();
        record
    }

    async fn read_stream(
        &self,
        request: &CompletionRequest,
        record: &mut RequestRecord,
        live: &LiveCounters,
    ) -> Result<(), RequestError> {
        let body = json!({
            "model": request.model,
            "prompt": request.prompt,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "ignore_eos": true,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        let url = format!("{}/completions", self.base_url);
        let response = checked(self.post(url).json(&body).send().await?).await?;
        let mut bytes = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        while let Some(read) = bytes.next().await {
            let arrived = Instant::now();
            for event in decoder.push(&read?) {
                if handle_event(parse_stream_message(&event)?, arrived, record, live)? {
                    return Ok(());
                }
            }
        }
        if let Some(event) = decoder.finish() {
            if handle_event(parse_stream_message(&event)?, Instant::now(), record, live)? {
                return Ok(());
            }
        }
        Err(RequestError::Truncated)
    }
}

/// Applies one stream message to the record; `Ok(true)` once the stream is done.
fn handle_event(
    message: StreamMessage,
    arrived: Instant,
    record: &mut RequestRecord,
    live: &LiveCounters,
) -> Result<bool, RequestError> {
    match message {
        StreamMessage::Done => Ok(true),
        StreamMessage::Error(message) => Err(RequestError::Stream(message)),
        StreamMessage::Chunk { text, usage } => {
            if !text.is_empty() {
                record.content_chunks.push(arrived);
                live.chunks.fetch_add(1, Ordering::Relaxed);
            }
            if usage.is_some() {
                record.usage = usage;
            }
            Ok(false)
        }
    }
}

/// Turns a non-success status into [`RequestError::Status`] with the start of the body.
async fn checked(response: reqwest::Response) -> Result<reqwest::Response, RequestError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let mut body = response.text().await.unwrap_or_default();
    if let Some((cut, _)) = body.char_indices().nth(300) {
        body.truncate(cut);
    }
    Err(RequestError::Status {
        status: status.as_u16(),
        body,
    })
}
