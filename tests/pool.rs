//! End-to-end tests of the model pool: several tiny fixture models served from one process over
//! real HTTP on an ephemeral loopback port, loaded on demand within a memory budget (the real
//! `sluice serve` binary with the pool's flags: `pool_cli.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sluice_api::{router_for, ApiConfig, ModelRegistry};
use sluice_engine::pool::{
    Budget, DirectoryLoader, LoadSettings, ModelLoader, ModelPool, ModelSpec,
};
use sluice_model::WeightDtype;
#[path = "support/metrics.rs"]
mod metrics;

const KV_CACHE_BYTES: usize = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/models")
        .join(name)
}

fn settings() -> LoadSettings {
    LoadSettings {
        dtype: Some(WeightDtype::F32),
        ..LoadSettings::with_fixed_kv(16, KV_CACHE_BYTES)
    }
}

/// The bytes a load of `dir` is expected to take, as the pool estimates it.
fn estimate(dir: &Path) -> usize {
    DirectoryLoader::new(settings())
        .estimate_bytes(dir)
        .unwrap()
}

/// A server over a model pool.
struct PoolServer {
    base: String,
    pool: ModelPool,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for PoolServer {
    fn drop(&mut self) {
        self.server.abort();
        self.pool.shutdown();
    }
}

impl PoolServer {
    async fn start(models: &[(&str, PathBuf)], pinned: &[&str], budget: Budget) -> Self {
        Self::start_with_key(models, pinned, budget, None).await
    }

