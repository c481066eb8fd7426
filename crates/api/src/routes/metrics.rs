//! `GET /metrics`: Prometheus text under vLLM's names.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::prometheus;
use crate::AppState;

/// Every loaded model's engine metrics, then the model pool's, the API's (tokenizing slots
/// included) and the Responses store's.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let snapshots: Vec<_> = state
        .registry
        .models()
        .iter()
        .map(|m| (m.id.clone(), m.engine.metrics().snapshot()))
        .collect();
    let mut text = prometheus::render(&snapshots);
    if let Some(pool) = state.registry.pool() {
        prometheus::render_pool(&mut text, &pool.snapshot());
    }
    crate::api_metrics::render(&mut text);
    crate::api_metrics::render_tokenizing(&mut text, state.tokenizing.usage());
    crate::api_metrics::render_store(&mut text, &state.responses.usage());
    ([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], text)
}
