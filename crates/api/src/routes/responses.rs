//! `POST /v1/responses` (OpenAI's Responses API, what the Codex CLI and the Agents SDK speak),
//! `GET /v1/responses/{id}` and `DELETE /v1/responses/{id}`.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use crate::auth::Caller;
use crate::chat_turn::generate_turn;
use crate::dialect::responses::{response_meta, ResponsesRenderer};
use crate::dialect::turn_parse::CallIds;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::responses_store::json_heap_bytes;
use crate::validate::responses::{validate_responses, ValidResponsesRequest};
use crate::wire::responses::ResponsesRequest;
use crate::AppState;

/// Creates a model response; with `store` (the default) it is kept for
/// `previous_response_id` and retrieval, by the caller's API key.
pub async fn create_response(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<ResponsesRequest>,
) -> Result<Response, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("generation")?;
    let previous = match &req.previous_response_id {
        Some(id) => Some(
            state
                .responses
                .get(id, caller.key)
                .ok_or_else(|| ApiError::ResponseNotFound(id.clone()))?,
        ),
        None => None,
    };
    (state.media)
        .fetch_response_images(&mut req, model.limits().takes_images)
        .await?;
    let valid = validate_responses(req, model.limits(), previous.as_ref())?;
    if valid.echo.store {
        check_storable(&state, &valid, caller.key)?;
    }
    let meta = response_meta(&model.id);
    let store = valid.echo.store.then(|| state.responses.clone());
    let (conversation, input_start, echo) = (valid.conversation, valid.input_start, valid.echo);
    let custom_tools = valid.custom_tools;
    let owner = caller.key;
    generate_turn(
        &state,
        &caller,
        model,
        valid.chat,
        CallIds::OpenAi,
        move |_| {
            let renderer = ResponsesRenderer::new(meta, echo).with_custom_tools(custom_tools);
            match store {
                Some(store) => renderer.storing(store, conversation, input_start, owner),
                None => renderer,
            }
        },
    )
    .await
    // The conversation is `input` here: errors about it say so.
    .map_err(|e| e.with_param_renamed("messages", "input"))
}

/// Refuses, before any work, a response that could not be stored because its request alone
/// (the conversation it keeps, with the tools, instructions and metadata its body repeats)
/// exceeds what the caller may store. A response whose output pushes it over is still
/// answered, with `"store": false` ([`ResponsesRenderer::storing`]).
fn check_storable(
    state: &AppState,
    valid: &ValidResponsesRequest,
    owner: Option<usize>,
) -> Result<(), ApiError> {
    let echo = &valid.echo;
    let at_least = json_heap_bytes(&valid.conversation)
        + json_heap_bytes(&echo.tools)
        + json_heap_bytes(&echo.metadata)
        + echo.instructions.as_ref().map_or(0, String::len);
    state
        .responses
        .check_room(at_least, owner)
        .map_err(|too_large| ApiError::InvalidRequest {
            message: format!(
                "storing this response would take at least {at_least} bytes, more than {}: \
                 send \"store\": false (and the whole conversation with each request)",
                too_large.budget_text()
            ),
            param: Some("store".into()),
            code: Some("response_too_large_to_store"),
        })
}

/// A stored response, as it was returned.
pub async fn retrieve_response(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let stored = (state.responses.get(&id, caller.key)).ok_or(ApiError::ResponseNotFound(id))?;
    Ok(Json(stored.body).into_response())
}

/// Forgets a stored response.
pub async fn delete_response(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !state.responses.delete(&id, caller.key) {
        return Err(ApiError::ResponseNotFound(id));
    }
    Ok(Json(json!({"id": id, "object": "response", "deleted": true})).into_response())
}
