//! `POST /v1/responses` (OpenAI Responses API): the request as clients send it, and the request
//! fields every response object echoes back.
//!
//! Input items are one flat struct with every field optional rather than a tagged enum: items
//! without a `type` but with a `role` are messages, and validation can then name the exact
//! field that is missing (`input[3].call_id`) instead of a serde error without a path.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::number::{self, WholeNumber};

/// A Responses request as the client sent it (unvalidated).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponsesRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// The new input: one user message as a string, or a list of items.
    pub input: Option<ResponseInput>,
    /// A system message put in front of the conversation (not carried over by
    /// `previous_response_id`).
    pub instructions: Option<String>,
    /// `[{"type": "function", name, description, parameters, strict}]`; other types skipped.
    pub tools: Option<Value>,
    /// `none` | `auto` | `required` | `{"type": "function", "name": ...}`.
    pub tool_choice: Option<Value>,
    /// Whether several calls may come back in one turn (default true).
    pub parallel_tool_calls: Option<bool>,
    /// Upper bound on generated tokens, reasoning included.
    #[serde(default, deserialize_with = "number::optional")]
    pub max_output_tokens: Option<WholeNumber>,
    /// Sampling temperature in [0, 2].
    pub temperature: Option<f32>,
    /// Nucleus mass in (0, 1].
    pub top_p: Option<f64>,
    /// Extension: keep only the k most likely tokens.
    #[serde(default, deserialize_with = "number::optional")]
    pub top_k: Option<WholeNumber>,
    /// sluice's sampling extensions (`seed`, `logit_bias`, `min_p`, ...).
    #[serde(flatten)]
    pub extensions: super::SamplingExtensions,
    /// Stream the response as server-sent events.
    pub stream: Option<bool>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", ...}}`.
    pub text: Option<TextConfig>,
    /// `{"effort": ..., "summary": ...}`.
    pub reasoning: Option<ReasoningConfig>,
    /// Keep the response for `previous_response_id` and retrieval (default true).
    pub store: Option<bool>,
    /// Continue the conversation of a stored response.
    pub previous_response_id: Option<String>,
    /// Up to 16 string pairs, echoed back.
    pub metadata: Option<Value>,
    /// End-user id: who the request counts as for fair sharing.
    pub user: Option<String>,
    /// `auto` | `disabled`; accepted and echoed, the context is never truncated here.
    pub truncation: Option<String>,
    /// Extra output to include; accepted, nothing extra is produced.
    pub include: Option<Vec<String>>,
    /// Background (asynchronous) mode, which this server does not offer.
    pub background: Option<bool>,
}

/// `input`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ResponseInput {
    /// One user message.
    Text(String),
    /// Messages, function calls and their outputs, reasoning.
    Items(Vec<InputItem>),
}

/// One input item; which fields matter depends on `kind`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct InputItem {
    /// `message` | `function_call` | `function_call_output` | `custom_tool_call` |
    /// `custom_tool_call_output` | `reasoning`; absent on
    /// messages written `{"role", "content"}`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// A message's role: user | system | developer | assistant.
    pub role: Option<String>,
    /// A message's content: a string or `[{"type": "input_text" | "output_text", "text"}]`.
    pub content: Option<Value>,
    /// The id that ties a function call to its output.
    pub call_id: Option<String>,
    /// The function a call names.
    pub name: Option<String>,
    /// A call's arguments (JSON text).
    pub arguments: Option<String>,
    /// A `custom_tool_call`'s input (free text).
    pub input: Option<String>,
    /// A function's result: a string or a list of `input_text` parts.
    pub output: Option<Value>,
    /// A reasoning item's summary: `[{"type": "summary_text", "text"}]`.
    pub summary: Option<Value>,
}

/// `text`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextConfig {
    /// The output's form.
    pub format: Option<TextFormat>,
}

/// `text.format`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextFormat {
    /// `text` | `json_object` | `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// With `json_schema`: the schema's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// With `json_schema`: the schema the output conforms to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// With `json_schema`: OpenAI's strict flag (the output always follows the schema here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// With `json_schema`: what the schema is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `reasoning`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningConfig {
    /// `none` | `minimal` | `low` | `medium` | `high`, handed to the chat template.
    pub effort: Option<String>,
    /// `auto` | `concise` | `detailed`: reasoning items also carry the reasoning text as
    /// their summary (streamed as `response.reasoning_summary_*` events); echoed.
    pub summary: Option<String>,
}

