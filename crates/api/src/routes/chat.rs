//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use serde_json::Value;
use sluice_engine::ResponseFormat;
use sluice_text::assistant::TurnOptions;
use sluice_text::{MaskedSpecials, TextError, Tokenizer};

use crate::assemble::ResponseMeta;
use crate::auth::Caller;
use crate::dialect::chat::ChatRenderer;
use crate::dialect::turn::TurnRenderer;
use crate::dialect::turn_parse::{CallIds, OutputSyntax, TurnDialect};
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::{run, tokenize_off_runtime, ResponsePlan};
use crate::registry::ServedModel;
use crate::validate::tool_constraint::tool_plan;
use crate::validate::tools::ToolChoice;
use crate::validate::{check_prompt_text_fits, validate_chat, ValidChatRequest};
use crate::wire::chat::ChatCompletionRequest;
use crate::AppState;

/// Creates a chat completion.
pub async fn create_chat_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(req): OpenAiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    let model = state.registry.get(&req.model).await?;
    model.check_serves("generation")?;
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

/// Runs a chat-like request (Chat Completions, Responses, Anthropic Messages): renders and
/// tokenizes the conversation, constrains tool calls as `tool_choice` asks, and answers with
/// the renderer `make_renderer` builds once the prompt's token count is known. `ids` is the
/// protocol's call-id form (a Mistral model's template overrides it).
pub async fn generate_turn<R, F>(
    state: &AppState,
    caller: &Caller,
    model: Arc<ServedModel>,
    valid: ValidChatRequest,
    ids: CallIds,
    make_renderer: F,
) -> Result<Response, ApiError>
where
    R: TurnRenderer + 'static,
    F: FnOnce(u32) -> R,
{
    let tokenizer = model.tokenizer.clone();
    let syntax = OutputSyntax::of(&tokenizer, state.config.tool_call_parser.as_deref())?;
    let (prompt, rendered) = render_and_encode(state, &model, &valid).await?;
    let mut request = valid
        .params
        .request_for(prompt, model.max_model_len, "messages")?;
    request.cache_salt =
        caller.cache_salt(&state.cache_salt_hasher, valid.params.cache_salt.as_deref());
    request.caller = caller.fair_share_id(
        &state.cache_salt_hasher,
        state.config.api_keys.len(),
        valid.params.user.as_deref(),
    );
    let plan = tool_plan(&valid.tools, syntax.tool_format)?;
    if let Some(constraint) = plan.constraint {
        // A forced call replaces a response_format; in auto mode an explicit one wins.
        let forced = matches!(
            valid.tools.choice,
            ToolChoice::Required | ToolChoice::Named(_)
        );
        if forced || request.sampling.response_format == ResponseFormat::Text {
            request.sampling.response_format = constraint;
        }
    }
    let prompt_tokens = vec![request.prompt_tokens.clone()];
    let n = valid.params.n as usize;
    let renderer = make_renderer(request.prompt_tokens.len() as u32);
    let mut options = syntax.turn_options(&valid.tools, &rendered);
    drop(rendered);
    if options.tool_format.is_some() {
        options.tool_format = Some(plan.parse_as);
    }
    request.stop.kept_special_tokens = kept_markers(&tokenizer, &options);
    let ids = match syntax.call_ids() {
        CallIds::Mistral => CallIds::Mistral,
        _ => ids,
    };
    let dialect = TurnDialect::new(renderer, n, options, ids).single_call(!valid.tools.parallel);
    let plan = ResponsePlan {
        dialect: Box::new(dialect),
        n: valid.params.n,
        stream: valid.params.stream.is_some(),
        logprobs: valid.params.sampling.logprobs.is_some(),
        hide_cached_tokens: state.config.hide_cached_tokens,
        echo: None,
        echo_logprobs: None,
        prompt_logprobs: valid.params.prompt_logprobs,
        prompt_tokens,
    };
    run(model, vec![request], plan, state.config.retry_after_secs).await
}

/// The ids of the markers the output is parsed by (tool-call markup, think tags) that the
/// tokenizer has as single tokens: written into the text even when they are special tokens,
/// which the output otherwise leaves out (Mistral's `[TOOL_CALLS]`, Llama 3's
/// `<|python_tag|>`).
fn kept_markers(tokenizer: &Tokenizer, options: &TurnOptions) -> Vec<u32> {
    let mut markers: Vec<&str> = (options.tool_format)
        .map_or(&[][..], |format| format.syntax().markers())
        .to_vec();
    if let Some(syntax) = &options.reasoning {
        markers.extend([syntax.open.as_str(), syntax.close.as_str()]);
    }
    let mut ids: Vec<u32> = (markers.iter())
        .filter_map(|m| tokenizer.token_to_id(m))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Renders a chat-like request's conversation with the model's template and tokenizes it off
/// the runtime; the tokens and the rendered text.
pub async fn render_and_encode(
    state: &AppState,
    model: &ServedModel,
    valid: &ValidChatRequest,
) -> Result<(Vec<u32>, String), ApiError> {
    let tokenizer = model.tokenizer.clone();
    let conversation = Conversation {
        messages: valid.messages.clone(),
        tools: valid.tools.template_tools(),
        template_kwargs: valid.template_kwargs.clone(),
        add_generation_prompt: true,
    };
    let max_model_len = Some(model.max_model_len);
    let parse_specials = state.config.parse_special_tokens_in_messages;
    tokenize_off_runtime(state, move || {
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

/// Renders `messages` with the model's chat template; a model without one is a 400.
/// Blocking: call through `off_runtime`.
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
        .render_with_kwargs(
            &conversation.messages,
            conversation.add_generation_prompt,
            conversation.tools.as_ref(),
            conversation.template_kwargs.as_ref(),
        )
        .map_err(|e| match e {
            TextError::Template(m) | TextError::InvalidMessages(m) => {
                ApiError::invalid("messages", m)
            }
            other => ApiError::Internal(other.to_string()),
        })
}
