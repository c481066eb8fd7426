//! Which tool-call format a model writes, from its chat template or a `--tool-call-parser` name.

use super::generic_json::GenericJson;
use super::hermes::Hermes;
use super::llama3::Llama3Json;
use super::mistral::Mistral;
use super::qwen_xml::QwenXml;
use super::syntax::ToolCallSyntax;

/// How a model writes tool calls in its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` (Hermes 2/3, Qwen2.5, Qwen3).
    Hermes,
    /// `<tool_call><function=NAME><parameter=P>VALUE</parameter></function></tool_call>`
    /// (Qwen3-Coder, Qwen3.5).
    QwenXml,
    /// `{"name": ..., "parameters": ...}` as the whole message (Llama 3.1/3.2/3.3).
    Llama3Json,
    /// `[TOOL_CALLS]name[ARGS]{...}` (Mistral Small 3.2, Devstral, Magistral, Ministral 3).
    MistralArgs,
    /// `[TOOL_CALLS][{"name": ..., "arguments": ...}]` (Mistral v0.3, Nemo).
    MistralList,
    /// `{"tool_calls": [...]}` or `{"response": "..."}`, forced by the server's grammar for
    /// templates that show no known format.
    GenericJson,
}

/// The `--tool-call-parser` names, in the order error messages list them.
const NAMES: [&str; 5] = ["hermes", "qwen3_coder", "llama3_json", "mistral", "generic"];

impl ToolCallFormat {
    /// Every format.
    pub const ALL: [ToolCallFormat; 6] = [
        ToolCallFormat::Hermes,
        ToolCallFormat::QwenXml,
        ToolCallFormat::Llama3Json,
        ToolCallFormat::MistralArgs,
        ToolCallFormat::MistralList,
        ToolCallFormat::GenericJson,
    ];

    /// The format's framing, markers and call ids (see [`ToolCallSyntax`]).
    pub fn syntax(self) -> &'static dyn ToolCallSyntax {
        match self {
            ToolCallFormat::Hermes => &Hermes,
            ToolCallFormat::QwenXml => &QwenXml,
            ToolCallFormat::Llama3Json => &Llama3Json,
            ToolCallFormat::MistralArgs | ToolCallFormat::MistralList => &Mistral,
            ToolCallFormat::GenericJson => &GenericJson,
        }
    }

    /// The format a chat template writes tool calls in, from its Jinja source; `GenericJson`
    /// when it shows none we read (GLM's `<arg_key>`, MiniMax's `<invoke>`, Kimi's,
    /// DeepSeek's, gpt-oss's and other formats included).
    pub fn detect(template_source: &str) -> ToolCallFormat {
        let has = |marker: &str| template_source.contains(marker);
        // GLM's `<arg_key>` lists and MiniMax's `<invoke name=...>` also sit inside a
        // `<tool_call>` marker; they are not Hermes JSON.
        if has("<arg_key>") || has("<invoke name=") {
            ToolCallFormat::GenericJson
        } else if has("<tool_call>") && has("<function=") && has("<parameter=") {
            ToolCallFormat::QwenXml
        } else if has("[TOOL_CALLS]") && has("[ARGS]") {
            ToolCallFormat::MistralArgs
        } else if has("[TOOL_CALLS]") {
            ToolCallFormat::MistralList
        } else if has("<tool_call>") {
            ToolCallFormat::Hermes
        } else if has("{\"name\": function name, \"parameters\"") {
            ToolCallFormat::Llama3Json
        } else {
            ToolCallFormat::GenericJson
        }
    }

    /// The format for a `--tool-call-parser` name: `hermes`, `qwen3_coder`, `llama3_json`,
    /// `mistral` (`MistralArgs`; either Mistral format reads both spellings, and
    /// [`ToolCallFormat::from_name_and_template`] picks the template's), `generic`.
    pub fn from_name(name: &str) -> Result<ToolCallFormat, String> {
        match name {
            "hermes" => Ok(ToolCallFormat::Hermes),
            "qwen3_coder" => Ok(ToolCallFormat::QwenXml),
            "llama3_json" => Ok(ToolCallFormat::Llama3Json),
            "mistral" => Ok(ToolCallFormat::MistralArgs),
            "generic" => Ok(ToolCallFormat::GenericJson),
            other => Err(format!(
                "unknown tool call parser `{other}` (valid: {})",
                NAMES.join(", ")
            )),
        }
    }

    /// Like [`ToolCallFormat::from_name`], but `mistral` takes the Mistral variant the
    /// template shows, when it shows one.
    pub fn from_name_and_template(
        name: &str,
        template_source: Option<&str>,
    ) -> Result<ToolCallFormat, String> {
        let format = Self::from_name(name)?;
        Ok(match (format, template_source.map(Self::detect)) {
            (
                ToolCallFormat::MistralArgs,
                Some(detected @ (ToolCallFormat::MistralArgs | ToolCallFormat::MistralList)),
            ) => detected,
            _ => format,
        })
    }

    /// The `--tool-call-parser` name of this format (`mistral` for both Mistral formats).
    pub fn name(&self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::QwenXml => "qwen3_coder",
            ToolCallFormat::Llama3Json => "llama3_json",
            ToolCallFormat::MistralArgs | ToolCallFormat::MistralList => "mistral",
            ToolCallFormat::GenericJson => "generic",
        }
    }
}
