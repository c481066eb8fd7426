//! sluice's OpenAI-compatible HTTP API: wire types, validation into `Valid*` types, axum routes,
//! server-sent-event streaming, OpenAI error bodies and the Prometheus metrics endpoint.
//!
//! The binary builds a [`router_with`] over its model pool and [`lifecycle::Lifecycle`], puts it
//! behind the drain gate ([`lifecycle::gate::gated`]) and serves it with [`server::serve`]
//! (request-header deadline, graceful shutdown); sequencing the drain and stopping the engines
//! is the binary's.

pub mod api_metrics;
pub mod assemble;
pub mod auth;
pub mod chat_turn;
pub mod cors;
pub mod cross_origin;
pub mod dialect;
pub mod error;
pub mod extract;
pub mod generation;
pub mod lifecycle;
pub mod media;
pub mod model_names;
pub mod prometheus;
pub mod registry;
pub mod responses_store;
pub mod routes;
pub mod scoring;
pub mod server;
pub mod sse;
pub mod state;
pub mod tokenizing;
pub mod validate;
pub mod wire;

use std::sync::Arc;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;

pub use error::ApiError;
pub use registry::{ModelRegistry, ServedModel};
pub use state::{ApiConfig, AppState};

/// The whole HTTP API over `models`.
pub fn router(models: Vec<ServedModel>, config: ApiConfig) -> Router {
    router_for(Arc::new(ModelRegistry::new(models)), config)
}

/// The whole HTTP API over a registry the caller keeps a handle to.
pub fn router_for(registry: Arc<ModelRegistry>, config: ApiConfig) -> Router {
    router_with(registry, config, Arc::new(lifecycle::Lifecycle::serving()))
}

/// The whole HTTP API over a registry, its probes reading `lifecycle` (the drain gate is the
/// caller's to add, over whatever else it merges in).
pub fn router_with(
    registry: Arc<ModelRegistry>,
    config: ApiConfig,
    lifecycle: Arc<lifecycle::Lifecycle>,
) -> Router {
    let state = AppState::with_lifecycle(registry, config, lifecycle);
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
            "/v1/chat/completions/render",
            post(routes::render::render_chat_completion),
        )
        .route(
            "/v1/completions/render",
            post(routes::render::render_completion),
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
        .route(
            "/v1/responses/{id}/input_items",
            get(routes::response_input_items::list_input_items),
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
        .route_layer(from_fn_with_state(state.clone(), auth::require_api_key));
    let admin = Router::new()
        .route("/admin/models", get(routes::admin::list_models))
        .route("/admin/models/{*path}", post(routes::admin::model_action))
        .route_layer(from_fn_with_state(state.clone(), auth::require_admin_key));
    let cors = !state.config.allowed_origins.is_empty();
    let app = Router::new()
        .route("/health", get(routes::health::health))
        .route("/health/startup", get(routes::health::startup))
        .route("/health/ready", get(routes::health::ready))
        .route("/health/live", get(routes::health::live))
        .route("/version", get(routes::health::version))
        .route("/metrics", get(routes::metrics::metrics))
        .route("/openapi.json", get(routes::openapi::openapi))
        .merge(protected)
        .merge(admin)
        .fallback(routes::route_not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(from_fn_with_state(
            state.clone(),
            cross_origin::refuse_cross_origin,
        ))
        .with_state(state.clone());
    if cors {
        app.layer(from_fn_with_state(state, cors::cors))
    } else {
        app
    }
}
