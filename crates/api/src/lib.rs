//! sluice's OpenAI-compatible HTTP API: wire types, validation into `Valid*` types, axum routes,
//! server-sent-event streaming, OpenAI error bodies and the Prometheus metrics endpoint.
//!
//! The binary builds a [`router`] from its loaded models and serves it with [`server::serve`]
//! (request-header deadline, graceful shutdown); bounding the drain and stopping the engines
//! is the binary's.

pub mod assemble;
pub mod auth;
pub mod error;
pub mod extract;
pub mod generation;
pub mod prometheus;
pub mod registry;
pub mod routes;
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
    /// When set, `/v1/*`, `/tokenize`, `/detokenize` and `/admin/*` need
    /// `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// Largest accepted request body; more is a 413.
    pub max_body_bytes: usize,
    /// A client must finish sending its body within this time (408 otherwise).
    pub request_read_timeout: Duration,
    /// Seconds sent in `Retry-After` when the queue is full.
    pub retry_after_secs: u64,
    /// Prompts templated and tokenized at once; more wait their turn.
    pub max_concurrent_tokenizations: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            api_key: None,
            max_body_bytes: 4 * 1024 * 1024,
            request_read_timeout: Duration::from_secs(30),
            retry_after_secs: 1,
            max_concurrent_tokenizations: std::thread::available_parallelism()
                .map_or(2, |n| n.get()),
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
        config: Arc::new(config),
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
        .route("/v1/models", get(routes::models::list_models))
        .route("/v1/models/{*id}", get(routes::models::retrieve_model))
        .route("/tokenize", post(routes::tokenize::tokenize))
        .route("/detokenize", post(routes::tokenize::detokenize))
        .route("/admin/models", get(routes::admin::list_models))
        .route("/admin/models/{*path}", post(routes::admin::model_action))
        .route_layer(from_fn_with_state(state.clone(), auth::require_api_key));
    Router::new()
        .route("/health", get(routes::health::health))
        .route("/version", get(routes::health::version))
        .route("/metrics", get(routes::metrics::metrics))
        .route("/openapi.json", get(routes::openapi::openapi))
        .merge(protected)
        .fallback(routes::route_not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .with_state(state)
}
