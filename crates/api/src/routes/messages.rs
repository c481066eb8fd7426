//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API, what
//! Claude Code and the `anthropic` clients speak. Errors come back in Anthropic's shape.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use crate::auth::Caller;
use crate::chat_turn::{generate_turn, render_and_encode};
use crate::dialect::messages::{message_meta, MessagesRenderer};
use crate::dialect::turn_parse::CallIds;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::validate::messages::{thinking_enabled, validate_count_tokens, validate_messages};
use crate::wire::messages::{
    anthropic_error_response, CountTokensRequest, CountTokensResponse, MessagesRequest,
};
use crate::AppState;

/// Creates a message.
pub async fn create_message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    req: Result<OpenAiJson<MessagesRequest>, ApiError>,
) -> Response {
    let run = async {
        let OpenAiJson(mut req) = req?;
        let model = state.registry.get_or_default(&mut req.model).await?;
        model.check_serves("generation")?;
        let thinking = thinking_enabled(req.thinking.as_ref());
        (state.media)
            .fetch_message_images(&mut req.messages, model.limits().takes_images)
            .await?;
        let valid = validate_messages(req, model.limits())?;
        let meta = message_meta(&model.id);
        generate_turn(
            &state,
            &caller,
            model,
            valid,
            CallIds::Anthropic,
            |prompt| MessagesRenderer::new(meta, prompt).showing_thinking(thinking),
        )
        .await
    };
    run.await
        .unwrap_or_else(|err| anthropic_error_response(&err))
}

/// Counts the tokens of the prompt a message request would render, tools and system
/// included.
pub async fn count_tokens(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    req: Result<OpenAiJson<CountTokensRequest>, ApiError>,
) -> Response {
    let run = async {
        let OpenAiJson(mut req) = req?;
        let model = state.registry.get_or_default(&mut req.model).await?;
        (state.media)
            .fetch_message_images(&mut req.messages, model.limits().takes_images)
            .await?;
        let valid = validate_count_tokens(req, model.limits())?;
        let fair_share_id = state.fair_share_id(&caller, valid.params.user.as_deref());
        let tokens = (render_and_encode(&state, &model, &valid, fair_share_id).await?).tokens;
        Ok::<_, ApiError>(
            Json(CountTokensResponse {
                input_tokens: tokens.len() as u32,
            })
            .into_response(),
        )
    };
    run.await
        .unwrap_or_else(|err| anthropic_error_response(&err))
}
