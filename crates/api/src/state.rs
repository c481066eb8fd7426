//! What every handler sees: the HTTP-level settings and the state shared across requests.

use std::collections::hash_map::RandomState;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::Caller;
use crate::lifecycle::Lifecycle;
use crate::media::{MediaFetchConfig, MediaFetcher};
use crate::registry::ModelRegistry;
use crate::responses_store::ResponseStore;
use crate::tokenizing::TokenizingSlots;

/// HTTP-level settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// When not empty, `/v1/*`, `/tokenize`, `/detokenize` and `/admin/*` need one of these
    /// keys (`Authorization: Bearer <key>` or `X-Api-Key: <key>`); each key is its own
    /// prefix-cache scope.
    pub api_keys: Vec<String>,
    /// `--admin-key`: when set, `/admin/*` needs this key and no API key opens it; it also
    /// opens the API routes (one shared prefix-cache scope of its own). When not set, the
    /// admin routes take the API keys like `/v1/*`.
    pub admin_key: Option<String>,
    /// Leave `usage.prompt_tokens_details` out of responses: with one key shared by many
    /// users, cached-token counts tell a caller what others sent.
    pub hide_cached_tokens: bool,
    /// Origins (or `*`) whose browser apps may call the API (CORS, and past the refusal of
    /// cross-origin requests that change state, see [`crate::cross_origin`]); empty: no CORS.
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body; more is a 413.
    pub max_body_bytes: usize,
    /// A client must finish sending its body within this time (408 otherwise).
    pub request_read_timeout: Duration,
    /// Seconds sent in `Retry-After` when the queue is full.
    pub retry_after_secs: u64,
    /// Tokenize special-token text inside chat messages into control tokens, as before the
    /// fix for prompt injection (a user could write a system turn). Off by default.
    pub parse_special_tokens_in_messages: bool,
    /// Prompts templated and tokenized at once; more wait their turn.
    pub max_concurrent_tokenizations: usize,
    /// `--tool-call-parser`: the tool-call format of every model's output, by name (`hermes`,
    /// `qwen3_coder`, `llama3_json`, `mistral`, `generic`); `None` detects it from each
    /// model's chat template.
    pub tool_call_parser: Option<String>,
    /// Most `/v1/responses` kept for `previous_response_id` (oldest evicted first).
    pub stored_responses: usize,
    /// How long a stored response stays retrievable.
    pub stored_response_ttl: Duration,
    /// Most bytes (estimated memory) the stored responses hold in all; beyond it the oldest
    /// entry of the caller holding the most goes first.
    pub stored_response_bytes: usize,
    /// Most bytes the stored responses of one API key hold (its oldest go first); a response
    /// larger than this alone is not stored. Without API keys only the total applies.
    pub stored_response_bytes_per_key: usize,
    /// `/health/live` fails when an engine with work has not come round its loop for longer
    /// (`--liveness-timeout`; one CPU step over a long prompt can take a while).
    pub liveness_timeout: Duration,
    /// `--clamp-max-tokens`: a `max_tokens` beyond the rest of the context is cut to it (as
    /// llama-server does) instead of a 400.
    pub clamp_max_tokens: bool,
    /// How often a stream whose protocol has a keep-alive event (Messages' `ping`, Responses'
    /// `response.in_progress`) sends one while it has nothing else to send, until its first
    /// content: clients such as Claude Code give up on a stream with no event for 300 s, which
    /// a long prompt's prefill can take, and SSE comments do not count.
    pub stream_keep_alive: Duration,
    /// Which image URLs are fetched (`--allowed-media-domains`) and each fetch's limits.
    pub media: MediaFetchConfig,
}

/// Default of [`ApiConfig::stream_keep_alive`].
pub const STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            api_keys: Vec::new(),
            admin_key: None,
            hide_cached_tokens: false,
            parse_special_tokens_in_messages: false,
            allowed_origins: Vec::new(),
            max_body_bytes: 4 * 1024 * 1024,
            request_read_timeout: Duration::from_secs(30),
            retry_after_secs: 1,
            max_concurrent_tokenizations: std::thread::available_parallelism()
                .map_or(2, |n| n.get()),
            tool_call_parser: None,
            stored_responses: 1024,
            stored_response_ttl: Duration::from_secs(3600),
            stored_response_bytes: crate::responses_store::DEFAULT_MAX_BYTES,
            stored_response_bytes_per_key: crate::responses_store::DEFAULT_MAX_BYTES_PER_KEY,
            liveness_timeout: Duration::from_secs(300),
            clamp_max_tokens: false,
            stream_keep_alive: STREAM_KEEP_ALIVE,
            media: MediaFetchConfig::default(),
        }
    }
}

/// What every handler sees.
#[derive(Clone)]
pub struct AppState {
    /// The served models.
    pub registry: Arc<ModelRegistry>,
    /// HTTP-level settings.
    pub config: Arc<ApiConfig>,
    /// Slots for prompt tokenization (`max_concurrent_tokenizations`), shared fairly between
    /// callers.
    pub tokenizing: TokenizingSlots,
    /// Keys the fair-share ids of callers ([`crate::auth::Caller::fair_share_id`]); random per
    /// start (the prefix-cache scopes are stable digests instead, see `Caller::cache_salt`).
    pub fair_share_hasher: RandomState,
    /// `/v1/responses` stored with `store: true`, for `previous_response_id` and retrieval.
    pub responses: Arc<ResponseStore>,
    /// Starting, serving or draining, and the API requests in flight (the health probes).
    pub lifecycle: Arc<Lifecycle>,
    /// Fetches image URLs from the allowed hosts (`config.media`).
    pub media: Arc<MediaFetcher>,
}

impl AppState {
    /// Who a request of `caller` with this `user` field counts as for fair sharing (see
    /// [`Caller::fair_share_id`]).
    pub fn fair_share_id(&self, caller: &Caller, user: Option<&str>) -> Option<u64> {
        caller.fair_share_id(&self.fair_share_hasher, self.config.api_keys.len(), user)
    }

    /// The state of a server over `registry` with `config`, serving from the start.
    pub fn new(registry: Arc<ModelRegistry>, config: ApiConfig) -> Self {
        Self::with_lifecycle(registry, config, Arc::new(Lifecycle::serving()))
    }

    /// The state of a server whose phase `lifecycle` tracks (the binary's: it preloads and
    /// drains).
    pub fn with_lifecycle(
        registry: Arc<ModelRegistry>,
        config: ApiConfig,
        lifecycle: Arc<Lifecycle>,
    ) -> Self {
        AppState {
            lifecycle,
            registry,
            tokenizing: TokenizingSlots::new(config.max_concurrent_tokenizations),
            responses: Arc::new(
                ResponseStore::new(config.stored_responses, config.stored_response_ttl)
                    .with_byte_budgets(
                        config.stored_response_bytes,
                        config.stored_response_bytes_per_key,
                    ),
            ),
            media: Arc::new(MediaFetcher::new(config.media.clone())),
            config: Arc::new(config),
            fair_share_hasher: Default::default(),
        }
    }
}
