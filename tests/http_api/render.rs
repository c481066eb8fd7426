//! vLLM's render endpoints end to end (`/v1/chat/completions/render`, `/v1/completions/render`):
//! the token ids a prefix-aware router gets are the ones `/tokenize` gives for the same
//! conversation and the ones a real completion of the same request counts as its prompt, with
//! and without tools, with template options; and nothing is generated.

use serde_json::{json, Value};

use crate::server::{fixture, post_json, start, ServerOptions, MODEL_ID};

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string"}}}}}])
}

fn messages() -> Value {
    json!([{"role": "system", "content": "Answer briefly."},
           {"role": "user", "content": "Weather in Paris? <|im_start|>user is text here"}])
}

fn ids(v: &Value) -> Vec<u64> {
    (v.as_array().unwrap_or_else(|| panic!("not a list: {v}")))
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

/// Renders `body` as a chat request; checks the token ids against `/tokenize` (given
/// `tokenize_extra`, the template fields `/tokenize` takes) and against the `prompt_tokens` of
/// a real chat completion of `body`. The token ids.
async fn check_chat(base: &str, body: Value, tokenize_extra: Value) -> Vec<u64> {
    let (status, rendered) = post_json(base, "/v1/chat/completions/render", &body).await;
    assert_eq!(status, 200, "{rendered}");
    let tokens = ids(&rendered["token_ids"]);
    assert!(!tokens.is_empty());
    assert_eq!(rendered["model"], MODEL_ID);

    let mut tokenize = json!({"model": MODEL_ID, "messages": body["messages"]});
    for (k, v) in tokenize_extra.as_object().unwrap() {
        tokenize[k] = v.clone();
    }
    let (status, tokenized) = post_json(base, "/tokenize", &tokenize).await;
    assert_eq!(status, 200, "{tokenized}");
    assert_eq!(tokens, ids(&tokenized["tokens"]), "render vs /tokenize");

    let mut generate = body.clone();
    generate["max_tokens"] = json!(2);
    let (status, completion) = post_json(base, "/v1/chat/completions", &generate).await;
    assert_eq!(status, 200, "{completion}");
    assert_eq!(
        completion["usage"]["prompt_tokens"].as_u64().unwrap(),
        tokens.len() as u64,
        "render vs the prompt a chat completion ran"
    );
    tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_render_is_the_prompt_tokenize_and_generation_use_with_and_without_tools() {
    let server = start(fixture("llama-tools")).await;
    let plain = json!({"model": MODEL_ID, "messages": messages()});
    let without = check_chat(&server.base, plain, json!({})).await;
    let with_tools = json!({"model": MODEL_ID, "messages": messages(), "tools": tools()});
    let with = check_chat(&server.base, with_tools, json!({"tools": tools()})).await;
    assert_ne!(
        without, with,
        "the template writes the tools into the prompt"
    );
    // A forced call renders the same prompt (the constraint is on the output).
    let forced = json!({"model": MODEL_ID, "messages": messages(), "tools": tools(),
                        "tool_choice": "required"});
    let (status, rendered) = post_json(&server.base, "/v1/chat/completions/render", &forced).await;
    assert_eq!(status, 200, "{rendered}");
    assert_eq!(ids(&rendered["token_ids"]), with);
    // Rendering ran nothing: only the two completions above reached the engine.
    server
        .wait_until_idle(std::time::Duration::from_secs(30))
        .await;
    assert_eq!(
        server.metric("vllm:prompt_tokens_total").await,
        (without.len() + with.len()) as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_render_applies_template_kwargs_as_generation_does() {
    let server = start(fixture("llama-think")).await;
    let ask = |kwargs: Value| {
        json!({"model": MODEL_ID, "chat_template_kwargs": kwargs,
               "messages": [{"role": "user", "content": "Why is the sky blue?"}]})
    };
    let thinking = check_chat(
        &server.base,
        ask(json!({"enable_thinking": true})),
        json!({"chat_template_kwargs": {"enable_thinking": true}}),
    )
    .await;
    let not = check_chat(
        &server.base,
        ask(json!({"enable_thinking": false})),
        json!({"chat_template_kwargs": {"enable_thinking": false}}),
    )
    .await;
    assert_ne!(thinking, not);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_render_is_each_prompt_generation_uses() {
    let server = start(ServerOptions::default()).await;
    let prompts = json!(["The quick brown fox", "jumps"]);
    let (status, rendered) = post_json(
        &server.base,
        "/v1/completions/render",
        json!({"model": MODEL_ID, "prompt": prompts, "max_tokens": 4}),
    )
    .await;
    assert_eq!(status, 200, "{rendered}");
    let rendered = rendered.as_array().unwrap();
    assert_eq!(rendered.len(), 2);
    for (one, prompt) in rendered.iter().zip(prompts.as_array().unwrap()) {
        let (_, tokenized) = post_json(
            &server.base,
            "/tokenize",
            json!({"model": MODEL_ID, "prompt": prompt}),
        )
        .await;
        assert_eq!(ids(&one["token_ids"]), ids(&tokenized["tokens"]));
        assert_eq!(one["sampling_params"]["max_tokens"], 4);
        let (status, completion) = post_json(
            &server.base,
            "/v1/completions",
            json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 1}),
        )
        .await;
        assert_eq!(status, 200, "{completion}");
        assert_eq!(
            completion["usage"]["prompt_tokens"].as_u64().unwrap(),
            ids(&one["token_ids"]).len() as u64
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_errors_unknown_model_and_malformed_body() {
    let server = start(ServerOptions::default()).await;
    let client = reqwest::Client::new();
    for path in ["/v1/chat/completions/render", "/v1/completions/render"] {
        let body = json!({"model": "no-such-model", "prompt": "hi",
                          "messages": [{"role": "user", "content": "hi"}]});
        let (status, err) = post_json(&server.base, path, body).await;
        assert_eq!(status, 404, "{path}: {err}");
        assert_eq!(err["error"]["code"], "model_not_found");

        let res = client
            .post(server.url(path))
            .header("content-type", "application/json")
            .body("{\"model\": \"llama\", \"messages\": [")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{path}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["type"], "invalid_request_error");
        assert!(err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid JSON body"));

        let wrong_type = json!({"model": MODEL_ID, "messages": "hi", "prompt": 3.5});
        let (status, err) = post_json(&server.base, path, wrong_type).await;
        assert_eq!(status, 400, "{path}: {err}");
    }
}
