//! Images over HTTP, against the Gemma 3 vision fixture (fixtures/models/gemma3-vision): a chat
//! message's `image_url` data URL is decoded, encoded and placed at its soft tokens, and the
//! greedy continuation is transformers' (reference.json); the prefix cache tells images apart;
//! an image request keeps batch invariance; bad images are 400s naming the part.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::server::{post_json, post_stream, sse_payloads, start, ServerOptions, MODEL_ID};

/// A template without turn markup, so that a one-message conversation renders to exactly the
/// reference prompt's text (the fixture's own wraps it in ChatML turns).
const PLAIN_TEMPLATE: &str =
    "{{ bos_token }}{% for message in messages %}{{ message['content'] }}{% endfor %}";

pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/gemma3-vision")
}

/// The fixture, copied with [`PLAIN_TEMPLATE`] as its chat template.
pub fn vision_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(dir.path().join("chat_template.jinja"), PLAIN_TEMPLATE).unwrap();
    dir
}

pub fn serve(dir: &Path) -> ServerOptions {
    ServerOptions {
        model_dir: Some(dir.to_path_buf()),
        ..ServerOptions::default()
    }
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture_dir().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A data URL of the fixture image `name`.
fn data_url(name: &str) -> String {
    let bytes = std::fs::read(fixture_dir().join("images").join(name)).unwrap();
    format!("data:image/png;base64,{}", base64(&bytes))
}

pub use sluice_api::scoring::base64;

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A greedy chat request of one user message made of `parts`.
fn chat(parts: Vec<Value>, max_tokens: u32) -> Value {
    json!({"model": MODEL_ID, "messages": [{"role": "user", "content": parts}],
           "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true})
}

/// The reference prompt "The quick brown fox <image> looks at the lazy dog." as chat parts.
fn fox(image: &str) -> Vec<Value> {
    vec![
        text_part("The quick brown fox "),
        image_part(&data_url(image)),
        text_part(" looks at the lazy dog."),
    ]
}

/// The reference continuation's text, decoded by the fixture's tokenizer.
pub fn reference_text(prompt: &str) -> String {
    let tokenizer = sluice_text::Tokenizer::from_dir(&fixture_dir()).unwrap();
    let ids: Vec<u32> = (reference()[prompt]["greedy_tokens"]
        .as_array()
        .unwrap()
        .iter())
    .map(|t| t.as_u64().unwrap() as u32)
    .collect();
    tokenizer.decode(&ids, true).unwrap()
}

fn content(body: &Value) -> &str {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content in {body}"))
}

/// The concatenated content deltas of a streamed chat completion.
fn streamed_content(sse: &str) -> String {
    (sse_payloads(sse).iter())
        .filter(|p| *p != "[DONE]")
        .map(|p| serde_json::from_str::<Value>(p).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

#[tokio::test]
async fn a_chat_image_gives_the_reference_greedy_continuation() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let reference = reference();
    let body = chat(fox("rgb_48x20.png"), 8);
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(content(&answer), reference_text("prompt"));
    // The image's 16 soft tokens and its markers count as prompt tokens.
    let prompt_len = reference["prompt"]["input_ids"].as_array().unwrap().len();
    assert_eq!(answer["usage"]["prompt_tokens"], prompt_len);
    assert_eq!(answer["usage"]["completion_tokens"], 8);
    let sse = post_stream(&server.base, "/v1/chat/completions", &body).await;
    assert_eq!(streamed_content(&sse), content(&answer));

    let two = chat(
        vec![
            text_part("Compare "),
            image_part(&data_url("rgb_48x20.png")),
            text_part(" with "),
            image_part(&data_url("lossless_33x50.webp")),
            text_part(" and say which."),
        ],
        8,
    );
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &two).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(content(&answer), reference_text("two_images"));
    let prompt_len = reference["two_images"]["input_ids"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(answer["usage"]["prompt_tokens"], prompt_len);
    server
        .wait_for_metric("vllm:kv_cache_usage_perc", 0.0, Duration::from_secs(10))
        .await;
}

/// The reference's 5 best log-probabilities after the prompt `name`, best first.
fn reference_top_logprobs(name: &str) -> Vec<f64> {
    let reference = reference();
    let logits = reference[name]["logits"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    let logits: Vec<f64> = (logits.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap())
        .collect();
    let max = logits.iter().copied().fold(f64::MIN, f64::max);
    let log_sum = logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln() + max;
    let mut top: Vec<f64> = logits.iter().map(|l| l - log_sum).collect();
    top.sort_by(|a, b| b.total_cmp(a));
    top.truncate(5);
    top
}

/// The 5 best log-probabilities a chat answer gives its first token, best first.
fn top_logprobs(body: &Value) -> Vec<f64> {
    let top = &body["choices"][0]["logprobs"]["content"][0]["top_logprobs"];
    (top.as_array()
        .unwrap_or_else(|| panic!("no top_logprobs in {body}"))
        .iter())
    .map(|t| t["logprob"].as_f64().unwrap())
    .collect()
}

#[tokio::test]
async fn the_first_tokens_log_probabilities_are_the_references_and_depend_on_the_image() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let expected = reference_top_logprobs("prompt");
    let diff = |body: &Value| {
        (top_logprobs(body).iter().zip(&expected))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let mut body = chat(fox("rgb_48x20.png"), 1);
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(5);
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(diff(&answer) < 1e-4, "{answer}");
    body["messages"][0]["content"][1] = image_part(&data_url("photo444_64x40.jpg"));
    let (_, other) = post_json(&server.base, "/v1/chat/completions", &body).await;
    assert!(diff(&other) > 1e-2, "another image: {other}");
}

fn cached_tokens(body: &Value) -> u64 {
    body["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_repeated_image_hits_the_prefix_cache_and_another_image_misses() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let first = chat(fox("rgb_48x20.png"), 2);
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &first).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(cached_tokens(&answer), 0);
    let (_, again) = post_json(&server.base, "/v1/chat/completions", &first).await;
    assert!(cached_tokens(&again) >= 16, "{again}");
    assert_eq!(content(&again), content(&answer));
    // Same text, same length, another image: nothing of the first may be reused.
    let other = chat(fox("rgb_32x32.png"), 2);
    let (status, other) = post_json(&server.base, "/v1/chat/completions", &other).await;
    assert_eq!(status, 200, "{other}");
    assert_eq!(cached_tokens(&other), 0, "{other}");
}

#[tokio::test]
async fn a_seeded_image_request_gives_the_same_tokens_alone_or_beside_text_requests() {
    let dir = vision_model();
    let server = start(ServerOptions {
        step_delay: Duration::from_millis(5),
        ..serve(dir.path())
    })
    .await;
    let mut image = chat(fox("photo444_64x40.jpg"), 12);
    image["temperature"] = json!(1.0);
    image["seed"] = json!(7);
    // The sampled tokens are nearly certain; the alternatives' log-probabilities are not.
    image["logprobs"] = json!(true);
    image["top_logprobs"] = json!(5);
    let (status, alone) = post_json(&server.base, "/v1/chat/completions", &image).await;
    assert_eq!(status, 200, "{alone}");
    let text = |i: u64| {
        json!({"model": MODEL_ID, "max_tokens": 12, "temperature": 1.0, "seed": i,
               "messages": [{"role": "user", "content": format!("text request {i}")}]})
    };
    let base = server.base.clone();
    let texts: Vec<_> = (0..3)
        .map(|i| {
            let (base, body) = (base.clone(), text(i));
            tokio::spawn(async move { post_json(&base, "/v1/chat/completions", &body).await })
        })
        .collect();
    let (status, beside) = post_json(&server.base, "/v1/chat/completions", &image).await;
    assert_eq!(status, 200, "{beside}");
    for task in texts {
        assert_eq!(task.await.unwrap().0, 200);
    }
    assert_eq!(content(&beside), content(&alone));
    assert_eq!(
        beside["choices"][0]["logprobs"],
        alone["choices"][0]["logprobs"]
    );
    server
        .wait_for_metric("vllm:kv_cache_usage_perc", 0.0, Duration::from_secs(10))
        .await;
}

/// A PNG whose header claims `width` x `height` pixels, and the start of its pixel data (a
/// decompression bomb's first bytes).
fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    for chunk in [ihdr, b"IDAT\x78\x9c".to_vec()] {
        png.extend((chunk.len() as u32 - 4).to_be_bytes());
        png.extend(&chunk);
        png.extend(crc32(&chunk).to_be_bytes());
    }
    png
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn rejected(answer: &Value) -> (&str, &str) {
    let error = &answer["error"];
    (
        error["param"].as_str().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn bad_images_are_400s_naming_the_part_and_the_server_stays_healthy() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let part = "messages[0].content[1].image_url";
    let truncated = std::fs::read(fixture_dir().join("images/rgb_32x32.png")).unwrap();
    let cases = [
        (
            format!("data:image/png;base64,{}", base64(b"not an image")),
            "format",
        ),
        (
            format!("data:image/png;base64,{}", base64(&truncated[..200])),
            "decoded",
        ),
        (
            format!(
                "data:image/png;base64,{}",
                base64(&png_header(60_000, 60_000))
            ),
            "pixels",
        ),
        ("https://example.com/cat.png".to_string(), "not fetched"),
        ("data:image/png;base64,!!!".to_string(), "base64"),
    ];
    for (url, says) in cases {
        let body = chat(vec![text_part("a"), image_part(&url), text_part("b")], 2);
        let (status, answer) = post_json(&server.base, "/v1/chat/completions", &body).await;
        assert_eq!(status, 400, "{url:.60}: {answer}");
        let (param, message) = rejected(&answer);
        assert_eq!(param, part, "{answer}");
        assert!(message.contains(says), "{url:.60}: {message}");
    }
    let (status, _) = post_json(
        &server.base,
        "/v1/chat/completions",
        &chat(fox("rgb_48x20.png"), 2),
    )
    .await;
    assert_eq!(status, 200);
    // The client's own `<start_of_image>` text is text: it is no image and asks for none.
    let literal = chat(vec![text_part("a <start_of_image> b")], 2);
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &literal).await;
    assert_eq!(status, 200, "{answer}");
    let with_image = chat(
        vec![
            text_part("a <start_of_image> b"),
            image_part(&data_url("rgb_48x20.png")),
        ],
        2,
    );
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", &with_image).await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn the_model_list_says_which_models_take_images() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let models: Value = reqwest::get(server.url("/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        models["data"][0]["input_modalities"],
        json!(["text", "image"])
    );
    let server = start(ServerOptions::default()).await;
    let models: Value = reqwest::get(server.url("/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["input_modalities"], json!(["text"]));
}

#[tokio::test]
async fn an_image_to_a_text_only_model_is_a_400_naming_the_part() {
    let server = start(ServerOptions::default()).await;
    let (status, answer) = post_json(
        &server.base,
        "/v1/chat/completions",
        &chat(fox("rgb_48x20.png"), 2),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let (param, message) = rejected(&answer);
    assert_eq!(param, "messages[0].content[1].image_url");
    assert!(message.contains("does not take images"), "{message}");
}

#[tokio::test]
async fn tokenize_counts_an_images_tokens() {
    let dir = vision_model();
    let server = start(serve(dir.path())).await;
    let body = json!({"model": MODEL_ID, "add_generation_prompt": false,
        "messages": [{"role": "user", "content": fox("rgb_48x20.png")}]});
    let (status, answer) = post_json(&server.base, "/tokenize", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["tokens"], reference()["prompt"]["input_ids"]);
}
