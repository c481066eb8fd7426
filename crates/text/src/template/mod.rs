//! Chat templates: the Jinja program in a model's tokenizer config that turns a list of messages
//! into the prompt text, rendered with `minijinja` set up to behave like transformers' Jinja
//! environment.
//!
//! transformers compiles templates with `trim_blocks=True, lstrip_blocks=True`, the
//! `loopcontrols` extension, the globals `raise_exception` and `strftime_now`, and its own
//! `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`. It renders
//! with `messages`, `tools`, `documents`, `add_generation_prompt` and the special tokens. Python
//! string and dict methods (`.strip()`, `.items()`, `.get()`, ...) come from minijinja-contrib's
//! pycompat callback.

mod budget;
mod guard;
mod python_json;
mod python_list;
mod python_repr;

use crate::TextError;
pub use budget::RenderLimits;
use budget::{Armed, OverBudget};
use minijinja::machinery::{get_compiled_template, make_string_output, Vm};
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Output, State};
use python_json::{to_python_json, PythonJsonStyle};
use python_repr::python_str;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const TEMPLATE_NAME: &str = "chat_template";

/// A compiled chat template with the model's special tokens.
///
/// `Send + Sync`: one instance serves every request of a model. Every render runs within
/// [`RenderLimits`] (the defaults unless [`ChatTemplate::with_limits`] says otherwise).
pub struct ChatTemplate {
    env: Environment<'static>,
    limits: RenderLimits,
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_len", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the strings the template sees under
    /// those names (undefined when `None`, as in transformers when the tokenizer has none).
    pub fn new(
        source: &str,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<ChatTemplate, TextError> {
        let limits = RenderLimits::default();
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_fuel(Some(limits.fuel));
        env.set_unknown_method_callback(budget::python_method);
        env.add_function(guard::CONCAT, budget::concat);
        env.add_function(guard::CHECK_ADD, budget::check_add);
        env.add_function(guard::CHECK_MUL, budget::check_mul);
        env.add_filter("join", budget::join);
        env.add_filter("replace", budget::replace);
        env.add_filter("indent", budget::indent);
        env.add_filter("format", budget::format);
        env.add_filter("list", budget::list);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_function("namespace", python_list::namespace);
        env.add_filter("tojson", tojson);
        env.add_filter("string", python_string);
        env.add_test("iterable", is_iterable);
        env.set_formatter(format_like_python);
        env.add_template_owned(TEMPLATE_NAME, strip_generation_tags(source))
            .map_err(template_error)?;
        Ok(ChatTemplate {
            env,
            limits,
            source: source.to_string(),
            bos_token,
            eos_token,
        })
    }

    /// The same template rendering within `limits`.
    pub fn with_limits(mut self, limits: RenderLimits) -> ChatTemplate {
        self.env.set_fuel(Some(limits.fuel));
        self.limits = limits;
        self
    }

    /// The limits every render runs within.
    pub fn limits(&self) -> &RenderLimits {
        &self.limits
    }

    /// The template's source text as given to [`ChatTemplate::new`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders the prompt for `messages` (a JSON array of `{role, content, ...}` objects).
    ///
    /// `content` may be a string, `null` (an assistant turn with only tool calls) or an array of
    /// `{"type": "text", "text": ...}` parts; parts are joined with `"\n"` into one string before
    /// rendering (as vLLM does for templates that expect string content). A part of any other
    /// type is an [`TextError::InvalidMessages`]. `tools` is passed to the template as `tools`
    /// (`none` when absent).
    pub fn render(
        &self,
        messages: &Json,
        add_generation_prompt: bool,
        tools: Option<&Json>,
    ) -> Result<String, TextError> {
        self.render_with_kwargs(messages, add_generation_prompt, tools, None)
    }

    /// Like [`ChatTemplate::render`], with extra template variables (vLLM's
    /// `chat_template_kwargs`, e.g. `{"enable_thinking": false}`); `extra_kwargs` must be a JSON
    /// object. The standard variables win over extra ones of the same name.
    pub fn render_with_kwargs(
        &self,
        messages: &Json,
        add_generation_prompt: bool,
        tools: Option<&Json>,
        extra_kwargs: Option<&Json>,
    ) -> Result<String, TextError> {
        self.render_cancellable(messages, add_generation_prompt, tools, extra_kwargs, None)
    }

    /// Like [`ChatTemplate::render_with_kwargs`]; the render stops (a [`TextError::Template`])
    /// soon after `cancel` is set, as when the client that asked for it has gone away.
    ///
    /// A render over its [`RenderLimits`] is a [`TextError::Template`] naming the limit:
    /// "chat template exceeded its budget of N instructions", "... built a string over its
    /// limit of N bytes", "rendered prompt exceeded its limit of N bytes", "... took longer
    /// than its limit of N s", "... exceeded its recursion limit of N".
    pub fn render_cancellable(
        &self,
        messages: &Json,
        add_generation_prompt: bool,
        tools: Option<&Json>,
        extra_kwargs: Option<&Json>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<String, TextError> {
        let (text, _) =
            self.render_measured(messages, add_generation_prompt, tools, extra_kwargs, cancel)?;
        Ok(text)
    }

    /// [`ChatTemplate::render_cancellable`], with what the render used of its limits.
    pub fn render_measured(
        &self,
        messages: &Json,
        add_generation_prompt: bool,
        tools: Option<&Json>,
        extra_kwargs: Option<&Json>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<(String, RenderUsage), TextError> {
        let messages = flatten_messages(messages)?;
        let mut vars = serde_json::Map::new();
        if let Some(extra) = extra_kwargs {
            let Json::Object(extra) = extra else {
                return Err(TextError::Template(
                    "chat template kwargs must be a JSON object".to_string(),
                ));
            };
            vars.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        vars.insert("messages".into(), messages);
        vars.insert("tools".into(), tools.cloned().unwrap_or(Json::Null));
        vars.insert("documents".into(), Json::Null);
        vars.insert(
            "add_generation_prompt".into(),
            Json::Bool(add_generation_prompt),
        );
        if let Some(bos) = &self.bos_token {
            vars.insert("bos_token".into(), Json::String(bos.clone()));
        }
        if let Some(eos) = &self.eos_token {
            vars.insert("eos_token".into(), Json::String(eos.clone()));
        }
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| self.template_error(e))?;
        // minijinja has no hook for `~`, `+`, `*` or raw text: the program is rewritten to
        // call the budget's checks (budget.rs), then run as `Template::render` would run it.
        let compiled = get_compiled_template(&template);
        let instructions = guard::guard_instructions(&compiled.instructions);
        let blocks: BTreeMap<_, _> = compiled
            .blocks
            .iter()
            .map(|(name, block)| (*name, guard::guard_instructions(block)))
            .collect();
        let armed = Armed::new(&self.limits, cancel);
        let mut text = String::with_capacity(compiled.buffer_size_hint);
        let mut out = make_string_output(&mut text);
        let (_, state) = Vm::new(&self.env)
            .eval(
                &instructions,
                Value::from_serialize(&vars),
                &blocks,
                &mut out,
                compiled.initial_auto_escape,
            )
            .map_err(|e| self.template_error(e))?;
        let usage = RenderUsage {
            fuel: state.fuel_levels().map_or(0, |(consumed, _)| consumed),
            written: armed.written(),
        };
        drop(state);
        drop(out);
        Ok((text, usage))
    }

    /// [`template_error`], with the limit named when fuel or recursion ran out.
    fn template_error(&self, err: Error) -> TextError {
        if err.kind() == ErrorKind::OutOfFuel {
            return TextError::Template(format!(
                "chat template exceeded its budget of {} instructions",
                self.limits.fuel
            ));
        }
        if err.detail() == Some("recursion limit exceeded") {
            return TextError::Template(format!(
                "chat template exceeded its recursion limit of {} (a macro call counts 4)",
                self.env.recursion_limit()
            ));
        }
        template_error(err)
    }
}

/// What one render used of its [`RenderLimits`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderUsage {
    /// Template instructions run (fuel consumed).
    pub fuel: u64,
    /// Bytes written, captured blocks and macro output included.
    pub written: usize,
}

/// Returns a copy of `messages` in which every array-of-parts `content` is one string.
fn flatten_messages(messages: &Json) -> Result<Json, TextError> {
    let Json::Array(list) = messages else {
        return Err(TextError::InvalidMessages(
            "messages must be a JSON array".to_string(),
        ));
    };
    let mut flat = Vec::with_capacity(list.len());
    for (index, message) in list.iter().enumerate() {
        let Json::Object(fields) = message else {
            return Err(TextError::InvalidMessages(format!(
                "message {index} is not an object"
            )));
        };
        let mut fields = fields.clone();
        if let Some(Json::Array(parts)) = message.get("content") {
            let text = join_text_parts(parts, index)?;
            fields.insert("content".into(), Json::String(text));
        }
        flat.push(Json::Object(fields));
    }
    Ok(Json::Array(flat))
}

fn join_text_parts(parts: &[Json], message_index: usize) -> Result<String, TextError> {
    let mut texts = Vec::with_capacity(parts.len());
    for part in parts {
        let kind = part.get("type").and_then(Json::as_str);
        match (kind, part.get("text").and_then(Json::as_str)) {
            (Some("text"), Some(text)) => texts.push(text),
            _ => {
                return Err(TextError::InvalidMessages(format!(
                    "message {message_index}: content part of type {} is not supported; \
                     only {{\"type\": \"text\", \"text\": ...}} parts are",
                    kind.unwrap_or("(missing)")
                )))
            }
        }
    }
    Ok(texts.join("\n"))
}

/// `{% generation %}...{% endgeneration %}` only marks assistant tokens for training masks in
/// transformers; it changes nothing in the text. minijinja has no such tag, so each becomes an
/// always-true `if` block with the same whitespace-control markers.
fn strip_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let left = if inner.starts_with(['-', '+']) {
            &inner[..1]
        } else {
            ""
        };
        let right = if inner.len() > 1 && inner.ends_with(['-', '+']) {
            &inner[inner.len() - 1..]
        } else {
            ""
        };
        let word = inner.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        match word {
            "generation" => out.push_str(&format!("{{%{left} if true {right}%}}")),
            "endgeneration" => out.push_str(&format!("{{%{left} endif {right}%}}")),
            _ => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The error `raise_exception` puts under the template error, so the caller gets the template's
/// own message (for example "Conversation roles must alternate user/assistant/...").
#[derive(Debug)]
struct RaisedException(String);

impl fmt::Display for RaisedException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedException {}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(
        Error::new(ErrorKind::InvalidOperation, "raise_exception called")
            .with_source(RaisedException(message)),
    )
}

/// Converts a minijinja error to [`TextError::Template`]: the template's own message for
/// `raise_exception`, otherwise minijinja's description with its location and causes.
fn template_error(err: Error) -> TextError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(current) = source {
        if let Some(raised) = current.downcast_ref::<RaisedException>() {
            return TextError::Template(raised.0.clone());
        }
        if let Some(over) = current.downcast_ref::<OverBudget>() {
            return TextError::Template(over.0.clone());
        }
        source = current.source();
    }
    let mut message = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(current) = cause {
        message.push_str(": ");
        message.push_str(&current.to_string());
        cause = current.source();
    }
    TextError::Template(message)
}

/// `strftime_now(format)`: the local time formatted with C `strftime` codes.
fn strftime_now(format: String) -> Result<Value, Error> {
    let mut out = String::new();
    // chrono reports an invalid format code as a formatting error, which must not become a panic.
    fmt::write(
        &mut out,
        format_args!("{}", chrono::Local::now().format(&format)),
    )
    .map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: invalid format string {format:?}"),
        )
    })?;
    Ok(Value::from(out))
}

