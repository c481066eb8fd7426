//! `GET /health` and `GET /version`: open to load balancers, no API key.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::AppState;

/// 200 while every engine in memory runs; 503 when one has died (or a fixed list is empty).
pub async fn health(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    state.registry.health()?;
    Ok(Json(json!({"status": "ok"})))
}

/// The server's version.
pub async fn version() -> Json<Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}
