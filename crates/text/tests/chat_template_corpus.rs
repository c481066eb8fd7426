//! Renders every real-world chat template under `tests/data/chat-templates/` (override with
//! `SLUICE_CHAT_TEMPLATES_DIR`) with a typical conversation, without and with tools, and with an
//! earlier tool call (an assistant message with `tool_calls`, arguments as a mapping, and its
//! `tool` result). Each must either render a prompt containing the user's text or fail with a
//! `TextError`; none may panic. Where transformers renders a template
//! (`tests/data/chat_template_renders.json`, written by `render_chat_templates.py` beside it, for
//! the first two conversations), our text must be identical, byte for byte.
//!
//! When the directory is missing the test prints a note and passes. Inline-template unit tests
//! live beside the code in `src/chat_template_tests.rs`.

use serde_json::{json, Value as Json};
use sluice_text::{ChatTemplate, RenderLimits, TextError};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Templates (of 70) that render the plain conversation when this test was written; fewer means
/// a regression in the template environment.
const MIN_RENDERED: usize = 68;

/// Templates (of 70) that render the conversation with an earlier tool call when this test was
/// written (Functionary v3.2's `str + dict`, Firefunction and Gemma 2 fail, as in the plain
/// conversation for the last two; Kimi K2's `list.append` renders since `python_list`).
const MIN_RENDERED_CALLS: usize = 67;

/// Renders that differ from transformers for a reason we accept: (template, scenario, why).
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[(
    "meetkai-functionary-medium-v3.1.jinja",
    "tools",
    "`'...'|safe + text` HTML-escapes `text` under Python's markupsafe (quotes become &#34;); \
     minijinja's `+` does not, so our tool JSON keeps its plain quotes",
)];

/// The render budget's defaults leave real templates at least this much headroom: each
/// template's fuel and written bytes for its conversations times this stays within them.
const BUDGET_HEADROOM: u64 = 100;

const USER_TEXT: &str = "What is the capital of France?";

fn templates_dir() -> PathBuf {
    match std::env::var_os("SLUICE_CHAT_TEMPLATES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat-templates"),
    }
}

fn scenarios() -> [(&'static str, Json, Option<Json>); 3] {
    let messages = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello there!"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": USER_TEXT}
    ]);
    let tools = json!([{
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather in a city, in °C",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"]
            }
        }
    }]);
    let called = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "a1b2c3d4e",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}
        }]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temperature\": 18}"},
        {"role": "assistant", "content": "It is 18 °C in Paris."},
        {"role": "user", "content": USER_TEXT}
    ]);
    [
        ("plain", messages.clone(), None),
        ("tools", messages, Some(tools.clone())),
        ("tool_calls", called, Some(tools)),
    ]
}

/// transformers' renders were made with the clock at 2025-01-15; put that date in ours too.
fn with_reference_date(text: &str) -> String {
    let today = chrono::Local::now();
    let reference = chrono::NaiveDate::from_ymd_opt(2025, 1, 15).unwrap();
    ["%Y-%m-%d", "%d %b %Y", "%B %d, %Y"]
        .iter()
        .fold(text.to_string(), |text, format| {
            text.replace(
                &today.format(format).to_string(),
                &reference.format(format).to_string(),
            )
        })
}

fn reference_renders() -> BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat_template_renders.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn every_real_chat_template_renders_like_transformers_or_fails_with_a_text_error() {
    let dir = templates_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!(
            "note: {} not found; skipping the chat template corpus test",
            dir.display()
        );
        return;
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jinja"))
        .collect();
    paths.sort();
    let references = reference_renders();

    let mut most_fuel = (String::new(), 0u64);
    let mut most_written = 0u64;
    let mut rendered_plain = 0;
    let mut rendered_calls = 0;
    let mut problems = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(path).unwrap();
        for (scenario, messages, tools) in scenarios() {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                ChatTemplate::new(
                    &source,
                    Some("<|begin_of_text|>".to_string()),
                    Some("<|end_of_text|>".to_string()),
                )
                .and_then(|template| {
                    template.render_measured(&messages, true, tools.as_ref(), None, None)
                })
            }));
            let outcome = outcome.map(|result| {
                result.map(|(text, usage)| {
                    if usage.fuel > most_fuel.1 {
                        most_fuel = (format!("{name} ({scenario})"), usage.fuel);
                    }
                    most_written = most_written.max(usage.written as u64);
                    text
                })
            });
            let reference = references.get(&name).and_then(|r| r.get(scenario));
            let expected = reference.and_then(|r| r.get("ok"));
            match outcome {
                Err(_) => problems.push(format!("{name} ({scenario}): panicked")),
                Ok(Ok(text)) => {
                    if text.is_empty() || !text.contains(USER_TEXT) {
                        problems.push(format!("{name} ({scenario}): no user text in {text:?}"));
                    } else if scenario == "plain" {
                        rendered_plain += 1;
                    } else if scenario == "tool_calls" {
                        rendered_calls += 1;
                    }
                    let known = KNOWN_DIFFERENCES.iter().any(|&(known, known_scenario, _)| {
                        known == name && known_scenario == scenario
                    });
                    match expected {
                        Some(expected) if with_reference_date(&text) != *expected && !known => problems
                            .push(format!(
                                "{name} ({scenario}): differs from transformers\n--- ours\n{text}\n--- transformers\n{expected}"
                            )),
                        None if reference.is_some() && scenario != "tool_calls" => eprintln!(
                            "  {name} ({scenario}): renders here, transformers fails: {}",
                            reference.unwrap().get("err").map_or("", String::as_str)
                        ),
                        _ => {}
                    }
                }
                Ok(Err(err @ (TextError::Template(_) | TextError::InvalidMessages(_)))) => {
                    eprintln!("  {name} ({scenario}): {err}");
                    if expected.is_some() {
                        problems.push(format!(
                            "{name} ({scenario}): transformers renders it, we fail: {err}"
                        ));
                    }
                }
                Ok(Err(other)) => {
                    problems.push(format!("{name} ({scenario}): unexpected error {other:?}"))
                }
            }
        }
    }

    eprintln!(
        "{rendered_plain} of {} chat templates rendered the plain conversation, \
         {rendered_calls} the one with a tool call",
        paths.len()
    );
    let limits = RenderLimits::default();
    eprintln!(
        "most fuel: {} instructions, by {}; most written: {most_written} bytes \
         (limits: {} instructions, {} bytes)",
        most_fuel.1, most_fuel.0, limits.fuel, limits.max_bytes
    );
    assert!(
        most_fuel.1 * BUDGET_HEADROOM <= limits.fuel,
        "{} used {} instructions: the default fuel leaves too little headroom",
        most_fuel.0,
        most_fuel.1
    );
    assert!(most_written * BUDGET_HEADROOM <= limits.max_bytes as u64);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n\n")
    );
    assert!(
        rendered_plain >= MIN_RENDERED.min(paths.len()),
        "only {rendered_plain} of {} templates rendered (expected at least {MIN_RENDERED})",
        paths.len()
    );
    assert!(
        rendered_calls >= MIN_RENDERED_CALLS.min(paths.len()),
        "only {rendered_calls} of {} templates rendered a tool call (expected at least {MIN_RENDERED_CALLS})",
        paths.len()
    );
}