/// The request fields a response object repeats, with OpenAI's defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseEcho {
    /// The system instructions, or null.
    pub instructions: Option<String>,
    /// The requested bound, or null.
    pub max_output_tokens: Option<u32>,
    /// Default true.
    pub parallel_tool_calls: bool,
    /// The response this one continues, or null.
    pub previous_response_id: Option<String>,
    /// `{"effort", "summary"}`.
    pub reasoning: ReasoningConfig,
    /// Default true.
    pub store: bool,
    /// Default 1.
    pub temperature: f32,
    /// Default `{"format": {"type": "text"}}`.
    pub text: TextConfig,
    /// Default `auto` (`none` without tools).
    pub tool_choice: Value,
    /// The tools as sent, `[]` when none.
    pub tools: Value,
    /// Default 1.
    pub top_p: f64,
    /// Default `disabled`.
    pub truncation: String,
    /// The end-user id, or null.
    pub user: Option<String>,
    /// Default `{}`.
    pub metadata: Value,
}

impl ResponsesRequest {
    /// The fields the response object echoes.
    pub fn echo(&self) -> ResponseEcho {
        let has_tools = self
            .tools
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        ResponseEcho {
            instructions: self.instructions.clone(),
            // Validation refuses any other value.
            max_output_tokens: self.max_output_tokens.and_then(|m| u32::try_from(m).ok()),
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
            previous_response_id: self.previous_response_id.clone(),
            reasoning: self.reasoning.clone().unwrap_or_default(),
            store: self.store.unwrap_or(true),
            temperature: self.temperature.unwrap_or(1.0),
            text: match &self.text {
                Some(TextConfig { format: Some(f) }) => TextConfig {
                    format: Some(f.clone()),
                },
                _ => TextConfig {
                    format: Some(TextFormat {
                        kind: "text".into(),
                        name: None,
                        schema: None,
                        strict: None,
                        description: None,
                    }),
                },
            },
            tool_choice: match &self.tool_choice {
                Some(c) if !c.is_null() => c.clone(),
                _ if has_tools => json!("auto"),
                _ => json!("none"),
            },
            tools: self.tools.clone().unwrap_or_else(|| json!([])),
            top_p: self.top_p.unwrap_or(1.0),
            truncation: self.truncation.clone().unwrap_or_else(|| "disabled".into()),
            user: self.user.clone(),
            metadata: self.metadata.clone().unwrap_or_else(|| json!({})),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_a_string_or_a_list_of_items() {
        let r: ResponsesRequest = serde_json::from_str(r#"{"model":"m","input":"hi"}"#).unwrap();
        assert_eq!(r.input, Some(ResponseInput::Text("hi".into())));
        let r: ResponsesRequest = serde_json::from_str(
            r#"{"model":"m","input":[{"role":"user","content":"a"},
                {"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}"#,
        )
        .unwrap();
        let Some(ResponseInput::Items(items)) = r.input else {
            panic!("items parsed as text")
        };
        assert_eq!(items[0].kind, None);
        assert_eq!(items[1].call_id.as_deref(), Some("c"));
    }

    #[test]
    fn echo_fills_openai_defaults() {
        let r: ResponsesRequest = serde_json::from_str(r#"{"model":"m","input":"hi"}"#).unwrap();
        let v = serde_json::to_value(r.echo()).unwrap();
        assert_eq!(v["store"], true);
        assert_eq!(v["parallel_tool_calls"], true);
        assert_eq!(v["tool_choice"], "none");
        assert_eq!(v["tools"], json!([]));
        assert_eq!(v["text"], json!({"format": {"type": "text"}}));
        assert_eq!(v["metadata"], json!({}));
        assert!(v["max_output_tokens"].is_null());
        let r: ResponsesRequest = serde_json::from_str(
            r#"{"model":"m","tools":[{"type":"function","name":"f"}],"store":false,
               "max_output_tokens":9,"text":{"format":{"type":"json_object"}}}"#,
        )
        .unwrap();
        let v = serde_json::to_value(r.echo()).unwrap();
        assert_eq!(v["tool_choice"], "auto");
        assert_eq!(v["store"], false);
        assert_eq!(v["max_output_tokens"], 9);
        assert_eq!(v["text"]["format"]["type"], "json_object");
    }
}
