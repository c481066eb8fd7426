//! vLLM's `structured_outputs` (`regex`, `choice`, `grammar`) and older `guided_*` fields, and
//! llama-server's `grammar`, over HTTP on the tiny model: greedy and seeded, the text keeps the
//! constraint and the choice stops when nothing more may follow; a bad pattern is a 400 with
//! its position.

use serde_json::{json, Value};

use crate::server::{post_json, start, ServerOptions, MODEL_ID};

/// Greedy, then two seeds at a high temperature (the random-weight model wanders).
fn samplings() -> [Value; 3] {
    [
        json!({"temperature": 0.0}),
        json!({"temperature": 1.5, "seed": 3}),
        json!({"temperature": 1.5, "seed": 11}),
    ]
}

fn with(mut body: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// Each choice's text, checking that every one stopped.
async fn texts(base: &str, path: &str, body: Value) -> Vec<String> {
    let (status, answer) = post_json(base, path, &body).await;
    assert_eq!(status, 200, "{answer}");
    answer["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["finish_reason"], "stop", "{answer}");
            let text = c["text"].as_str().or(c["message"]["content"].as_str());
            text.unwrap().to_string()
        })
        .collect()
}

/// `[0-9]{3}-[a-z]{2}`, checked by hand.
fn is_code(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 6
        && b[..3].iter().all(u8::is_ascii_digit)
        && b[3] == b'-'
        && b[4..].iter().all(u8::is_ascii_lowercase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regex_output_matches_on_completions_and_chat() {
    let server = start(ServerOptions::default()).await;
    for sampling in samplings() {
        let body = json!({
            "model": MODEL_ID, "prompt": "In the beginning", "max_tokens": 30, "n": 2,
            "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}
        });
        for text in texts(&server.base, "/v1/completions", with(body, &sampling)).await {
            assert!(is_code(&text), "{sampling}: {text:?}");
        }
        let body = json!({
            "model": MODEL_ID, "max_tokens": 30,
            "messages": [{"role": "user", "content": "A code?"}],
            "guided_regex": "[0-9]{3}-[a-z]{2}"
        });
        for text in texts(&server.base, "/v1/chat/completions", with(body, &sampling)).await {
            assert!(is_code(&text), "{sampling}: {text:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choice_output_is_one_of_the_choices() {
    let server = start(ServerOptions::default()).await;
    for sampling in samplings() {
        for field in [
            json!({"structured_outputs": {"choice": ["yes", "no"]}}),
            json!({"guided_choice": ["yes", "no"]}),
        ] {
            let body = json!({
                "model": MODEL_ID, "max_tokens": 10, "n": 3,
                "messages": [{"role": "user", "content": "Yes or no?"}],
            });
            let body = with(with(body, &field), &sampling);
            for text in texts(&server.base, "/v1/chat/completions", body).await {
                assert!(text == "yes" || text == "no", "{sampling}: {text:?}");
            }
        }
    }
}

/// `root ::= "<" ("ab" | "cd"){1,3} ">"`, checked by hand.
fn is_sentence(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else {
        return false;
    };
    let pairs = inner.as_bytes().chunks(2);
    (2..=6).contains(&inner.len())
        && inner.len() % 2 == 0
        && pairs.into_iter().all(|p| p == b"ab" || p == b"cd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grammar_output_is_a_sentence() {
    let server = start(ServerOptions::default()).await;
    let grammar = "root ::= \"<\" pair{1,3} \">\"\npair ::= \"ab\" | \"cd\" # two letters";
    for sampling in samplings() {
        for field in [
            json!({"grammar": grammar}),
            json!({"structured_outputs": {"grammar": grammar}}),
            json!({"guided_grammar": grammar}),
        ] {
            let body =
                json!({"model": MODEL_ID, "prompt": "And God said", "max_tokens": 30, "n": 2});
            let body = with(with(body, &field), &sampling);
            for text in texts(&server.base, "/v1/completions", body).await {
                assert!(is_sentence(&text), "{field} {sampling}: {text:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_constraint_is_a_400_with_its_position() {
    let server = start(ServerOptions::default()).await;
    let chat = |field: Value| {
        with(
            json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]}),
            &field,
        )
    };
    let (status, body) = post_json(
        &server.base,
        "/v1/chat/completions",
        chat(json!({"structured_outputs": {"regex": "ab(c"}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "structured_outputs.regex");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("at byte 2 (line 1, column 3)"),
        "{message}"
    );

    let (status, body) = post_json(
        &server.base,
        "/v1/completions",
        json!({"model": MODEL_ID, "prompt": "hi", "grammar": "root ::= \"a\" |\n  [b-"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "grammar");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("line 2, column 3"), "{message}");

    let (status, body) = post_json(
        &server.base,
        "/v1/chat/completions",
        chat(json!({"guided_regex": "a", "guided_choice": ["a"]})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("guided_regex") && message.contains("guided_choice"),
        "{message}"
    );

    // A constraint that allows no text at all is refused before any generation.
    let (status, body) = post_json(
        &server.base,
        "/v1/chat/completions",
        chat(json!({"guided_choice": [""]})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "guided_choice");
}

/// The same fields on the Responses and Anthropic Messages APIs (as their clients' `extra_body`
/// sends them): the output text keeps the regex or grammar, and a bad pattern is their 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_and_messages_take_the_same_constraints() {
    let server = start(ServerOptions::default()).await;
    for sampling in samplings() {
        let body = json!({
            "model": MODEL_ID, "input": "A code?", "max_output_tokens": 30,
            "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}
        });
        let (status, answer) =
            post_json(&server.base, "/v1/responses", &with(body, &sampling)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["status"], "completed", "{answer}");
        let text = answer["output"][0]["content"][0]["text"].as_str().unwrap();
        assert!(is_code(text), "{sampling}: {text:?}");

        let body = json!({
            "model": MODEL_ID, "max_tokens": 30,
            "messages": [{"role": "user", "content": "Pairs?"}],
            "grammar": "root ::= \"<\" pair{1,3} \">\"\npair ::= \"ab\" | \"cd\""
        });
        let (status, answer) =
            post_json(&server.base, "/v1/messages", &with(body, &sampling)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["stop_reason"], "end_turn", "{answer}");
        let text = answer["content"][0]["text"].as_str().unwrap();
        assert!(is_sentence(text), "{sampling}: {text:?}");
    }
    let body = json!({"model": MODEL_ID, "input": "x", "guided_regex": "ab(c"});
    let (status, answer) = post_json(&server.base, "/v1/responses", &body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "guided_regex", "{answer}");
    let body = json!({
        "model": MODEL_ID, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
        "structured_outputs": {"regex": "ab(c"}
    });
    let (status, answer) = post_json(&server.base, "/v1/messages", &body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("structured_outputs.regex"),
        "{answer}"
    );
}