/// Prints `{{ value }}` as Jinja under Python does: `None`, `True`, dicts and lists as `repr`.
/// Everything written passes here (raw text too, see budget.rs) and counts against the
/// render's byte limit.
fn format_like_python(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    budget::check_expandable(value)?;
    match python_str(value) {
        Some(text) => {
            budget::count_written(text.len())?;
            out.write_str(&text).map_err(Error::from)
        }
        None => {
            let text = match value.as_str() {
                Some(text) => std::borrow::Cow::Borrowed(text),
                None => std::borrow::Cow::Owned(value.to_string()),
            };
            budget::count_written(text.len())?;
            minijinja::escape_formatter(out, state, value)
        }
    }
}

/// The `string` filter as Python's `str()`: `{{ tool | string }}` gives `{'type': ...}`.
fn python_string(value: &Value) -> Result<Value, Error> {
    budget::check_expandable(value)?;
    Ok(match python_str(value) {
        Some(text) => Value::from(text),
        None if value.kind() == ValueKind::String => value.clone(),
        None if value.is_undefined() => Value::from(""),
        None => Value::from(value.to_string()),
    })
}

/// `is iterable` as in Jinja: false for `none`, booleans and numbers (minijinja iterates `none`
/// as empty, which would send templates that test `tools is iterable` down the tools branch).
fn is_iterable(value: &Value) -> bool {
    !matches!(
        value.kind(),
        ValueKind::None | ValueKind::Bool | ValueKind::Number | ValueKind::Plain
    ) && value.try_iter().is_ok()
}

/// transformers' `tojson`: `json.dumps` with `ensure_ascii` (default false), `indent` (an
/// integer or a string), `separators` (a pair) and `sort_keys`.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let indent: Option<Value> = kwargs.get("indent")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    budget::check_expandable(value)?;

    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            // The indent is written once per nesting level and item.
            Some(s) if s.len() > 64 => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: indent longer than 64 characters",
                ))
            }
            Some(s) => Some(s.to_string()),
            None => {
                let width = usize::try_from(v)?;
                if width > 64 {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent wider than 64",
                    ));
                }
                Some(" ".repeat(width))
            }
        },
    };
    let mut style = PythonJsonStyle::new(indent, ensure_ascii.unwrap_or(false));
    if let Some(separators) = separators {
        let [item, key] = <[String; 2]>::try_from(separators).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be a pair of strings",
            )
        })?;
        style.item_separator = item;
        style.key_separator = key;
    }
    style.sort_keys = sort_keys.unwrap_or(false);
    let json = serde_json::to_value(value).map_err(|err| {
        Error::new(ErrorKind::InvalidOperation, "tojson: value is not JSON").with_source(err)
    })?;
    Ok(Value::from_safe_string(to_python_json(&json, &style)))
}

#[cfg(test)]
mod tests;
