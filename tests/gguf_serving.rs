//! `sluice serve` on GGUF files, end to end: the real binary, real HTTP on loopback. A GGUF
//! file answers exactly as the Hugging Face directory it was converted from (tokenizer, chat
//! template and weights all read from the file), and a broken file is a clean error while the
//! other models keep serving.

use std::process::Child;

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::spawn_serve;

/// The real binary serving `args` on a free port; killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let args: Vec<&str> = ["--kv-cache-memory", "0.01"]
            .iter()
            .chain(args)
            .copied()
            .collect();
        let (child, base) = spawn_serve(&args);
        Self { child, base }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn chat(&self, model: &str) -> Value {
        let (status, body) = self
            .post(
                "/v1/chat/completions",
                json!({"model": model, "max_tokens": 24, "temperature": 0,
                       "messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "The quick brown fox, 42 times!"}]}),
            )
            .await;
        assert_eq!(status, 200, "{model}: {body}");
        body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gguf_file_answers_exactly_as_its_hugging_face_directory() {
    // The f16 fixture's values are f16 in both files; f32 weights make both runs the same math.
    let server = Server::start(&[
        "--model",
        "fixtures/models/llama-odd-head-dim",
        "--model",
        "fixtures/gguf/llama-odd-head-dim-f16.gguf",
        "--dtype",
        "f32",
    ]);
    let models: Value = reqwest::get(format!("{}/v1/models", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["llama-odd-head-dim", "llama-odd-head-dim-f16"]);
    let hf = server.chat("llama-odd-head-dim").await;
    let gguf = server.chat("llama-odd-head-dim-f16").await;
    assert_eq!(
        hf["usage"], gguf["usage"],
        "same prompt tokens through the same template"
    );
    assert_eq!(hf["choices"][0]["message"], gguf["choices"][0]["message"]);
    assert_eq!(
        hf["choices"][0]["finish_reason"],
        gguf["choices"][0]["finish_reason"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_gguf_file_fails_cleanly_while_others_keep_serving() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/gguf/qwen2-f16.gguf"
    ))
    .unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-gguf-serving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let broken = dir.join("broken.gguf");
    std::fs::write(&broken, &bytes[..bytes.len() / 2]).unwrap();
    let server = Server::start(&[
        "--model",
        broken.to_str().unwrap(),
        "--model",
        "fixtures/gguf/qwen3-f16.gguf",
        "--preload",
        "qwen3-f16",
    ]);
    let (status, body) = server
        .post(
            "/v1/completions",
            json!({"model": "broken", "prompt": "hi", "max_tokens": 2}),
        )
        .await;
    assert_eq!(status, 500, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("broken.gguf") && message.contains("truncated"),
        "{message}"
    );
    server.chat("qwen3-f16").await;
    std::fs::remove_dir_all(dir).unwrap();
}

/// The Gemma 3 vision fixture's directory with its config saying what its text GGUF means
/// (the GGUF has no key for the sliding pattern nor `query_pre_attn_scalar`: llama.cpp takes
/// every 6th layer global and the head size): both layers sliding, the scalar 16.
fn gemma3_vision_as_its_gguf_reads_it() -> tempfile::TempDir {
    let fixture = std::path::Path::new("fixtures/models/gemma3-vision")
        .canonicalize()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name != "config.json" {
            std::os::unix::fs::symlink(&path, dir.path().join(name)).unwrap();
        }
    }
    let text = std::fs::read_to_string(fixture.join("config.json")).unwrap();
    let mut config: Value = serde_json::from_str(&text).unwrap();
    let t = &mut config["text_config"];
    t["layer_types"] = json!(["sliding_attention", "sliding_attention"]);
    t["sliding_window_pattern"] = 6.into();
    t["_sliding_window_pattern"] = 6.into();
    t["query_pre_attn_scalar"] = 16.into();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gguf_file_with_its_mmproj_answers_an_image_as_its_hugging_face_directory() {
    let hf = gemma3_vision_as_its_gguf_reads_it();
    let server = Server::start(&[
        "--model",
        "fixtures/gguf/gemma3-vision-f16.gguf",
        "--mmproj",
        "fixtures/gguf/mmproj-gemma3-vision-f16.gguf",
        "--model",
        hf.path().to_str().unwrap(),
        "--served-model-name",
        "gguf",
        "--served-model-name",
        "hf",
        "--dtype",
        "f32",
    ]);
    let image = std::fs::read("fixtures/models/gemma3-vision/images/photo444_64x40.jpg").unwrap();
    let url = format!(
        "data:image/jpeg;base64,{}",
        sluice_api::scoring::base64(&image)
    );
    let ask = |model: &str| {
        json!({"model": model, "max_tokens": 6, "temperature": 0, "logprobs": true,
               "top_logprobs": 3,
               "messages": [{"role": "user", "content": [
                   {"type": "text", "text": "The quick brown fox"},
                   {"type": "image_url", "image_url": {"url": url}}]}]})
    };
    let (status, gguf) = server.post("/v1/chat/completions", ask("gguf")).await;
    assert_eq!(status, 200, "{gguf}");
    let (status, hf) = server.post("/v1/chat/completions", ask("hf")).await;
    assert_eq!(status, 200, "{hf}");
    assert_eq!(hf["usage"], gguf["usage"], "the same prompt tokens");
    assert_eq!(hf["choices"][0]["message"], gguf["choices"][0]["message"]);
    let tops = |v: &Value| -> Vec<(String, f64)> {
        (v["choices"][0]["logprobs"]["content"]
            .as_array()
            .unwrap()
            .iter())
        .flat_map(|t| t["top_logprobs"].as_array().unwrap().clone())
        .map(|t| {
            (
                t["token"].as_str().unwrap().to_string(),
                t["logprob"].as_f64().unwrap(),
            )
        })
        .collect()
    };
    for (g, h) in tops(&gguf).iter().zip(tops(&hf)) {
        assert_eq!(g.0, h.0);
        assert!((g.1 - h.1).abs() < 1e-4, "{g:?} vs {h:?}");
    }
    let models: Value = reqwest::get(format!("{}/v1/models", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let card = (models["data"].as_array().unwrap().iter())
        .find(|m| m["id"] == "gguf")
        .unwrap();
    assert_eq!(card["input_modalities"], json!(["text", "image"]), "{card}");
}
