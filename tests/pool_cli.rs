//! `sluice serve`'s pool flags, through the real binary: with none it serves the bundled
//! model preloaded; `--models-dir`, `--preload`, `--pin`, `--max-models` and `--load-timeout`
//! shape the pool.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::{spawn_serve, spawn_serve_listening};
#[path = "support/metrics.rs"]
mod metrics;

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
    // The bundled model's context is 512 tokens and a block of 16 takes 32 KiB: four contexts
    // would be 64 KiB of blocks, so auto gives the floor (the old 1 GiB default, which the
    // budget holds); a fixed 0.0005 GiB (16 blocks) lowers the context, with a warning.
    for (flag, holds) in [
        (None, "holds 524288 tokens, context 512"),
        (Some("auto"), "holds 524288 tokens, context 512"),
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

/// A copy of the llama fixture at `dir`.
fn copy_llama(dir: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/llama");
    std::fs::create_dir_all(dir).unwrap();
    for entry in std::fs::read_dir(fixture).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
}

/// Replaces `path` by a named pipe nobody writes to: opening it for reading blocks for good.
fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    std::fs::remove_file(path).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c_path` is a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_that_never_ends_wedges_no_other_model_and_times_out_for_its_callers() {
    let root = tempfile::tempdir().unwrap();
    copy_llama(&root.path().join("healthy"));
    copy_llama(&root.path().join("hostile"));
    make_fifo(&root.path().join("hostile/tokenizer.json"));
    let (mut child, base, _logs) = spawn_serve_listening(&[
        "--models-dir",
        root.path().to_str().unwrap(),
        "--load-timeout",
        "4",
    ]);
    let waiters = |model: &str| {
        let series = format!("sluice:model_load_waiting_requests{{model_name=\"{model}\"}}");
        let base = base.clone();
        async move { metrics::scrape(&base, &series).await }
    };
    let body = |model: &str| json!({"model": model, "prompt": "In the beginning", "max_tokens": 4});

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // A caller asks for the hostile model, whose load blocks on its tokenizer for good.
    let started = Instant::now();
    let hostile = tokio::spawn({
        let (client, url) = (client.clone(), format!("{base}/v1/completions"));
        let body = body("hostile");
        async move {
            let res = client.post(url).json(&body).send().await.unwrap();
            (
                res.status().as_u16(),
                res.json::<Value>().await.unwrap(),
                started.elapsed(),
            )
        }
    });
    wait_until("the hostile load's waiter", || waiters("hostile"), 1.0).await;

    // A model never loaded before loads and answers meanwhile (before: it stayed "loading"
    // behind the hostile load, and its request timed out).
    let res = client
        .post(format!("{base}/v1/completions"))
        .json(&body("healthy"))
        .send()
        .await
        .expect("the healthy model answers while the hostile one loads");
    assert_eq!(res.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // A second caller asks for the hostile model and leaves while it loads: it stops waiting.
    let mut leaving = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    let payload = body("hostile").to_string();
    write!(
        leaving,
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    wait_until("the second waiter", || waiters("hostile"), 2.0).await;
    drop(leaving);
    wait_until("the second waiter to leave", || waiters("hostile"), 1.0).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // At the limit the waiting caller hears why.
    let (status, answer, elapsed) = hostile.await.unwrap();
    assert_eq!(status, 503, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not load within 4 s (--load-timeout)"),
        "{message}"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");

    // While the abandoned read still blocks, the next request is refused at once.
    let asked = Instant::now();
    let res = client
        .post(format!("{base}/v1/completions"))
        .json(&body("hostile"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    let answer: Value = res.json().await.unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("still reading its files"), "{message}");
    assert!(asked.elapsed() < Duration::from_secs(1));
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
    let models = admin["data"].as_array().unwrap();
    let of = |id: &str| models.iter().find(|m| m["id"] == id).unwrap().clone();
    assert_eq!(of("healthy")["status"], "loaded", "{admin}");
    let hostile = of("hostile");
    assert_eq!(
        (&hostile["status"], &hostile["memory_bytes"]),
        (&json!("unloaded"), &json!(0))
    );
    assert_eq!(hostile["load_failures"], 1, "{admin}");
}

/// Waits until `read` gives `want`, or panics after ten seconds.
async fn wait_until<F, Fut>(what: &str, read: F, want: f64)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = f64>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = read().await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {got}, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
