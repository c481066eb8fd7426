//! A prompt or `max_tokens` beyond the context: each API words the 400 the way its clients
//! parse it (Claude Code reads Anthropic's two messages to shrink `max_tokens` or compact), and
//! `--clamp-max-tokens` cuts `max_tokens` to the rest of the context instead.

use serde_json::json;

use crate::server::post_json as post;
use crate::server::{start, ServerOptions, MODEL_ID};

/// A user message of about `words` tokens.
fn long_message(words: usize) -> String {
    "the ".repeat(words)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_word_context_errors_as_anthropic_does() {
    let server = start(ServerOptions::default()).await;
    let context = server.max_model_len;
    let (status, body) = post(
        &server.base,
        "/v1/messages",
        json!({"model": MODEL_ID, "max_tokens": 32000,
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let message = body["error"]["message"].as_str().unwrap();
    let expected_tail =
        format!(" + 32000 > {context}, decrease input length or `max_tokens` and try again");
    assert!(
        message.starts_with("input length and `max_tokens` exceed context limit: ")
            && message.ends_with(&expected_tail),
        "{message}"
    );
    let (status, body) = post(
        &server.base,
        "/v1/messages",
        json!({"model": MODEL_ID, "max_tokens": 8,
               "messages": [{"role": "user", "content": long_message(2 * context)}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt is too long: ")
            && message.ends_with(&format!(" tokens > {context} maximum")),
        "{message}"
    );
    // The OpenAI routes keep OpenAI's words and code.
    let (status, body) = post(
        &server.base,
        "/v1/chat/completions",
        json!({"model": MODEL_ID, "max_tokens": 32000,
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("maximum context length is"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clamp_max_tokens_cuts_the_request_to_the_rest_of_the_context() {
    let server = start(ServerOptions {
        clamp_max_tokens: true,
        ..ServerOptions::default()
    })
    .await;
    let context = server.max_model_len as u64;
    for (path, body) in [
        (
            "/v1/messages",
            json!({"model": MODEL_ID, "max_tokens": 32000,
                   "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": MODEL_ID, "max_tokens": 32000, "ignore_eos": true,
                   "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ] {
        let (status, body) = post(&server.base, path, body).await;
        assert_eq!(status, 200, "{path}: {body}");
        let usage = &body["usage"];
        let (prompt, completion) = match path {
            "/v1/messages" => (&usage["input_tokens"], &usage["output_tokens"]),
            _ => (&usage["prompt_tokens"], &usage["completion_tokens"]),
        };
        let total = prompt.as_u64().unwrap() + completion.as_u64().unwrap();
        assert!(total <= context, "{path}: {body}");
    }
    // A prompt that alone fills the context is still refused.
    let (status, body) = post(
        &server.base,
        "/v1/chat/completions",
        json!({"model": MODEL_ID, "max_tokens": 8,
               "messages": [{"role": "user", "content": long_message(2 * context as usize)}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_errors_name_input_not_messages() {
    let server = start(ServerOptions::default()).await;
    let context = server.max_model_len;
    let (status, body) = post(
        &server.base,
        "/v1/responses",
        json!({"model": MODEL_ID, "input": long_message(2 * context), "max_output_tokens": 8}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "input", "{body}");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("the length of the input"), "{message}");
}
