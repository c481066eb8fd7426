//! `GET /v1/models` and `GET /v1/models/{id}`.

use axum::extract::{Path, State};
use axum::Json;

use crate::error::ApiError;
use crate::wire::models::{ModelCard, ModelList};
use crate::AppState;

/// Lists the served models.
pub async fn list_models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: state.registry.models().iter().map(|m| m.card()).collect(),
    })
}

/// One served model; ids may contain slashes (`org/name`).
pub async fn retrieve_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ModelCard>, ApiError> {
    Ok(Json(state.registry.get(&id)?.card()))
}
