//! A chat-like request's prompt: its conversation rendered with the model's chat template and
//! tokenized, special-token text in the client's strings kept as text.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::Value;
use sluice_text::{MaskedSpecials, TextError, Tokenizer};

use crate::error::ApiError;
use crate::generation::tokenize_off_runtime_until_gone;
use crate::registry::ServedModel;
use crate::validate::{check_prompt_text_fits, ValidChatRequest};
use crate::AppState;

/// Renders a chat-like request's conversation with the model's template and tokenizes it off
/// the runtime, in a tokenizing slot fair sharing gives `caller`; the tokens and the rendered
/// text.
pub async fn render_and_encode(
    state: &AppState,
    model: &ServedModel,
    valid: &ValidChatRequest,
    caller: Option<u64>,
) -> Result<(Vec<u32>, String), ApiError> {
    let tokenizer = model.tokenizer.clone();
    let messages = valid.messages.clone();
    let tools = valid.tools.template_tools();
    let template_kwargs = valid.template_kwargs.clone();
    let max_model_len = Some(model.max_model_len);
    let parse_specials = state.config.parse_special_tokens_in_messages;
    tokenize_off_runtime_until_gone(state, caller, move |client_gone| {
        let conversation = Conversation {
            messages,
            tools,
            template_kwargs,
            add_generation_prompt: true,
            client_gone: Some(client_gone),
        };
        encode_chat(
            &tokenizer,
            conversation,
            parse_specials,
            max_model_len,
            false,
        )
    })
    .await
}

/// What a chat template renders.
pub struct Conversation {
    /// Messages as `template_messages` made them.
    pub messages: Value,
    /// Tool definitions.
    pub tools: Option<Value>,
    /// Extra template variables (a JSON object).
    pub template_kwargs: Option<Value>,
    /// End with the assistant turn's opening.
    pub add_generation_prompt: bool,
    /// Set when the client has gone away: the render stops at its next check.
    pub client_gone: Option<Arc<AtomicBool>>,
}

/// Renders a conversation and tokenizes it; returns the tokens and the rendered text. Special-token text inside the client's strings is
/// tokenized as text, so only the template's own markup yields control tokens, unless
/// `parse_specials` (the server's `--parse-special-tokens-in-messages`) asks for the old,
/// injectable behaviour. With `max_model_len`, a rendering too long for the context whatever
/// its tokenization is refused before it is tokenized. Blocking: call off the runtime.
pub fn encode_chat(
    tokenizer: &Arc<Tokenizer>,
    mut conversation: Conversation,
    parse_specials: bool,
    max_model_len: Option<usize>,
    add_special_tokens: bool,
) -> Result<(Vec<u32>, String), ApiError> {
    let mut masked = MaskedSpecials::default();
    if !parse_specials {
        tokenizer.mask_special_literals(&mut conversation.messages, &mut masked);
        if let Some(tools) = conversation.tools.as_mut() {
            tokenizer.mask_special_literals(tools, &mut masked);
        }
    }
    let text = render_chat_text(tokenizer, &conversation)?;
    if let Some(max_model_len) = max_model_len {
        let bytes = if masked.is_empty() {
            text.len()
        } else {
            masked.restore(&text).len()
        };
        let min_tokens = tokenizer.min_tokens_for_text_bytes(bytes);
        check_prompt_text_fits(bytes, min_tokens, max_model_len, "messages")?;
    }
    // The template writes BOS and the other special tokens itself.
    let tokens = tokenizer
        .encode_rendered(&text, &masked, add_special_tokens)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok((tokens, text))
}

/// Renders `messages` with the model's chat template; a model without one is a 400, and so is
/// a template over its render budget (`sluice_text::RenderLimits`: instructions, bytes, time;
/// the message names the limit). Blocking: call through `off_runtime`.
pub fn render_chat_text(
    tokenizer: &Arc<Tokenizer>,
    conversation: &Conversation,
) -> Result<String, ApiError> {
    let template = tokenizer.chat_template().ok_or_else(|| {
        ApiError::invalid(
            "messages",
            match tokenizer.chat_template_error() {
                Some(e) => format!(
                    "this model's chat template does not compile ({e}); use /v1/completions"
                ),
                None => "this model has no chat template; use /v1/completions with a plain prompt"
                    .to_string(),
            },
        )
    })?;
    template
        .render_cancellable(
            &conversation.messages,
            conversation.add_generation_prompt,
            conversation.tools.as_ref(),
            conversation.template_kwargs.as_ref(),
            conversation.client_gone.clone(),
        )
        .map_err(|e| match e {
            TextError::Template(m) | TextError::InvalidMessages(m) => {
                ApiError::invalid("messages", m)
            }
            other => ApiError::Internal(other.to_string()),
        })
}
