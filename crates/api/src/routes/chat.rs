//! `POST /v1/chat/completions`.

use axum::extract::State;
use axum::response::Response;
use axum::Extension;

use crate::assemble::ResponseMeta;
use crate::auth::Caller;
use crate::chat_turn::generate_turn;
use crate::dialect::chat::ChatRenderer;
use crate::dialect::turn_parse::CallIds;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::validate::validate_chat;
use crate::wire::chat::ChatCompletionRequest;
use crate::AppState;

/// Creates a chat completion.
pub async fn create_chat_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("generation")?;
    (state.media)
        .fetch_chat_images(&mut req.messages, model.limits().takes_images)
        .await?;
    let valid = validate_chat(req, model.limits())?;
    let n = valid.params.n as usize;
    let include_usage = valid.params.stream.is_some_and(|s| s.include_usage);
    let logprobs = valid.params.sampling.logprobs.is_some();
    let meta = ResponseMeta::new("chatcmpl", &model.id);
    generate_turn(&state, &caller, model, valid, CallIds::OpenAi, |_| {
        ChatRenderer::new(meta, n, include_usage, logprobs)
    })
    .await
}
