//! The chat turn pipeline that chat completions, Responses and Anthropic Messages share: the
//! conversation rendered with the model's template and tokenized (`prompt.rs`), the request
//! attributed to its caller, tool calls constrained as `tool_choice` asks, and the output read
//! as one assistant turn in the model's tool-call format, which the protocol's renderer shapes.

mod prompt;

use std::sync::Arc;

use axum::response::Response;
use sluice_engine::{GenerationRequest, ResponseFormat};
use sluice_text::assistant::{ToolCallFormat, TurnOptions};
use sluice_text::Tokenizer;

pub use prompt::{
    encode_chat, encode_chat_with_images, encode_images, render_and_encode, render_chat_text,
    Conversation, EncodedPrompt,
};

use crate::auth::Caller;
use crate::dialect::turn::TurnRenderer;
use crate::dialect::turn_parse::{CallIds, OutputSyntax, TurnDialect};
use crate::error::ApiError;
use crate::generation::{run, ResponsePlan};
use crate::registry::ServedModel;
use crate::validate::tool_constraint::tool_plan;
use crate::validate::tools::ToolChoice;
use crate::validate::ValidChatRequest;
use crate::AppState;

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
    let fair_share_id = caller.fair_share_id(
        &state.fair_share_hasher,
        state.config.api_keys.len(),
        valid.params.user.as_deref(),
    );
    let PreparedTurn {
        mut request,
        rendered,
        syntax,
        parse_as,
    } = prepare_turn(state, &model, &valid, fair_share_id).await?;
    request.cache_salt =
        caller.cache_salt(&state.config.api_keys, valid.params.cache_salt.as_deref());
    request.caller = fair_share_id;
    let prompt_tokens = vec![request.prompt_tokens.clone()];
    let n = valid.params.n as usize;
    let renderer = make_renderer(request.prompt_tokens.len() as u32);
    let mut options = syntax.turn_options(&valid.tools, &rendered);
    drop(rendered);
    if options.tool_format.is_some() {
        options.tool_format = Some(parse_as);
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
        keep_alive: state.config.stream_keep_alive,
    };
    run(model, vec![request], plan, state.config.retry_after_secs).await
}

/// A chat-like request made ready for the engine but not submitted: what the route would
/// hand the engine, and what it reads the output with.
pub struct PreparedTurn {
    /// The engine request: the rendered prompt's tokens, `max_tokens` resolved, the tool-call
    /// constraint applied; neither cache salt nor caller is set.
    pub request: GenerationRequest,
    /// The conversation as the template rendered it.
    pub rendered: String,
    /// How the model writes tool calls and reasoning.
    pub syntax: OutputSyntax,
    /// The format the output's tool calls are parsed in.
    pub parse_as: ToolCallFormat,
}

/// Renders and tokenizes a chat-like request's conversation, checks it against the context
/// and constrains tool calls as `tool_choice` asks: everything [`generate_turn`] does before
/// it submits, so the render endpoints answer with exactly the prompt generation would run.
/// `caller` (the fair-share caller) orders contended tokenizing slots.
pub async fn prepare_turn(
    state: &AppState,
    model: &ServedModel,
    valid: &ValidChatRequest,
    caller: Option<u64>,
) -> Result<PreparedTurn, ApiError> {
    let syntax = OutputSyntax::of(&model.tokenizer, state.config.tool_call_parser.as_deref())?;
    let EncodedPrompt {
        tokens,
        rendered,
        images,
    } = render_and_encode(state, model, valid, caller).await?;
    let mut request = valid.params.request_for(
        tokens,
        model.max_model_len,
        "messages",
        state.config.clamp_max_tokens,
    )?;
    request.images = images;
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
    Ok(PreparedTurn {
        request,
        rendered,
        syntax,
        parse_as: plan.parse_as,
    })
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
