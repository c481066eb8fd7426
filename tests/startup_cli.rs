//! `sluice serve` listens before it preloads, so Kubernetes' startup probe sees the process:
//! through the real binary, the probes answer 503 while a preload is held mid-load, 200 once it
//! is done; a preload that fails ends the process non-zero, naming the model. `--allowed-hosts`
//! and `--admin-key` reach the server (issue 30), and an admin key that is also an API key is
//! refused at start.
//!
//! The preload is held deterministically: the model's `tokenizer.json` is a named pipe, so the
//! load blocks reading it (after the weights) until the test writes it.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::{spawn_serve_listening, STARTED};

const MODEL: &str = "fixtures/models/llama";
const WAIT: Duration = Duration::from_secs(120);

/// A copy of the test model whose `tokenizer.json` is a named pipe; returns the real one's
/// bytes.
fn model_with_piped_tokenizer(root: &Path) -> (PathBuf, Vec<u8>) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL);
    let dir = root.join("m");
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "tokenizer.json" {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let pipe = CString::new(dir.join("tokenizer.json").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo(3) touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o600) }, 0, "mkfifo");
    let tokenizer = std::fs::read(source.join("tokenizer.json")).unwrap();
    (dir, tokenizer)
}

/// Writes `bytes` into the pipe (opening it blocks until the loader reads it) and closes it.
fn feed(dir: &Path, bytes: &[u8]) {
    let mut pipe = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("tokenizer.json"))
        .unwrap();
    pipe.write_all(bytes).unwrap();
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let res = reqwest::get(format!("{base}{path}")).await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_503_while_the_preload_runs_and_200_once_it_is_done() {
    let root = tempfile::tempdir().unwrap();
    let (dir, tokenizer) = model_with_piped_tokenizer(root.path());
    let args = ["--model", dir.to_str().unwrap(), "--served-model-name", "m"];
    let (mut child, base, logs) = spawn_serve_listening(&args);

    let (status, startup) = get(&base, "/health/startup").await;
    assert_eq!(status, 503);
    assert_eq!(startup["status"], "starting");
    assert_eq!(startup["loading"], json!(["m"]));
    let (status, ready) = get(&base, "/health/ready").await;
    assert_eq!((status, &ready["reason"]), (503, &json!("starting")));
    assert_eq!(get(&base, "/health/live").await.0, 200);

    tokio::task::spawn_blocking(move || feed(&dir, &tokenizer))
        .await
        .unwrap();
    logs.wait_for(STARTED, WAIT);
    assert_eq!(
        get(&base, "/health/startup").await,
        (200, json!({"status": "started"}))
    );
    assert_eq!(
        get(&base, "/health/ready").await,
        (200, json!({"status": "ready"}))
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_preload_ends_the_process_nonzero_naming_the_model() {
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = model_with_piped_tokenizer(root.path());
    let args = ["--model", dir.to_str().unwrap(), "--served-model-name", "m"];
    let (mut child, base, logs) = spawn_serve_listening(&args);
    assert_eq!(get(&base, "/health/startup").await.0, 503);
    tokio::task::spawn_blocking(move || feed(&dir, b"not a tokenizer"))
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running after a failed preload"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "{status:?}");
    let stderr = logs.rest().join("\n");
    assert!(stderr.contains("preloading m"), "{stderr}");
}

/// `(status, error code)` of a request to `{base}{path}` with `Host: host` and, if any,
/// `Authorization: Bearer key`; POSTs send an empty JSON body.
async fn ask(post: bool, base: &str, path: &str, host: &str, key: Option<&str>) -> (u16, String) {
    let client = reqwest::Client::new();
    let url = format!("{base}{path}");
    let mut req = if post {
        client.post(url).json(&json!({}))
    } else {
        client.get(url)
    };
    req = req.header("host", host);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    (status, code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_and_the_admin_key_reach_the_server_from_the_flags() {
    let args = [
        "--model",
        MODEL,
        "--allowed-hosts",
        "api.example",
        "--api-key",
        "caller",
        "--admin-key",
        "operator",
    ];
    let (mut child, base, logs) = spawn_serve_listening(&args);
    logs.wait_for(STARTED, WAIT);
    let local = base.trim_start_matches("http://").to_string();
    // Bound to 127.0.0.1: localhost, addresses and the listed name; nothing else.
    for host in [local.as_str(), "localhost:1", "api.example"] {
        assert_eq!(
            ask(false, &base, "/health/ready", host, None).await.0,
            200,
            "{host}"
        );
    }
    assert_eq!(
        ask(false, &base, "/health/ready", "evil.example", None).await,
        (403, "host_not_allowed".to_string())
    );
    let admin = "/admin/models/llama/pin";
    assert_eq!(
        ask(true, &base, admin, &local, Some("caller")).await,
        (401, "invalid_admin_key".to_string())
    );
    assert_eq!(
        ask(true, &base, admin, &local, Some("operator")).await.0,
        200
    );
    assert_eq!(
        ask(false, &base, "/v1/models", &local, Some("caller"))
            .await
            .0,
        200
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_admin_key_that_is_also_an_api_key_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--port", "0", "--model", MODEL])
        .args(["--api-key", "same", "--admin-key", "same"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--admin-key must differ"), "{stderr}");
}

/// Logs written to a pipe or a file carry no colour codes, as text or as JSON lines.
#[test]
fn logs_to_a_pipe_are_plain_text_or_json_lines() {
    for format in ["text", "json"] {
        let (mut child, _base, logs) =
            spawn_serve_listening(&["--log-format", format, "--model", MODEL]);
        let line = logs.wait_for("model ready", WAIT);
        child.kill().unwrap();
        child.wait().unwrap();
        let lines: Vec<String> = std::iter::once(line).chain(logs.rest()).collect();
        for line in &lines {
            assert!(
                !line.contains('\u{1b}'),
                "{format}: an escape code in {line:?}"
            );
            if format == "json" {
                let value: Value = serde_json::from_str(line).unwrap();
                assert!(value["level"].is_string(), "{line}");
            }
        }
    }
}
