//! `GET /metrics`: Prometheus text under vLLM's names.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::prometheus;
use crate::AppState;

/// Every served model's engine metrics.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let snapshots: Vec<_> = state
        .registry
        .models()
        .iter()
        .map(|m| (m.id.clone(), m.engine.metrics().snapshot()))
        .collect();
    (
        [(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)],
        prometheus::render(&snapshots),
    )
}
