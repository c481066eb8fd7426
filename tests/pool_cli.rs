//! `sluice serve`'s pool flags, through the real binary: with none it serves the bundled
//! model preloaded; `--models-dir`, `--preload`, `--pin` and `--max-models` shape the pool.

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::spawn_serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_serve_with_no_flags_serves_the_bundled_model_preloaded() {
    let (mut child, base) = spawn_serve(&[]);
    let models: Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(models["data"][0]["id"], "sluice-kjv-mini");
    assert_eq!(models["data"][0]["status"], "loaded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_serve_pool_flags_preload_pin_and_bound_the_pool() {
    let (mut child, base) = spawn_serve(&[
        "--models-dir",
        "fixtures/models",
        "--preload",
        "qwen2",
        "--pin",
        "qwen2",
        "--max-models",
        "2",
        "--max-memory",
        "0.5",
        "--kv-cache-memory",
        "0.001",
    ]);
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for model in ["llama", "mistral", "qwen3"] {
        let res = client
            .post(format!("{base}/v1/completions"))
            .json(&json!({"model": model, "prompt": "hi", "max_tokens": 2}))
            .send()
            .await
            .unwrap();
        statuses.push(res.status().as_u16());
    }
    let admin: Value = client
        .get(format!("{base}/admin/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(statuses, [200, 200, 200]);
    let models = admin["data"].as_array().unwrap();
    let loaded: Vec<&str> = models
        .iter()
        .filter(|m| m["status"] == "loaded")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(loaded, ["qwen2", "qwen3"], "{admin}");
    let qwen2 = models.iter().find(|m| m["id"] == "qwen2").unwrap();
    assert_eq!(qwen2["pinned"], true);
    assert_eq!(admin["max_models"], 2);
}

/// Runs `sluice generate` on the bundled model with `args` added; returns whether it succeeded
/// and its stderr.
fn generate(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "--log-format",
            "json",
            "generate",
            "--prompt",
            "In the beginning",
        ])
        .args(["--max-tokens", "2"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn kv_cache_memory_is_auto_by_default_takes_gib_and_names_a_bad_value() {
    // The bundled model's context is 512 tokens and a block of 16 takes 32 KiB: auto holds the
    // context four times over; a fixed 0.0005 GiB (16 blocks) lowers it, with a warning.
    for (flag, holds) in [
        (None, "holds 2048 tokens, context 512"),
        (Some("auto"), "holds 2048 tokens, context 512"),
        (Some("0.0005"), "holds 256 tokens, context 256"),
    ] {
        let args = match flag {
            Some(value) => vec!["--kv-cache-memory", value],
            None => vec![],
        };
        let (ok, stderr) = generate(&args);
        assert!(ok, "{flag:?}: {stderr}");
        assert!(stderr.contains(holds), "{flag:?}: {stderr}");
        let lowered = stderr.contains("the context length is lowered");
        assert_eq!(lowered, flag == Some("0.0005"), "{flag:?}: {stderr}");
    }
    let (ok, stderr) = generate(&["--kv-cache-memory", "lots"]);
    assert!(!ok);
    assert!(
        stderr.contains("`lots` is neither `auto` nor a positive number of GiB"),
        "{stderr}"
    );
}

#[test]
fn generate_writes_its_prompt_to_the_disk_tier_before_it_exits() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let (ok, stderr) = generate(&[
        "--kv-disk-cache",
        dir.to_str().unwrap(),
        "--block-size",
        "2",
    ]);
    assert!(ok, "{stderr}");
    // "In the beginning" and two generated tokens: at least one full block of 2 was computed,
    // and its file is written (not just queued) when the process ends.
    let mut files = 0;
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for item in std::fs::read_dir(d).unwrap().flatten() {
            let path = item.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "kv") {
                files += 1;
            }
        }
    }
    assert!(files >= 1, "{stderr}");
}
