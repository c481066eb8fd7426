//! The model pool's admin routes, behind `--admin-key` when it is set and else behind
//! `--api-key` like the rest of the API (see [`crate::auth`]):
//!
//! - `GET /admin/models`: every model with its status, memory, requests and last use.
//! - `POST /admin/models/{id}/load`: loads the model (unloading idle ones to make room) and
//!   answers once it is loaded; 503 when it cannot fit, 500 when its files are bad.
//! - `POST /admin/models/{id}/unload`: unloads an idle model and answers once its memory is
//!   freed. It never waits for or cuts off requests: a model with requests in flight, a pinned
//!   model or one still loading is refused with 409, and the caller retries when it is idle.
//! - `POST /admin/models/{id}/pin` and `.../unpin`: a pinned model is never unloaded, neither
//!   to make room nor by an admin; pinning neither loads nor unloads anything.
//!
//! The `POST`s take `Content-Type: application/json` only (415 otherwise; the body may be
//! empty and is not read): a browser sends that type to another origin only after a CORS
//! preflight, which only `--allowed-origins` pass, so no page elsewhere can drive these routes
//! with a form or a `text/plain` request, whatever its browser says of its origin (the
//! [`crate::cross_origin`] check comes first).

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sluice_engine::pool::{ModelReport, PoolError};

use crate::error::{ApiError, ErrorBody, ErrorDetail};
use crate::registry::unix_seconds;
use crate::wire::models::{AdminModel, AdminModelList};
use crate::AppState;

/// An admin route's failure: any API error, or 409 when the model's state forbids the change.
#[derive(Debug)]
pub enum AdminError {
    /// The usual API errors.
    Api(ApiError),
    /// The model is busy, pinned or loading (409).
    Conflict(String),
}

impl From<ApiError> for AdminError {
    fn from(e: ApiError) -> Self {
        AdminError::Api(e)
    }
}

impl From<PoolError> for AdminError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Busy { .. } | PoolError::Pinned(_) | PoolError::Loading(_) => {
                AdminError::Conflict(e.to_string())
            }
            other => AdminError::Api(other.into()),
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        match self {
            AdminError::Api(e) => e.into_response(),
            AdminError::Conflict(message) => {
                let body = ErrorBody {
                    error: ErrorDetail {
                        message,
                        kind: "invalid_request_error".into(),
                        param: None,
                        code: Some("model_state_conflict".into()),
                    },
                };
                (StatusCode::CONFLICT, Json(body)).into_response()
            }
        }
    }
}

/// Every model with its status, memory, requests and last use.
pub async fn list_models(State(state): State<AppState>) -> Json<AdminModelList> {
    Json(admin_list(&state))
}

/// `POST /admin/models/{id}/{load,unload,pin,unpin}`; ids may contain slashes (`org/name`),
/// so the action is the last path segment.
pub async fn model_action(
    State(state): State<AppState>,
    Path(path): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Json<AdminModel>, AdminError> {
    require_json(&headers)?;
    let not_found = || {
        AdminError::Api(ApiError::RouteNotFound {
            method: method.to_string(),
            path: uri.path().to_string(),
        })
    };
    let (id, action) = path.rsplit_once('/').ok_or_else(not_found)?;
    match (action, state.registry.pool()) {
        ("load", Some(pool)) => pool.load(id).await?,
        ("unload", Some(pool)) => pool.unload(id).await?,
        ("pin", Some(pool)) => pool.set_pinned(id, true)?,
        ("unpin", Some(pool)) => pool.set_pinned(id, false)?,
        // A fixed list: every model is loaded and pinned for good.
        ("load" | "pin", None) => drop(state.registry.get(id).await?),
        ("unload" | "unpin", None) => {
            state.registry.card(id)?;
            return Err(AdminError::Conflict(format!(
                "model '{id}' is not in a model pool and cannot be {action}ed"
            )));
        }
        _ => return Err(not_found()),
    }
    admin_list(&state)
        .data
        .into_iter()
        .find(|m| m.id == id)
        .map(Json)
        .ok_or_else(|| AdminError::Api(ApiError::ModelNotFound(id.to_string(), Vec::new())))
}

/// 415 unless the request says its body is JSON.
fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("?"));
    if content_type.is_some_and(crate::extract::is_json) {
        return Ok(());
    }
    Err(ApiError::UnsupportedMediaType(format!(
        "the admin routes take Content-Type: application/json, got {}; send the header (the \
         body may be empty), e.g. curl -X POST -H 'Content-Type: application/json' URL",
        content_type.map_or("none".to_string(), |t| format!("'{t}'"))
    )))
}

fn admin_list(state: &AppState) -> AdminModelList {
    match state.registry.pool() {
        Some(pool) => {
            let snap = pool.snapshot();
            AdminModelList {
                object: "list".into(),
                max_memory_bytes: Some(snap.budget.max_memory_bytes),
                max_models: snap.budget.max_models,
                memory_used_bytes: snap.used_bytes,
                data: snap.models.iter().map(admin_model).collect(),
            }
        }
        None => AdminModelList {
            object: "list".into(),
            max_memory_bytes: None,
            max_models: None,
            memory_used_bytes: 0,
            data: state
                .registry
                .models()
                .iter()
                .map(|m| AdminModel {
                    id: m.id.clone(),
                    status: "loaded".into(),
                    pinned: true,
                    memory_bytes: 0,
                    requests: m.engine.num_unfinished(),
                    last_used: None,
                    loaded_at: Some(m.created),
                    max_model_len: m.max_model_len,
                    loads: 1,
                    unloads: 0,
                    load_failures: 0,
                    last_error: None,
                })
                .collect(),
        },
    }
}

fn admin_model(m: &ModelReport) -> AdminModel {
    AdminModel {
        id: m.id.clone(),
        status: m.status.as_str().into(),
        pinned: m.pinned,
        memory_bytes: m.memory_bytes,
        requests: m.requests,
        last_used: m.last_used.map(unix_seconds),
        loaded_at: m.loaded_at.map(unix_seconds),
        max_model_len: m.max_model_len,
        loads: m.loads,
        unloads: m.unloads,
        load_failures: m.load_failures,
        last_error: m.last_error.clone(),
    }
}
