//! Images sent by URL and fetched from `--allowed-media-domains`: a loopback HTTP server in the
//! test serves the Gemma 3 vision fixture's images (and misbehaves on purpose); an allowed URL
//! answers as the same image inline does, and every failed fetch is a 400 naming the part.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_api::media::MediaFetchConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::images::{base64, fixture_dir, reference_text, serve, vision_model};
use crate::server::{post_json, start, ServerOptions, TestServer, MODEL_ID};

/// The byte limit the tests' servers fetch under (the fixture images are 1 to 5 KiB).
const MAX_BYTES: usize = 8 << 10;
/// The fetch time limit of the tests' servers.
const TIMEOUT: Duration = Duration::from_secs(1);

/// A loopback server of images: `/images/NAME` (with Content-Length), `/unsized/NAME` (no
/// Content-Length: the body ends when the connection closes), `/redirect/N` (N hops, then
/// `rgb_48x20.png`), `/away?URL` (a redirect to URL), `/slow` (answers after 30 s), `/large`
/// and `/unsized-large` (past [`MAX_BYTES`]), `/page.html` (text/html), `/garbage` (an
/// image/png that is not one); anything else is a 404. A TLS hello (bytes that do not start an
/// HTTP request) gets a 400, as a real plain-http server answers it.
struct ImageHost {
    /// `http://127.0.0.1:PORT`.
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl ImageHost {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(answer(stream));
            }
        });
        ImageHost { base, task }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for ImageHost {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one request (one per connection) and closes.
async fn answer(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if !head[0].is_ascii_uppercase() {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            return;
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let image = |name: &str| std::fs::read(fixture_dir().join("images").join(name)).ok();
    let (status, headers, body): (&str, String, Vec<u8>) =
        if let Some(name) = path.strip_prefix("/images/") {
            match image(name) {
                Some(bytes) => ("200 OK", sized("image/png", &bytes), bytes),
                None => not_found(),
            }
        } else if let Some(name) = path.strip_prefix("/unsized/") {
            match image(name) {
                Some(bytes) => ("200 OK", "Content-Type: image/png\r\n".into(), bytes),
                None => not_found(),
            }
        } else if let Some(hops) = path.strip_prefix("/redirect/") {
            let hops: u32 = hops.parse().unwrap_or(0);
            let next = match hops {
                0 => "/images/rgb_48x20.png".to_string(),
                n => format!("/redirect/{}", n - 1),
            };
            ("302 Found", format!("Location: {next}\r\n"), Vec::new())
        } else if let Some(target) = path.strip_prefix("/away?") {
            ("302 Found", format!("Location: {target}\r\n"), Vec::new())
        } else {
            match path.as_str() {
                "/slow" => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    ("200 OK", sized("image/png", b""), Vec::new())
                }
                "/large" => {
                    let body = vec![0u8; MAX_BYTES + 1];
                    ("200 OK", sized("image/png", &body), body)
                }
                "/unsized-large" => (
                    "200 OK",
                    "Content-Type: image/png\r\n".into(),
                    vec![0u8; 4 * MAX_BYTES],
                ),
                "/page.html" => {
                    let body = b"<html>a cat</html>".to_vec();
                    ("200 OK", sized("text/html", &body), body)
                }
                "/garbage" => {
                    let body = b"not an image at all".to_vec();
                    ("200 OK", sized("image/png", &body), body)
                }
                _ => not_found(),
            }
        };
    let head = format!("HTTP/1.1 {status}\r\n{headers}Connection: close\r\n\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

fn sized(mime: &str, body: &[u8]) -> String {
    format!("Content-Type: {mime}\r\nContent-Length: {}\r\n", body.len())
}

fn not_found() -> (&'static str, String, Vec<u8>) {
    ("404 Not Found", sized("text/plain", b"no"), b"no".to_vec())
}

/// A server of the vision fixture fetching from `allowed`.
async fn server_allowing(dir: &std::path::Path, allowed: &[&str]) -> TestServer {
    start(ServerOptions {
        media: MediaFetchConfig {
            allowed_domains: allowed.iter().map(|h| h.to_string()).collect(),
            timeout: TIMEOUT,
            max_bytes: MAX_BYTES,
        },
        ..serve(dir)
    })
    .await
}

/// The reference prompt with the image at `url`, as a greedy chat request.
fn fox(url: &str) -> Value {
    json!({"model": MODEL_ID, "max_tokens": 8, "temperature": 0, "ignore_eos": true,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "The quick brown fox "},
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": " looks at the lazy dog."}]}]})
}

fn data_url(name: &str) -> String {
    let bytes = std::fs::read(fixture_dir().join("images").join(name)).unwrap();
    format!("data:image/png;base64,{}", base64(&bytes))
}

const PART: &str = "messages[0].content[1].image_url";

/// Asserts `body` is a 400 whose param is [`PART`] and whose message says `says`.
async fn assert_refused(server: &TestServer, url: &str, says: &str) {
    let (status, answer) = post_json(&server.base, "/v1/chat/completions", fox(url)).await;
    assert_eq!(status, 400, "{url}: {answer}");
    assert_eq!(answer["error"]["param"], PART, "{url}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{url}: wanted '{says}' in {answer}");
}

fn content(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().unwrap()
}

#[tokio::test]
async fn an_allowed_image_url_answers_as_the_same_image_inline() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let (status, inline) = post_json(
        &server.base,
        "/v1/chat/completions",
        fox(&data_url("rgb_48x20.png")),
    )
    .await;
    assert_eq!(status, 200, "{inline}");
    assert_eq!(content(&inline), reference_text("prompt"));
    for path in [
        "/images/rgb_48x20.png",
        "/unsized/rgb_48x20.png",
        "/redirect/2",
    ] {
        let (status, fetched) =
            post_json(&server.base, "/v1/chat/completions", fox(&host.url(path))).await;
        assert_eq!(status, 200, "{path}: {fetched}");
        assert_eq!(content(&fetched), content(&inline), "{path}");
        assert_eq!(
            fetched["usage"]["prompt_tokens"],
            inline["usage"]["prompt_tokens"]
        );
    }
}

#[tokio::test]
async fn failed_fetches_are_400s_naming_the_part() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let localhost = host
        .url("/images/rgb_48x20.png")
        .replace("127.0.0.1", "localhost");
    let cases = [
        (localhost.clone(), "not in --allowed-media-domains"),
        (
            host.url(&format!("/away?{localhost}")),
            "not in --allowed-media-domains",
        ),
        (host.url("/redirect/4"), "redirects"),
        (host.url("/large"), "larger than"),
        (host.url("/unsized-large"), "larger than"),
        (host.url("/missing.png"), "404"),
        (host.url("/page.html"), "not an image"),
        (host.url("/garbage"), "format"),
        ("ftp://127.0.0.1/a.png".to_string(), "data URL"),
    ];
    for (url, says) in cases {
        assert_refused(&server, &url, says).await;
    }
}

#[tokio::test]
async fn a_slow_image_host_is_a_400_within_the_timeout_and_the_server_stays_healthy() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let started = Instant::now();
    assert_refused(&server, &host.url("/slow"), "--media-fetch-timeout").await;
    let took = started.elapsed();
    assert!(
        took >= TIMEOUT && took < TIMEOUT + Duration::from_secs(2),
        "{took:?}"
    );
    let (status, answer) = post_json(
        &server.base,
        "/v1/chat/completions",
        fox(&host.url("/images/rgb_48x20.png")),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(content(&answer), reference_text("prompt"));
}

#[tokio::test]
async fn an_https_url_of_a_plain_http_port_is_a_400_naming_the_tls_failure() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let url = host
        .url("/images/rgb_48x20.png")
        .replace("http://", "https://");
    // Not the time limit's 400: the failed handshake is reported as soon as it fails.
    let says = format!("could not fetch {url}: the TLS handshake failed");
    assert_refused(&server, &url, &says).await;
}

#[tokio::test]
async fn without_the_allow_list_or_for_another_host_nothing_is_fetched() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let url = host.url("/images/rgb_48x20.png");
    let server = start(serve(dir.path())).await;
    assert_refused(&server, &url, "not fetched").await;
    drop(server);
    let server = server_allowing(dir.path(), &["images.example.com"]).await;
    assert_refused(&server, &url, "the host '127.0.0.1'").await;
}

