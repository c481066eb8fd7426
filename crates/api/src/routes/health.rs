//! `GET /health` and `GET /version`: open to load balancers, no API key.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::AppState;

/// 200 while every served engine runs; 503 when none is loaded or one has died.
pub async fn health(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let models = state.registry.models();
    if models.is_empty() {
        return Err(ApiError::Unavailable("no model is loaded yet".into()));
    }
    if let Some(dead) = models.iter().find(|m| !m.engine.is_alive()) {
        return Err(ApiError::Unavailable(format!(
            "the engine of model '{}' is not running",
            dead.id
        )));
    }
    Ok(Json(json!({"status": "ok"})))
}

/// The server's version.
pub async fn version() -> Json<Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}
