//! Issue 30's heavy callers: `metadata` is held to OpenAI's limits on the routes that take it,
//! and the Responses store keeps to its byte budgets, per API key and in total, however much
//! each stored response carries.

use serde_json::{json, Map, Value};

use crate::metrics::scrape;
use crate::server::{start, ServerOptions, TestServer, MODEL_ID};

/// POSTs `body` to `path` as the holder of `key` (none: no header); status and JSON answer.
async fn post(server: &TestServer, key: Option<&str>, path: &str, body: &Value) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(server.url(path)).json(body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

/// GETs a stored response as the holder of `key`; the status.
async fn get_status(server: &TestServer, key: Option<&str>, id: &str) -> u16 {
    let mut req = reqwest::Client::new().get(server.url(&format!("/v1/responses/{id}")));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    req.send().await.unwrap().status().as_u16()
}

/// A one-token request of `path` with `metadata`.
fn request(path: &str, metadata: Value) -> Value {
    if path == "/v1/responses" {
        json!({"model": MODEL_ID, "input": "hi", "max_output_tokens": 1, "metadata": metadata})
    } else {
        json!({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 1, "metadata": metadata})
    }
}

/// `n` pairs, keys of `key_chars` characters and values of `value_chars`.
fn metadata(n: usize, key_chars: usize, value_chars: usize) -> Value {
    Value::Object(
        (0..n)
            .map(|i| {
                let key = format!("{i:0>key_chars$}");
                (key, json!("é".repeat(value_chars)))
            })
            .collect::<Map<_, _>>(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_held_to_openais_limits_on_responses_and_chat() {
    let server = start(ServerOptions::default()).await;
    let long_key = "k".repeat(65);
    let long_key_param = format!("metadata.{long_key}");
    let long_key_message = format!(
        "Invalid property name in 'metadata': '{long_key}' is too long. Expected a string with \
         maximum length 64, but got a string with length 65 instead."
    );
    for path in ["/v1/responses", "/v1/chat/completions"] {
        for ok in [
            metadata(16, 2, 1),
            json!({"k".repeat(64): "v"}),
            metadata(1, 1, 512),
            metadata(16, 64, 512),
            Value::Null,
        ] {
            let (status, body) = post(&server, None, path, &request(path, ok)).await;
            assert_eq!(status, 200, "{path}: {body}");
        }
        let refused = [
            (
                metadata(17, 2, 1),
                "metadata",
                "object_above_max_properties",
                "Invalid 'metadata': too many properties. Expected an object with at most 16 \
                 properties, but got an object with 17 properties instead.",
            ),
            (
                json!({long_key.clone(): "v"}),
                long_key_param.as_str(),
                "string_above_max_length",
                long_key_message.as_str(),
            ),
            (
                metadata(1, 1, 513),
                "metadata.0",
                "string_above_max_length",
                "Invalid 'metadata.0': string too long. Expected a string with maximum length \
                 512, but got a string with length 513 instead.",
            ),
            (
                json!({"k": 7}),
                "metadata.k",
                "invalid_type",
                "Invalid type for 'metadata.k': expected a string, but got an integer instead.",
            ),
            // The attack's shape: one pair of 600 KB.
            (
                json!({"k": "x".repeat(600_000)}),
                "metadata.k",
                "string_above_max_length",
                "Invalid 'metadata.k': string too long. Expected a string with maximum length \
                 512, but got a string with length 600000 instead.",
            ),
        ];
        for (metadata, param, code, message) in refused {
            let (status, body) = post(&server, None, path, &request(path, metadata)).await;
            assert_eq!(status, 400, "{path}: {body}");
            let error = &body["error"];
            assert_eq!(error["type"], "invalid_request_error", "{body}");
            assert_eq!(error["param"], param, "{path}");
            assert_eq!(error["code"], code, "{path}");
            assert_eq!(error["message"], message, "{path}");
        }
    }
    let (status, body) = post(
        &server,
        None,
        "/v1/responses",
        &request("/v1/responses", metadata(16, 64, 512)),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["metadata"], metadata(16, 64, 512), "echoed as sent");
    assert_eq!(
        scrape(&server.base, "sluice:responses_not_stored_total").await,
        0.0
    );
}

/// The attack in miniature: every response carries the most metadata allowed; the store keeps
/// to its byte budgets instead of growing with the count, and each key keeps its newest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_full_of_metadata_stay_within_the_store_budgets() {
    let (total, per_key) = (160 << 10, 100 << 10);
    let server = start(ServerOptions {
        api_keys: vec!["key-a".into(), "key-b".into()],
        stored_response_bytes: (total, per_key),
        ..ServerOptions::default()
    })
    .await;
    let body = request("/v1/responses", metadata(16, 64, 512));
    let mut ids: Vec<(&str, String)> = Vec::new();
    for i in 0..30 {
        let key = if i % 3 == 0 { "key-b" } else { "key-a" };
        let (status, answer) = post(&server, Some(key), "/v1/responses", &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["store"], true, "each one alone fits");
        ids.push((key, answer["id"].as_str().unwrap().to_string()));
        let held = scrape(&server.base, "sluice:stored_responses_bytes").await;
        assert!(
            held <= total as f64,
            "{held} bytes held after {i} responses"
        );
    }
    let held = scrape(&server.base, "sluice:stored_responses").await;
    assert!((2.0..30.0).contains(&held), "{held} responses held");
    assert!(scrape(&server.base, "sluice:stored_responses_evicted_total").await > 0.0);
    for key in ["key-a", "key-b"] {
        let mine: Vec<&String> = ids
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, id)| id)
            .collect();
        assert_eq!(
            get_status(&server, Some(key), mine[mine.len() - 1]).await,
            200,
            "{key}"
        );
        assert_eq!(
            get_status(&server, Some(key), mine[0]).await,
            404,
            "{key}'s oldest went"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_too_large_to_store_is_refused_before_any_work() {
    let server = start(ServerOptions {
        stored_response_bytes: (16 << 10, 16 << 10),
        ..ServerOptions::default()
    })
    .await;
    let mut body = request("/v1/responses", metadata(16, 64, 512));
    let (status, answer) = post(&server, None, "/v1/responses", &body).await;
    assert_eq!(status, 400, "{answer}");
    let error = &answer["error"];
    assert_eq!(error["param"], "store");
    assert_eq!(error["code"], "response_too_large_to_store");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the budget for stored responses of 16384 bytes")
            && message.contains("\"store\": false"),
        "{message}"
    );
    assert_eq!(scrape(&server.base, "sluice:stored_responses").await, 0.0);
    body["store"] = json!(false);
    let (status, answer) = post(&server, None, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["store"], false);
    // A small response fits and is kept.
    let (status, answer) = post(
        &server,
        None,
        "/v1/responses",
        &request("/v1/responses", Value::Null),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["store"], true);
    assert_eq!(
        get_status(&server, None, answer["id"].as_str().unwrap()).await,
        200
    );
}

/// GETs `path` as the holder of `key`; status and JSON answer.
async fn get(server: &TestServer, key: &str, path: &str) -> (u16, Value) {
    let res = reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

fn item_ids(page: &Value) -> Vec<&str> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_items_list_a_responses_own_input_to_its_own_key_in_pages() {
    let server = start(ServerOptions {
        api_keys: vec!["key-a".into(), "key-b".into()],
        ..ServerOptions::default()
    })
    .await;
    let first = json!({"model": MODEL_ID, "max_output_tokens": 1, "input": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "call_a", "name": "get", "arguments": "{\"n\":1}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "one"}]});
    let (status, answer) = post(&server, Some("key-a"), "/v1/responses", &first).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["id"].as_str().unwrap().to_string();
    let path = format!("/v1/responses/{id}/input_items");

    let (status, page) = get(&server, "key-a", &path).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["object"], "list");
    assert_eq!(page["has_more"], false);
    let kinds: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "function_call_output",
            "function_call",
            "message",
            "message"
        ],
        "newest first by default"
    );
    assert_eq!(page["data"][0]["output"], "one");
    assert_eq!(page["data"][1]["arguments"], "{\"n\":1}");
    assert_eq!(page["data"][2]["content"][0]["text"], "hi");
    assert_eq!(page["first_id"], page["data"][0]["id"]);
    assert_eq!(page["last_id"], page["data"][3]["id"]);
    let all = item_ids(&page);

    let (_, asc) = get(&server, "key-a", &format!("{path}?order=asc&limit=3")).await;
    assert_eq!(item_ids(&asc), [all[3], all[2], all[1]]);
    assert_eq!(asc["has_more"], true);
    let after = asc["last_id"].as_str().unwrap();
    let (_, rest) = get(
        &server,
        "key-a",
        &format!("{path}?order=asc&limit=3&after={after}&include[]=message.input_image.image_url"),
    )
    .await;
    assert_eq!(item_ids(&rest), [all[0]]);
    assert_eq!(rest["has_more"], false);

    let next = json!({"model": MODEL_ID, "max_output_tokens": 1, "previous_response_id": id,
        "input": "and then?"});
    let (status, answer) = post(&server, Some("key-a"), "/v1/responses", &next).await;
    assert_eq!(status, 200, "{answer}");
    let next_id = answer["id"].as_str().unwrap();
    let (_, page) = get(
        &server,
        "key-a",
        &format!("/v1/responses/{next_id}/input_items"),
    )
    .await;
    assert_eq!(
        page["data"].as_array().unwrap().len(),
        1,
        "only its own input: {page}"
    );
    assert_eq!(page["data"][0]["content"][0]["text"], "and then?");

    let (status, other) = get(&server, "key-b", &path).await;
    assert_eq!(status, 404, "another key's response: {other}");
    let (status, _) = get(&server, "key-a", "/v1/responses/resp_nope/input_items").await;
    assert_eq!(status, 404);
    for bad in ["limit=0", "limit=101", "order=sideways"] {
        let (status, body) = get(&server, "key-a", &format!("{path}?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, past) = get(&server, "key-a", &format!("{path}?after=msg_nope")).await;
    assert_eq!((status, past["data"].clone()), (200, json!([])));
}
