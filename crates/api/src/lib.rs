//! sluice's OpenAI-compatible HTTP API: wire types, validation into `Valid*` types, axum routes,
//! server-sent-event streaming, OpenAI error bodies and the Prometheus metrics endpoint.
//!
//! The binary builds a [`router`] from its loaded models and serves it with [`server::serve`]
//! (request-header deadline, graceful shutdown); bounding the drain and stopping the engines
//! is the binary's.

pub mod api_metrics;
pub mod assemble;
pub mod auth;
pub mod chat_turn;
pub mod cors;
pub mod dialect;
pub mod error;
pub mod extract;
pub mod generation;
pub mod prometheus;
pub mod registry;
pub mod responses_store;
pub mod routes;
pub mod scoring;
pub mod server;
pub mod sse;
pub mod validate;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;

pub use error::ApiError;
pub use registry::{ModelRegistry, ServedModel};

/// HTTP-level settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// When not empty, `/v1/*`, `/tokenize`, `/detokenize` and `/admin/*` need one of these
    /// keys (`Authorization: Bearer <key>` or `X-Api-Key: <key>`); each key is its own
    /// prefix-cache scope.
    pub api_keys: Vec<String>,
    /// Leave `usage.prompt_tokens_details` out of responses: with one key shared by many
    /// users, cached-token counts tell a caller what others sent.
    pub hide_cached_tokens: bool,
    /// Origins (or `*`) whose browser apps may call the API (CORS); empty: no CORS.
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
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            api_keys: Vec::new(),
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
    /// Slots for prompt tokenization (`max_concurrent_tokenizations`).
    pub tokenizing: Arc<tokio::sync::Semaphore>,
    /// Keys the prefix-cache salts of callers ([`auth::Caller::cache_salt`]); random per start.
    pub cache_salt_hasher: std::collections::hash_map::RandomState,
    /// `/v1/responses` stored with `store: true`, for `previous_response_id` and retrieval.
    pub responses: Arc<responses_store::ResponseStore>,
}

/// The whole HTTP API over `models`.
pub fn router(models: Vec<ServedModel>, config: ApiConfig) -> Router {
    router_for(Arc::new(ModelRegistry::new(models)), config)
}

/// The whole HTTP API over a registry the caller keeps a handle to.
pub fn router_for(registry: Arc<ModelRegistry>, config: ApiConfig) -> Router {
    let state = AppState {
        registry,
        tokenizing: Arc::new(tokio::sync::Semaphore::new(
            config.max_concurrent_tokenizations.max(1),
        )),
        responses: Arc::new(responses_store::ResponseStore::new(
            config.stored_responses,
            config.stored_response_ttl,
        )),
        config: Arc::new(config),
        cache_salt_hasher: Default::default(),
    };
    let protected = Router::new()
        .route(
            "/v1/chat/completions",
            post(routes::chat::create_chat_completion),
        )
        .route(
            "/v1/completions",
            post(routes::completions::create_completion),
        )
        .route(
            "/v1/embeddings",
            post(routes::embeddings::create_embeddings),
        )
        .route("/v1/responses", post(routes::responses::create_response))
        .route(
            "/v1/responses/{id}",
            get(routes::responses::retrieve_response).delete(routes::responses::delete_response),
        )
        .route("/v1/messages", post(routes::messages::create_message))
        .route(
            "/v1/messages/count_tokens",
            post(routes::messages::count_tokens),
        )
        .route("/v1/rerank", post(routes::rerank::rerank))
        .route("/rerank", post(routes::rerank::rerank))
        .route("/v1/score", post(routes::rerank::score))
        .route("/v1/models", get(routes::models::list_models))
        .route("/v1/models/{*id}", get(routes::models::retrieve_model))
        .route("/tokenize", post(routes::tokenize::tokenize))
        .route("/detokenize", post(routes::tokenize::detokenize))
        .route("/admin/models", get(routes::admin::list_models))
        .route("/admin/models/{*path}", post(routes::admin::model_action))
        .route_layer(from_fn_with_state(state.clone(), auth::require_api_key));
    let cors = !state.config.allowed_origins.is_empty();
    let app = Router::new()
        .route("/health", get(routes::health::health))
        .route("/version", get(routes::health::version))
        .route("/metrics", get(routes::metrics::metrics))
        .route("/openapi.json", get(routes::openapi::openapi))
        .merge(protected)
        .fallback(routes::route_not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .with_state(state.clone());
    if cors {
        app.layer(from_fn_with_state(state, cors::cors))
    } else {
        app
    }
}
