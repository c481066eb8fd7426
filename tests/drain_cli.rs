//! `sluice serve`'s health probes and SIGTERM drain, through the real binary: readiness turns
//! 503 at once, new requests get 503 with `Retry-After` while the listener stays open, running
//! requests (a stream, a request still sending its body) finish, and the process exits 0; a
//! drain out of time cancels what runs and still exits 0.
//!
//! A request is known to be running when the server has answered `100 Continue` to it: the
//! drain gate admitted it and its handler reads its body, which the test sends when it likes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

#[path = "support/binary.rs"]
mod binary;
use binary::{spawn_serve_listening, Logs, STARTED};

const WAIT: Duration = Duration::from_secs(120);

/// A server process, killed when dropped (also when a test fails halfway).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Server {
    fn sigterm(&self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let sent = unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill(SIGTERM)");
    }

    /// Waits (at most `timeout`) for the process to exit.
    fn exit_status(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn start(args: &[&str]) -> (Server, String, Logs) {
    let (child, base, logs) = spawn_serve_listening(args);
    logs.wait_for(STARTED, WAIT);
    (Server(child), base, logs)
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let res = reqwest::get(format!("{base}{path}")).await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

/// A completion whose head and half its body are sent; the server has answered `100 Continue`,
/// so it is admitted and running. [`HeldRequest::finish`] sends the rest.
struct HeldRequest {
    stream: TcpStream,
    rest: Vec<u8>,
}

impl HeldRequest {
    fn start(base: &str) -> HeldRequest {
        let addr = base.trim_start_matches("http://");
        let body =
            json!({"model": "sluice-kjv-mini", "prompt": "In the beginning", "max_tokens": 2})
                .to_string()
                .into_bytes();
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let (first, rest) = body.split_at(body.len() / 2);
        let mut interim = [0u8; 25];
        stream.read_exact(&mut interim).unwrap();
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        stream.write_all(first).unwrap();
        HeldRequest {
            stream,
            rest: rest.to_vec(),
        }
    }

    /// Sends the rest of the body; returns the response's status line.
    fn finish(mut self) -> String {
        self.stream.write_all(&self.rest).unwrap();
        let mut status = String::new();
        BufReader::new(self.stream).read_line(&mut status).unwrap();
        status
    }

    /// Reads what the server sends until it closes the connection.
    fn read_to_close(mut self) -> Vec<u8> {
        let mut received = Vec::new();
        let _ = self.stream.read_to_end(&mut received);
        received
    }
}

/// A streamed chat completion, started (its head received), that cannot end before the test
/// reads it: twelve choices of 450 tokens with 20 alternatives each are about 9 MB of events,
/// more than the socket buffers on both sides hold (4 MiB at most to send; the receiver's
/// window does not grow while nothing reads), so the server's writes wait for the client.
async fn start_stream(client: &reqwest::Client, base: &str) -> reqwest::Response {
    let res = client
        .post(format!("{base}/v1/chat/completions"))
        .json(
            &json!({"model": "sluice-kjv-mini", "stream": true, "n": 12, "max_tokens": 450,
            "ignore_eos": true, "logprobs": true, "top_logprobs": 20,
            "messages": [{"role": "user", "content": "And God said"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res
}

/// A log line without its colours.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('\u{1b}') {
        out.push_str(&rest[..start]);
        rest = rest[start..].split_once('m').map_or("", |(_, after)| after);
    }
    out + rest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_refuses_new_requests_lets_running_ones_finish_and_exits_zero() {
    let (mut server, base, logs) = start(&[]);
    for (path, status) in [
        ("/health/startup", "started"),
        ("/health/ready", "ready"),
        ("/health/live", "live"),
    ] {
        assert_eq!(get(&base, path).await, (200, json!({"status": status})));
    }
    let client = reqwest::Client::new();
    let stream = start_stream(&client, &base).await;
    let held = tokio::task::spawn_blocking({
        let base = base.clone();
        move || HeldRequest::start(&base)
    })
    .await
    .unwrap();

    server.sigterm();
    let draining = plain(&logs.wait_for("draining", WAIT));
    assert!(draining.contains("running=2"), "{draining}");
    let (status, ready) = get(&base, "/health/ready").await;
    assert_eq!((status, &ready["reason"]), (503, &json!("draining")));
    assert_eq!(get(&base, "/health/live").await.0, 200, "draining is alive");
    assert_eq!(get(&base, "/health/startup").await.0, 200);
    let refused = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "sluice-kjv-mini", "max_tokens": 2,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    let retry_after = refused.headers()["retry-after"].to_str().unwrap();
    assert!(retry_after.parse::<u64>().unwrap() >= 1, "{retry_after}");
    let refusal: Value = refused.json().await.unwrap();
    assert_eq!(refusal["error"]["code"], "service_unavailable");

    // The stream started before the signal runs to its end.
    let mut text = String::new();
    let mut chunks = stream.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let finished = text.matches("\"finish_reason\":\"length\"").count();
    assert_eq!(finished, 12, "every choice ran to its length");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    // So does the request admitted before it, whose body only arrives now.
    let status_line = tokio::task::spawn_blocking(move || held.finish())
        .await
        .unwrap();
    assert!(status_line.starts_with("HTTP/1.1 200"), "{status_line}");

    assert!(server.exit_status(WAIT).success());
    let rest = logs.rest();
    assert!(
        rest.iter()
            .any(|l| l.contains("drained: every running request finished")),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_out_of_time_cancels_what_runs_and_still_exits_zero() {
    let (mut server, base, logs) = start(&["--drain-timeout", "0.5"]);
    let client = reqwest::Client::new();
    // Neither would end by itself within the drain: one never sends the rest of its body.
    let _stream = start_stream(&client, &base).await;
    let held = tokio::task::spawn_blocking({
        let base = base.clone();
        move || HeldRequest::start(&base)
    })
    .await
    .unwrap();
    let signalled = Instant::now();
    server.sigterm();
    let received = tokio::task::spawn_blocking(move || held.read_to_close())
        .await
        .unwrap();
    assert!(received.is_empty(), "cancelled without an answer");
    let status = server.exit_status(WAIT);
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}");
    // 0.5 s for requests, at most 0.5 s for the engines, and the process's own start-up slack.
    assert!(took < Duration::from_secs(20), "{took:?}");
    let rest = logs.rest();
    assert!(
        rest.iter().any(|l| l.contains("drain timed out")),
        "{rest:?}"
    );
}
