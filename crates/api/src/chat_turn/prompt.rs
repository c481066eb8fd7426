//! A chat-like request's prompt: its conversation rendered with the model's chat template and
//! tokenized, special-token text in the client's strings kept as text.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::Value;
use sluice_engine::{EncodedImage, ImageInput, PromptImages};
use sluice_text::{MaskedSpecials, TextError, Tokenizer};

use crate::error::ApiError;
use crate::generation::tokenize_off_runtime_until_gone;
use crate::registry::ServedModel;
use crate::validate::images::image_error;
use crate::validate::{check_prompt_text_fits, ImagePart, ValidChatRequest};
use crate::AppState;

/// A chat-like request's prompt, ready for the engine.
#[derive(Debug)]
pub struct EncodedPrompt {
    /// The prompt's tokens, each image's soft tokens included.
    pub tokens: Vec<u32>,
    /// The rendered text the tokens encode (images expanded to their tokens).
    pub rendered: String,
    /// The images' soft-token runs and embeddings (empty for text).
    pub images: Arc<PromptImages>,
}

/// Renders a chat-like request's conversation with the model's template, encodes its images
/// and tokenizes it off the runtime, in a tokenizing slot fair sharing gives `caller`.
pub async fn render_and_encode(
    state: &AppState,
    model: &ServedModel,
    valid: &ValidChatRequest,
    caller: Option<u64>,
) -> Result<EncodedPrompt, ApiError> {
    let tokenizer = model.tokenizer.clone();
    let messages = valid.messages.clone();
    let tools = valid.tools.template_tools();
    let template_kwargs = valid.template_kwargs.clone();
    let max_model_len = Some(model.max_model_len);
    let parse_specials = state.config.parse_special_tokens_in_messages;
    let images = valid.images.clone();
    let input = model.images.clone();
    tokenize_off_runtime_until_gone(state, caller, move |client_gone| {
        let conversation = Conversation {
            messages,
            tools,
            template_kwargs,
            add_generation_prompt: true,
            client_gone: Some(client_gone),
        };
        let images = encode_images(input.as_deref(), &images)?;
        encode_chat_with_images(
            &tokenizer,
            conversation,
            parse_specials,
            max_model_len,
            false,
            images,
        )
    })
    .await
}

/// Decodes and encodes each image with the model's `input` (or finds it encoded); a bad one,
/// or any to a model without an encoder, is a 400 naming its part. `None` for no images.
/// Blocking: call off the runtime.
pub fn encode_images<'a>(
    input: Option<&'a ImageInput>,
    images: &[ImagePart],
) -> Result<Option<(&'a ImageInput, Vec<EncodedImage>)>, ApiError> {
    let Some(first) = images.first() else {
        return Ok(None);
    };
    let Some(input) = input else {
        return Err(image_error(
            &first.part,
            "this model does not take images (it has no image encoder); send text only",
        ));
    };
    let encoded = (images.iter())
        .map(|image| (input.encode(&image.bytes)).map_err(|e| image_error(&image.part, e)))
        .collect::<Result<_, _>>()?;
    Ok(Some((input, encoded)))
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
    conversation: Conversation,
    parse_specials: bool,
    max_model_len: Option<usize>,
    add_special_tokens: bool,
) -> Result<(Vec<u32>, String), ApiError> {
    let encoded = encode_chat_with_images(
        tokenizer,
        conversation,
        parse_specials,
        max_model_len,
        add_special_tokens,
        None,
    )?;
    Ok((encoded.tokens, encoded.rendered))
}

/// [`encode_chat`] for a conversation whose `{"type": "image"}` parts are `images` (encoded
/// by `input`), in order: each image's placeholder (written by the template, or put where the
/// part was for a template that reads string contents) is expanded to the image's tokens,
/// which are then paired with its embeddings.
pub fn encode_chat_with_images(
    tokenizer: &Arc<Tokenizer>,
    mut conversation: Conversation,
    parse_specials: bool,
    max_model_len: Option<usize>,
    add_special_tokens: bool,
    images: Option<(&ImageInput, Vec<EncodedImage>)>,
) -> Result<EncodedPrompt, ApiError> {
    let mut masked = MaskedSpecials::default();
    if !parse_specials {
        tokenizer.mask_special_literals(&mut conversation.messages, &mut masked);
        if let Some(tools) = conversation.tools.as_mut() {
            tokenizer.mask_special_literals(tools, &mut masked);
        }
    }
    // After masking: the placeholders put in here are the server's, not the client's text.
    if let Some((input, _)) = &images {
        flatten_image_parts(&mut conversation.messages, input.placeholder());
    }
    let mut text = render_chat_text(tokenizer, &conversation)?;
    if let Some((input, encoded)) = &images {
        let (expanded, count) = input.expand(&text, encoded);
        if count != encoded.len() {
            return Err(ApiError::invalid(
                "messages",
                format!(
                    "the chat template placed {count} images for the {} the messages hold",
                    encoded.len()
                ),
            ));
        }
        text = expanded;
    }
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
    let prompt_images = match images {
        Some((input, encoded)) => input
            .prompt_images(&tokens, encoded)
            .map_err(|e| ApiError::invalid("messages", e.to_string()))?,
        None => PromptImages::default(),
    };
    Ok(EncodedPrompt {
        tokens,
        rendered: text,
        images: Arc::new(prompt_images),
    })
}

/// Each message's list of parts becomes one string for the template, with the model's image
/// placeholder where each image part was. Text parts next to each other are joined by a
/// newline, as text-only parts are (vLLM's joining); an image sits between its neighbours with
/// no separator added, since its expansion brings its own line breaks
/// (`"\n\n<start_of_image>...<end_of_image>\n\n"` for Gemma 3).
fn flatten_image_parts(messages: &mut Value, placeholder: &str) {
    let Some(list) = messages.as_array_mut() else {
        return;
    };
    for message in list {
        let Some(parts) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        let mut joined = String::new();
        let mut after_text = false;
        for part in parts {
            if part.get("type").and_then(Value::as_str) == Some("image") {
                joined.push_str(placeholder);
                after_text = false;
            } else {
                if after_text {
                    joined.push('\n');
                }
                joined.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                after_text = true;
            }
        }
        message["content"] = Value::String(joined);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn image_parts_become_the_placeholder_in_place() {
        let mut messages = json!([
            {"role": "system", "content": "plain"},
            {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "image"},
                {"type": "text", "text": " b"}, {"type": "text", "text": "c"}, {"type": "image"}]}
        ]);
        flatten_image_parts(&mut messages, "<img>");
        assert_eq!(messages[0]["content"], "plain");
        assert_eq!(messages[1]["content"], "a <img> b\nc<img>");
    }
}
