//! Connection-level limits of the real `sluice serve` binary (each test its own process, so its
//! file descriptors can be counted in `/proc/<pid>/fd` without other tests' sockets): the
//! deadline before a first request, the connection cap, and a pooled model freed for other
//! models once its engine is done although its client stopped reading. (The write deadline
//! for such clients is tested in `http_api/slow_clients.rs`, where the engine can be slowed.)

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "support/binary.rs"]
mod binary;
use binary::spawn_serve;

/// The real server, killed on drop.
struct Server {
    child: std::process::Child,
    base: String,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `sluice serve --port 0 ARGS` from the source tree, once it listens.
    fn spawn(args: &[&str]) -> Server {
        let args: Vec<&str> = ["--no-ui"].iter().chain(args).copied().collect();
        let (child, base) = spawn_serve(&args);
        let addr = base.trim_start_matches("http://").to_string();
        Server { child, base, addr }
    }

    /// Open file descriptors of the server process.
    fn fds(&self) -> usize {
        let dir = format!("/proc/{}/fd", self.child.id());
        std::fs::read_dir(Path::new(&dir)).unwrap().count()
    }

    /// The server's descriptors once the count has stopped changing (closed connections
    /// take a moment to be dropped).
    async fn settled_fds(&self) -> usize {
        let mut last = self.fds();
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = self.fds();
            if now == last {
                return now;
            }
            last = now;
        }
    }

    /// Waits until the server holds `want` descriptors (or fewer), or panics after `timeout`.
    async fn wait_for_fds(&self, want: usize, timeout: Duration) {
        let start = Instant::now();
        loop {
            let now = self.fds();
            if now <= want {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "the server still holds {now} descriptors, {want} at the start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One `GET path` on a fresh connection that closes after it: (status, body).
    async fn get_once(&self, path: &str) -> (u16, String) {
        let mut tcp = TcpStream::connect(&self.addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut raw))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        parse_response(&raw)
    }

    async fn metric(&self, series: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {series} in {text}"))
            .parse()
            .unwrap()
    }
}

/// (status, body) of one raw HTTP/1.1 response.
fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// Reads until the server closes `tcp` (end of file or a reset); panics if it is still open
/// after `timeout`. Returns what was read.
async fn wait_closed(tcp: &mut TcpStream, timeout: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(timeout, read_all)
        .await
        .expect("the server kept the connection open");
    got
}

/// The 24-byte HTTP/2 client preface.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Opens `count` connections that send nothing and `count` that send part of the HTTP/2
/// preface; checks the server closes all of them by `deadline` (the silent ones not before)
/// and its descriptors return to where they were. With HTTP/2 off, HTTP/1 refuses the
/// preface's `HTTP/2.0` request line at once; with it on, the partial preface is held too.
async fn silent_connections_are_closed(
    server: &Server,
    count: usize,
    deadline: Duration,
    http2: bool,
) {
    assert_eq!(server.get_once("/health").await.0, 200);
    let baseline = server.settled_fds().await;
    let opened = Instant::now();
    let mut conns = Vec::new();
    for i in 0..2 * count {
        let mut tcp = TcpStream::connect(&server.addr).await.unwrap();
        if i % 2 == 1 {
            tcp.write_all(&H2_PREFACE[..14]).await.unwrap();
        }
        conns.push(tcp);
    }
    // The server holds every one of them until the deadline.
    let start = Instant::now();
    let held = if http2 { 2 * count } else { count };
    while server.fds() < baseline + held {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{} of {} connections held",
            server.fds() - baseline,
            held
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for tcp in &mut conns {
        let got = wait_closed(tcp, deadline + Duration::from_secs(10)).await;
        assert!(got.is_empty() || got.starts_with(b"HTTP/1.1 "), "{got:?}");
    }
    assert!(
        opened.elapsed() >= deadline.mul_f64(0.9),
        "closed after {:?}, before the {deadline:?} deadline",
        opened.elapsed()
    );
    server.wait_for_fds(baseline, Duration::from_secs(5)).await;
    assert_eq!(server.get_once("/health").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_no_request_are_closed_after_the_header_timeout() {
    let server = Server::spawn(&["--header-timeout", "1"]);
    silent_connections_are_closed(&server, 50, Duration::from_secs(1), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_h2c_on_a_partial_preface_or_a_bare_preface_is_closed_too() {
    let server = Server::spawn(&["--header-timeout", "1", "--h2c"]);
    silent_connections_are_closed(&server, 50, Duration::from_secs(1), true).await;
    // A complete preface and settings, then no request: HTTP/2 is on, yet it is still closed.
    let mut tcp = TcpStream::connect(&server.addr).await.unwrap();
    tcp.write_all(H2_PREFACE).await.unwrap();
    // An empty SETTINGS frame: length 0, type 4, flags 0, stream 0.
    tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let start = Instant::now();
    let got = wait_closed(&mut tcp, Duration::from_secs(10)).await;
    assert!(start.elapsed() >= Duration::from_millis(900));
    // The server spoke HTTP/2 on it: its first frame is its SETTINGS (type 4).
    assert!(got.len() >= 9 && got[3] == 4, "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_get_503_while_open_ones_keep_being_served() {
    let server = Server::spawn(&["--max-connections", "8", "--header-timeout", "3"]);
    assert_eq!(server.get_once("/health").await.0, 200);
    let baseline = server.settled_fds().await;
    // One kept-alive connection that has been served, and seven silent ones: the cap.
    let mut kept = TcpStream::connect(&server.addr).await.unwrap();
    let health = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    kept.write_all(health).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = kept.read(&mut buf).await.unwrap();
    assert_eq!(parse_response(&buf[..n]).0, 200);
    let mut silent = Vec::new();
    for _ in 0..7 {
        silent.push(TcpStream::connect(&server.addr).await.unwrap());
    }
    // Twenty more: each is answered 503 at once, naming the limit.
    for _ in 0..20 {
        let (status, body) = server.get_once("/health").await;
        assert_eq!(status, 503, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("--max-connections"), "{message}");
    }
    // The server is not wedged: the open connection is still served.
    kept.write_all(health).await.unwrap();
    let n = kept.read(&mut buf).await.unwrap();
    assert_eq!(parse_response(&buf[..n]).0, 200);
    // The silent ones are closed at their deadline; then new connections are served again and
    // every descriptor is back.
    for tcp in &mut silent {
        wait_closed(tcp, Duration::from_secs(15)).await;
    }
    drop(kept);
    assert_eq!(server.get_once("/health").await.0, 200);
    server.wait_for_fds(baseline, Duration::from_secs(5)).await;
}

/// A socket whose receive buffer is as small as the kernel allows, so the server's writes
/// stall soon after the client stops reading.
async fn small_window_connection(addr: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    socket.connect(addr.parse().unwrap()).await.unwrap()
}

/// A streaming chat request with many choices and full logprobs (about 1 KB per token per
/// choice), so its output far exceeds what the sockets buffer.
fn big_stream_request(model: &str, max_tokens: u32) -> Vec<u8> {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "In the beginning"}],
        "max_tokens": max_tokens,
        "ignore_eos": true,
        "n": 16,
        "logprobs": true,
        "top_logprobs": 20,
        "stream": true,
    })
    .to_string();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_model_whose_client_stopped_reading_does_not_block_another_model() {
    // One model slot; the write deadline is far away so that only the engine's own accounting
    // can free the slot.
    let server = Server::spawn(&[
        "--models-dir",
        "fixtures/models",
        "--max-models",
        "1",
        "--kv-cache-memory",
        "0.01",
        "--write-timeout",
        "120",
    ]);
    let mut stalled = small_window_connection(&server.addr).await;
    stalled
        .write_all(&big_stream_request("llama", 200))
        .await
        .unwrap();
    // Wait until llama's engine has computed the whole request (its running gauge back to 0
    // after the request was counted as finished), while the client reads nothing.
    let start = Instant::now();
    loop {
        let admin: Value = reqwest::get(format!("{}/admin/models", server.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let llama = admin["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == "llama")
            .unwrap()
            .clone();
        if llama["status"] == "loaded" && llama["requests"] == 0 {
            let finished = server
                .metric("vllm:request_success_total{model_name=\"llama\",task=\"generate\"}")
                .await;
            if finished >= 1.0 {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "llama's request is still counted as in flight: {llama}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Another model takes the only slot at once: no wait for the non-reading client.
    let asked = Instant::now();
    let res = reqwest::Client::new()
        .post(format!("{}/v1/completions", server.base))
        .json(&json!({"model": "qwen2", "prompt": "hi", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert_eq!(status, 200, "{}", res.text().await.unwrap());
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    // The stalled client, reading at last, gets its whole answer although llama was unloaded.
    let body = wait_closed_or_done(&mut stalled).await;
    assert!(
        body.contains("data: [DONE]"),
        "{}",
        &body[body.len().saturating_sub(300)..]
    );
    let finishes = body.matches("\"finish_reason\":\"length\"").count();
    assert_eq!(finishes, 16);
}

/// Reads a streamed response to its `[DONE]` (or until the server closes).
async fn wait_closed_or_done(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let read = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if got.ends_with(b"data: [DONE]\n\n") || got.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the stream ended within 30 s");
    String::from_utf8_lossy(&got).into_owned()
}
