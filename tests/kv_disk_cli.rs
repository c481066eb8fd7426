//! `sluice serve --kv-disk-cache DIR` through the real binary: prompts survive a restart (a
//! clean one, and a `kill -9` in the middle of requests and writes), two servers share one
//! directory under load, and an unusable directory is refused at start with its name.

use std::process::Child;

use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::spawn_serve;

const MODEL: &str = "fixtures/models/llama";

/// Prompts sharing a long head, so most of each is cached after the first.
fn prompts() -> Vec<String> {
    let head = "the quick brown fox jumps over the lazy dog and ".repeat(6);
    (0..8)
        .map(|i| format!("{head} story number {i} goes on"))
        .collect()
}

/// A server process, killed when dropped (also when a test fails halfway).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[&str]) -> (Server, String) {
    let (child, base) = spawn_serve(args);
    (Server(child), base)
}

fn serve(dir: &std::path::Path) -> (Server, String) {
    start(&[
        "--model",
        MODEL,
        "--served-model-name",
        "m",
        "--block-size",
        "4",
        "--kv-disk-cache",
        dir.to_str().unwrap(),
    ])
}

/// (text, cached prompt tokens) of a greedy completion.
async fn complete(client: &reqwest::Client, base: &str, prompt: &str) -> (String, u64) {
    let body: Value = client
        .post(format!("{base}/v1/completions"))
        .json(&json!({"model": "m", "prompt": prompt, "max_tokens": 6, "temperature": 0}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = body["choices"][0]["text"].as_str().unwrap().to_string();
    let cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    (text, cached)
}

async fn all(client: &reqwest::Client, base: &str) -> Vec<(String, u64)> {
    let futures = prompts()
        .into_iter()
        .map(|p| {
            let (client, base) = (client.clone(), base.to_string());
            tokio::spawn(async move { complete(&client, &base, &p).await })
        })
        .collect::<Vec<_>>();
    let mut out = Vec::new();
    for f in futures {
        out.push(f.await.unwrap());
    }
    out
}

async fn metric(client: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = (client.get(format!("{base}/metrics")).send().await.unwrap())
        .text()
        .await
        .unwrap();
    (text.lines())
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit_once(' '))
        .map_or(0.0, |(_, v)| v.parse().unwrap())
}

fn stop(server: Server) {
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_survive_a_restart_and_a_kill_during_writes() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let client = reqwest::Client::new();
    // The reference: no disk tier.
    let (child, base) = start(&[
        "--model",
        MODEL,
        "--served-model-name",
        "m",
        "--block-size",
        "4",
    ]);
    let reference: Vec<String> = all(&client, &base).await.into_iter().map(|r| r.0).collect();
    stop(child);

    // kill -9 while requests run and blocks are being written.
    let (child, base) = serve(&dir);
    let running = {
        let (client, base) = (client.clone(), base.clone());
        tokio::spawn(async move { all(&client, &base).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    stop(child);
    let _ = running.await;

    // What is intact is used; nothing damaged is.
    let (child, base) = serve(&dir);
    let after_kill = all(&client, &base).await;
    assert_eq!(
        metric(&client, &base, "sluice:kv_disk_read_errors_total").await,
        0.0
    );
    for (i, (text, _)) in after_kill.iter().enumerate() {
        assert_eq!(text, &reference[i], "prompt {i} after a kill -9");
    }
    // A clean restart: every prompt's head is read back from disk.
    stop(child);
    let (child, base) = serve(&dir);
    let first = complete(&client, &base, &prompts()[0]).await;
    let disk_hits = metric(&client, &base, "sluice:prefix_cache_disk_hits_total").await;
    stop(child);
    assert_eq!(first.0, reference[0]);
    assert!(
        first.1 >= 40,
        "{} prompt tokens cached after a restart",
        first.1
    );
    assert_eq!(disk_hits, first.1 as f64, "all of them from disk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_one_directory_under_load() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let client = reqwest::Client::new();
    let (a, base_a) = serve(&dir);
    let (b, base_b) = serve(&dir);
    let (ra, rb) = tokio::join!(all(&client, &base_a), all(&client, &base_b));
    let (ra2, rb2) = tokio::join!(all(&client, &base_a), all(&client, &base_b));
    for run in [&rb, &ra2, &rb2] {
        let texts: Vec<&String> = run.iter().map(|r| &r.0).collect();
        assert_eq!(texts, ra.iter().map(|r| &r.0).collect::<Vec<_>>());
    }
    for base in [&base_a, &base_b] {
        assert_eq!(
            metric(&client, base, "sluice:kv_disk_read_errors_total").await,
            0.0
        );
    }
    stop(a);
    stop(b);
    // A third server reads what both wrote.
    let (c, base_c) = serve(&dir);
    let (text, cached) = complete(&client, &base_c, &prompts()[3]).await;
    stop(c);
    assert_eq!(text, ra[3].0);
    assert!(cached >= 40, "{cached}");
}

#[test]
fn an_unusable_directory_is_refused_at_start_with_its_name() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let bad = file.join("kv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--port", "0", "--model", MODEL, "--kv-disk-cache"])
        .arg(&bad)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--kv-disk-cache") && stderr.contains("a-file"),
        "{stderr}"
    );
}
