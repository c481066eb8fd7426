//! `GET /v1/models` and `GET /v1/models/{id}`: every served model, loaded or not, with its
//! `status`; listing never loads a model.

use axum::extract::{Path, State};
use axum::Json;

use crate::error::ApiError;
use crate::wire::models::{ModelCard, ModelList};
use crate::AppState;

/// Lists the served models.
pub async fn list_models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: state.registry.cards(),
    })
}

/// One served model; ids may contain slashes (`org/name`).
pub async fn retrieve_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ModelCard>, ApiError> {
    Ok(Json(state.registry.card(&id)?))
}