    async fn start_with_key(
        models: &[(&str, PathBuf)],
        pinned: &[&str],
        budget: Budget,
        api_key: Option<&str>,
    ) -> Self {
        let specs = models
            .iter()
            .map(|(id, dir)| ModelSpec {
                id: id.to_string(),
                dir: dir.clone(),
                pinned: pinned.contains(id),
            })
            .collect();
        let loader = Arc::new(DirectoryLoader::new(settings()));
        let pool = ModelPool::new(specs, loader, budget).unwrap();
        let config = ApiConfig {
            api_keys: api_key.into_iter().map(str::to_string).collect(),
            ..ApiConfig::default()
        };
        let app = router_for(Arc::new(ModelRegistry::pooled(pool.clone())), config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            sluice_api::server::serve(listener, app, Default::default(), std::future::pending())
                .await;
        });
        PoolServer {
            base: format!("http://{addr}"),
            pool,
            server,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A greedy completion: (status, body).
    async fn complete(&self, model: &str, prompt: &str) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(self.url("/v1/completions"))
            .json(&json!({"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0}))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn text(&self, model: &str, prompt: &str) -> String {
        let (status, body) = self.complete(model, prompt).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["model"], model);
        body["choices"][0]["text"].as_str().unwrap().to_string()
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(self.url(path))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `status` of `id` in `/v1/models`.
    async fn status(&self, id: &str) -> String {
        let list = self.get("/v1/models").await;
        let card = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {list}"));
        card["status"].as_str().unwrap().to_string()
    }

    /// One sample of `/metrics`, e.g. `sluice:model_loads_total{model_name="llama"}`.
    async fn metric(&self, series: &str) -> f64 {
        metrics::scrape(&self.base, series).await
    }

    async fn loads(&self, id: &str) -> f64 {
        self.metric(&format!("sluice:model_loads_total{{model_name=\"{id}\"}}"))
            .await
    }

    async fn admin(&self, id: &str, action: &str) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(self.url(&format!("/admin/models/{id}/{action}")))
            .header("content-type", "application/json")
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }
}

fn three_fixtures() -> Vec<(&'static str, PathBuf)> {
    ["llama", "qwen2", "mistral"]
        .into_iter()
        .map(|name| (name, fixture(name)))
        .collect()
}

fn roomy() -> Budget {
    Budget {
        max_memory_bytes: 1 << 30,
        max_models: None,
        wait_for_idle: Duration::from_secs(10),
        load_timeout: Duration::from_secs(60),
    }
}

/// A budget any two of the three fixtures fit in, never all three.
fn room_for_two() -> Budget {
    let sizes: Vec<usize> = three_fixtures().iter().map(|(_, d)| estimate(d)).collect();
    let total: usize = sizes.iter().sum();
    Budget {
        max_memory_bytes: total - sizes.iter().min().unwrap() / 2,
        max_models: None,
        wait_for_idle: Duration::from_secs(10),
        load_timeout: Duration::from_secs(60),
    }
}

const PROMPTS: [&str; 3] = ["In the beginning", "And God said", "The quick brown fox"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_concurrent_requests_are_answered_by_the_right_model() {
    let mut alone = Vec::new();
    for (id, dir) in three_fixtures() {
        let server = PoolServer::start(&[(id, dir)], &[], roomy()).await;
        for prompt in PROMPTS {
            alone.push((id, prompt, server.text(id, prompt).await));
        }
    }
    let server = Arc::new(PoolServer::start(&three_fixtures(), &[], roomy()).await);
    for (id, _) in three_fixtures() {
        assert_eq!(server.status(id).await, "unloaded");
    }
    // Prompt-major order interleaves the models; every request is in flight at once.
    let mut order = alone.clone();
    order.sort_by_key(|(_, prompt, _)| *prompt);
    let tasks: Vec<_> = order
        .into_iter()
        .map(|(id, prompt, want)| {
            let server = Arc::clone(&server);
            tokio::spawn(async move { (id, want, server.text(id, prompt).await) })
        })
        .collect();
    for task in tasks {
        let (id, want, got) = task.await.unwrap();
        assert_eq!(got, want, "{id} answered differently beside other models");
    }
    let distinct: std::collections::HashSet<&String> = alone
        .iter()
        .filter(|(_, p, _)| *p == PROMPTS[0])
        .map(|(_, _, t)| t)
        .collect();
    assert_eq!(distinct.len(), 3, "the fixtures must tell each other apart");
    for (id, _) in three_fixtures() {
        assert_eq!(server.status(id).await, "loaded");
        assert_eq!(server.loads(id).await, 1.0);
        assert_eq!(
            server
                .metric(&format!("vllm:num_requests_running{{model_name=\"{id}\"}}"))
                .await,
            0.0
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_for_two_unloads_the_least_recently_used_idle_model_and_reloads_it() {
    let server = PoolServer::start(&three_fixtures(), &[], room_for_two()).await;
    let first_llama = server.text("llama", PROMPTS[0]).await;
    server.text("qwen2", PROMPTS[0]).await;
    server.text("llama", PROMPTS[1]).await; // llama is now more recent than qwen2
    server.text("mistral", PROMPTS[0]).await;
    assert_eq!(server.status("qwen2").await, "unloaded");
    assert_eq!(server.status("llama").await, "loaded");
    assert_eq!(server.status("mistral").await, "loaded");
    server.text("qwen2", PROMPTS[1]).await;
    assert_eq!(server.status("llama").await, "unloaded", "llama was older");
    assert_eq!(server.loads("qwen2").await, 2.0);
    assert_eq!(server.text("llama", PROMPTS[0]).await, first_llama);
    assert_eq!(server.loads("llama").await, 2.0);
    assert_eq!(server.metric("sluice:pool_models_loaded").await, 2.0);
    let admin = server.get("/admin/models").await;
    let held: u64 = admin["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["memory_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(admin["memory_used_bytes"].as_u64().unwrap(), held);
    assert!(held <= admin["max_memory_bytes"].as_u64().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_model_is_never_unloaded() {
    let server = PoolServer::start(&three_fixtures(), &["llama"], room_for_two()).await;
    server.text("llama", PROMPTS[0]).await;
    for _ in 0..2 {
        server.text("qwen2", PROMPTS[0]).await;
        server.text("mistral", PROMPTS[0]).await;
    }
    assert_eq!(server.status("llama").await, "loaded");
    let unloads = "sluice:model_unloads_total{model_name=\"llama\"}";
    assert_eq!(server.metric(unloads).await, 0.0);
    assert!(
        server
            .metric("sluice:model_unloads_total{model_name=\"qwen2\"}")
            .await
            >= 1.0
    );
    let (status, body) = server.admin("llama", "unload").await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("pinned"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_pin_and_unpin_routes_change_what_may_be_unloaded() {
    let server = PoolServer::start(&three_fixtures(), &[], roomy()).await;
    server.text("llama", PROMPTS[0]).await;
    let (status, body) = server.admin("llama", "pin").await;
    assert_eq!(
        (status, &body["pinned"], &body["status"]),
        (200, &json!(true), &json!("loaded"))
    );
    let (status, body) = server.admin("llama", "unload").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "model_state_conflict");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("pinned"));
    assert_eq!(server.status("llama").await, "loaded");
    let (status, body) = server.admin("llama", "unpin").await;
    assert_eq!((status, &body["pinned"]), (200, &json!(false)));
    let (status, body) = server.admin("llama", "unload").await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("unloaded")),
        "{body}"
    );
    // Pinning loads nothing; an unknown model is the usual 404.
    let (status, body) = server.admin("qwen2", "pin").await;
    assert_eq!((status, &body["status"]), (200, &json!("unloaded")));
    assert_eq!(server.admin("nope", "pin").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_trigger_exactly_one_load() {
    let server = Arc::new(PoolServer::start(&three_fixtures(), &[], roomy()).await);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let server = Arc::clone(&server);
            tokio::spawn(async move { server.text("qwen2", PROMPTS[i % 3]).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(server.loads("qwen2").await, 1.0);
    assert_eq!(server.loads("llama").await, 0.0);
}

/// A copy of the llama fixture whose weights file is cut in half.
fn corrupt_model_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-pool-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture("llama")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_model_gives_a_clean_error_while_the_others_keep_serving() {
    let broken = corrupt_model_dir();
    let models = [("broken", broken.clone()), ("qwen2", fixture("qwen2"))];
    let server = Arc::new(PoolServer::start(&models, &[], roomy()).await);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let server = Arc::clone(&server);
            tokio::spawn(async move { server.complete("broken", "hello").await })
        })
        .collect();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 500, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("'broken' failed to load"), "{message}");
        assert!(message.contains("model.safetensors"), "{message}");
        assert_eq!(body["error"]["type"], "server_error");
    }
    assert_eq!(server.status("broken").await, "unloaded");
    server.text("qwen2", PROMPTS[0]).await;
    let admin = server.get("/admin/models").await;
    let entry = &admin["data"][0];
    assert_eq!(entry["id"], "broken");
    assert!(entry["load_failures"].as_u64().unwrap() >= 1);
    assert!(entry["last_error"].as_str().unwrap().contains("truncated"));
    let failures = "sluice:model_load_failures_total{model_name=\"broken\"}";
    assert!(server.metric(failures).await >= 1.0);
    assert_eq!(
        reqwest::get(server.url("/health")).await.unwrap().status(),
        200
    );
    std::fs::remove_dir_all(broken).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_the_key_and_refuse_to_unload_busy_models() {
    let server = PoolServer::start_with_key(&three_fixtures(), &[], roomy(), Some("sekret")).await;
    let client = reqwest::Client::new();
    let res = client
        .get(server.url("/admin/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = client
        .post(server.url("/admin/models/llama/load"))
        .header("content-type", "application/json")
        .bearer_auth("sekret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let loaded: Value = res.json().await.unwrap();
    assert_eq!(loaded["status"], "loaded");
    assert!(loaded["memory_bytes"].as_u64().unwrap() > 0);
    // A long generation keeps llama busy while the unload is asked for.
    let busy_client = client.clone();
    let url = server.url("/v1/completions");
    let long = tokio::spawn(async move {
        busy_client
            .post(url)
            .bearer_auth("sekret")
            .json(&json!({"model": "llama", "prompt": "x", "max_tokens": 200, "ignore_eos": true, "stream": true}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let mut refused = false;
    for _ in 0..200 {
        let res = client
            .post(server.url("/admin/models/llama/unload"))
            .header("content-type", "application/json")
            .bearer_auth("sekret")
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        if status == 409 && message.contains("in flight") {
            refused = true;
            break;
        }
        // Before the request is submitted the unload may succeed, or meet the model loading.
        assert!(
            status == 200 || (status == 409 && message.contains("loading")),
            "{status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(refused || long.is_finished());
    assert!(long.await.unwrap().contains("[DONE]"));
    // The engine counts the request finished just after its last event: a 409 may still come
    // first, and retrying is what the 409 asks for.
    let mut unloaded = Value::Null;
    for _ in 0..100 {
        let res = client
            .post(server.url("/admin/models/llama/unload"))
            .header("content-type", "application/json")
            .bearer_auth("sekret")
            .send()
            .await
            .unwrap();
        let status = res.status();
        unloaded = res.json().await.unwrap();
        if status == 200 {
            break;
        }
        assert_eq!(status, 409, "{unloaded}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        (
            unloaded["status"].as_str(),
            unloaded["memory_bytes"].as_u64()
        ),
        (Some("unloaded"), Some(0))
    );
    let res = client
        .post(server.url("/admin/models/nope/load"))
        .header("content-type", "application/json")
        .bearer_auth("sekret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_site_cannot_unload_a_model() {
    // Issue 30: without keys, any page could make its visitor's browser unload a model with a
    // cross-site text/plain POST (a request browsers send without asking).
    let server = PoolServer::start(&three_fixtures(), &[], roomy()).await;
    assert_eq!(server.admin("llama", "load").await.0, 200);
    let unload = || reqwest::Client::new().post(server.url("/admin/models/llama/unload"));
    let res = unload()
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(server.status("llama").await, "loaded");
    // Nor with the content type a form sends, from a page that hides where it is.
    let res = unload()
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
    assert_eq!(server.status("llama").await, "loaded");
    // The server's own page (same origin, JSON) can.
    let res = unload()
        .header("origin", &server.base)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(server.status("llama").await, "unloaded");
}

/// Resident set size of this process, from `/proc/self/statm`.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_frees_the_memory_over_many_cycles() {
    // The bundled model's weights (about 17 MB as f32) dwarf allocator noise.
    let kjv = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/sluice-kjv-mini");
    let models = [("kjv", kjv), ("llama", fixture("llama"))];
    let server = PoolServer::start(&models, &[], roomy()).await;
    let mut rss_after = Vec::new();
    let mut held = 0;
    for _ in 0..6 {
        server.text("kjv", PROMPTS[0]).await;
        held = server.pool.snapshot().used_bytes;
        // The request counts as in flight until its handler has finished sending, which can
        // be a moment after the client read the whole body: retry the 409 briefly.
        let mut answer = server.admin("kjv", "unload").await;
        for _ in 0..100 {
            if answer.0 != 409 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            answer = server.admin("kjv", "unload").await;
        }
        let (status, body) = answer;
        assert_eq!(status, 200, "{body}");
        let snap = server.pool.snapshot();
        assert_eq!((snap.used_bytes, snap.loaded_models), (0, 0));
        rss_after.push(rss_bytes());
    }
    assert!(held > 16 << 20, "kjv holds {held} bytes");
    assert_eq!(server.metric("sluice:pool_memory_used_bytes").await, 0.0);
    assert_eq!(
        server
            .metric("sluice:model_unloads_total{model_name=\"kjv\"}")
            .await,
        6.0
    );
    // After the first cycle warms the allocator, RSS must not grow by anything near a model.
    let growth = rss_after[5].saturating_sub(rss_after[1]);
    assert!(
        growth < held / 2,
        "RSS grew {growth} bytes over 4 load/unload cycles of a {held}-byte model: {rss_after:?}"
    );
    server.text("llama", PROMPTS[0]).await;
}
