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