#[tokio::test]
async fn an_anthropic_url_source_is_fetched() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let body = |url: String| {
        json!({"model": MODEL_ID, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "The quick brown fox "},
                {"type": "image", "source": {"type": "url", "url": url}},
                {"type": "text", "text": " looks at the lazy dog."}]}]})
    };
    let (status, answer) = post_json(
        &server.base,
        "/v1/messages",
        body(host.url("/images/rgb_48x20.png")),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["content"][0]["text"], reference_text("prompt"));
    let (status, answer) = post_json(&server.base, "/v1/messages", body(host.url("/nope"))).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("messages[0].content[1].source.url"),
        "{answer}"
    );
    assert!(message.contains("404"), "{answer}");
}

#[tokio::test]
async fn a_responses_image_url_is_fetched_once_and_stored_as_the_image_it_was() {
    let host = ImageHost::start().await;
    let dir = vision_model();
    let server = server_allowing(dir.path(), &["127.0.0.1"]).await;
    let url = host.url("/images/rgb_48x20.png");
    let body = json!({"model": MODEL_ID, "max_output_tokens": 8, "temperature": 0,
        "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "The quick brown fox "},
            {"type": "input_image", "image_url": url},
            {"type": "input_text", "text": " looks at the lazy dog."}]}]});
    let (status, answer) = post_json(&server.base, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{answer}");
    let message = (answer["output"].as_array().unwrap().iter())
        .find(|item| item["type"] == "message")
        .unwrap();
    assert_eq!(message["content"][0]["text"], reference_text("prompt"));
    // The stored turn holds the bytes fetched, not the URL: the next turn renders the same
    // image even once the host is gone.
    let id = answer["id"].as_str().unwrap().to_string();
    drop(host);
    let next = json!({"model": MODEL_ID, "max_output_tokens": 2, "temperature": 0,
        "previous_response_id": id, "input": "and then?"});
    let (status, again) = post_json(&server.base, "/v1/responses", &next).await;
    assert_eq!(status, 200, "{again}");
    let items: Value = reqwest::get(server.url(&format!("/v1/responses/{id}/input_items")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        items["data"][0]["content"][1]["image_url"],
        data_url("rgb_48x20.png")
    );
    let gone = json!({"model": MODEL_ID, "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": url}]}]});
    let (status, answer) = post_json(&server.base, "/v1/responses", &gone).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "input[0].content[0].image_url");
}
