//! `POST /tokenize` and `POST /detokenize`, as vLLM has them.

use axum::extract::State;
use axum::{Extension, Json};

use crate::auth::Caller;
use crate::chat_turn::{encode_chat_with_images, encode_images, Conversation};
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::{off_runtime, tokenize_off_runtime, tokenize_off_runtime_until_gone};
use crate::validate::chat::{check_images, template_kwargs, template_messages_with_images};
use crate::validate::check_token_id;
use crate::validate::tools::{openai_tools, ToolRequest};
use crate::wire::tokenize::{
    DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse,
};
use crate::AppState;

/// Tokenizes a prompt, or a conversation rendered with the chat template.
pub async fn tokenize(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(req): OpenAiJson<TokenizeRequest>,
) -> Result<Json<TokenizeResponse>, ApiError> {
    let fair_share_id = state.fair_share_id(&caller, None);
    let model = state.registry.resolve(req.model.as_deref()).await?;
    let tokenizer = model.tokenizer.clone();
    let return_strs = req.return_token_strs.unwrap_or(false);
    let tokens = match (req.prompt, req.messages) {
        (Some(prompt), None) => {
            let add_special = req.add_special_tokens.unwrap_or(true);
            let tokenizer = tokenizer.clone();
            tokenize_off_runtime(&state, fair_share_id, move || {
                tokenizer
                    .encode(&prompt, add_special)
                    .map_err(|e| ApiError::Internal(e.to_string()))
            })
            .await?
        }
        (None, Some(mut messages)) => {
            (state.media)
                .fetch_chat_images(&mut messages, model.limits().takes_images)
                .await?;
            // Images count as the tokens they become (each is encoded, and so cached for
            // the request that follows).
            let mut images = Vec::new();
            let messages = template_messages_with_images(&messages, Some(&mut images))?;
            check_images(&images, model.limits())?;
            let input = model.images.clone();
            let add_generation_prompt = req.add_generation_prompt.unwrap_or(true);
            let add_special = req.add_special_tokens.unwrap_or(false);
            // The tools as a chat request's reach the template (validated, in the form
            // `template_tools` gives), so the count is the prompt a chat completion runs.
            let tools = ToolRequest {
                tools: openai_tools(req.tools.as_ref())?,
                ..ToolRequest::default()
            }
            .template_tools();
            let template_kwargs = template_kwargs(req.chat_template_kwargs, None)?;
            let tokenizer = tokenizer.clone();
            let parse_specials = state.config.parse_special_tokens_in_messages;
            tokenize_off_runtime_until_gone(&state, fair_share_id, move |client_gone| {
                let conversation = Conversation {
                    messages,
                    tools,
                    template_kwargs,
                    add_generation_prompt,
                    client_gone: Some(client_gone),
                };
                let images = encode_images(input.as_deref(), &images)?;
                let encoded = encode_chat_with_images(
                    &tokenizer,
                    conversation,
                    parse_specials,
                    None,
                    add_special,
                    images,
                )?;
                Ok(encoded.tokens)
            })
            .await?
        }
        _ => {
            return Err(ApiError::malformed(
                "give exactly one of 'prompt' or 'messages'",
            ))
        }
    };
    let token_strs = return_strs.then(|| {
        tokens
            .iter()
            .map(|&t| tokenizer.token_str(t).unwrap_or_default())
            .collect()
    });
    Ok(Json(TokenizeResponse {
        count: tokens.len(),
        max_model_len: model.max_model_len,
        tokens,
        token_strs,
    }))
}

/// Turns token ids back into text (special tokens included).
pub async fn detokenize(
    State(state): State<AppState>,
    OpenAiJson(req): OpenAiJson<DetokenizeRequest>,
) -> Result<Json<DetokenizeResponse>, ApiError> {
    let model = state.registry.resolve(req.model.as_deref()).await?;
    let vocab_size = model.tokenizer.vocab_size();
    let tokens = req
        .tokens
        .into_iter()
        .map(|id| check_token_id("tokens", id, vocab_size))
        .collect::<Result<Vec<_>, _>>()?;
    let tokenizer = model.tokenizer.clone();
    let prompt = off_runtime(move || {
        tokenizer
            .decode(&tokens, false)
            .map_err(|e| ApiError::invalid("tokens", e.to_string()))
    })
    .await?;
    Ok(Json(DetokenizeResponse { prompt }))
}
