//! Image fetches over TLS against loopback hosts made here: a certificate authority of the
//! test's own (trusted only by fetchers built with [`MediaFetcher::trusting`]), a self-signed
//! host, a host certified for another name, a plain-http port and a host that never answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::media::fetch::FetchedImage;
use crate::media::{MediaFetchConfig, MediaFetcher};

/// What `/image` serves (the fetcher checks the type and size, not the pixels).
const IMAGE: &[u8] = b"\x89PNG\r\n\x1a\n not decoded by the fetcher";
/// The fetches' time limit: far above what a loopback handshake takes, so a test that ends
/// well within it shows a failure was reported, not waited out.
const TIMEOUT: Duration = Duration::from_secs(10);
/// What "at once" means below.
const PROMPTLY: Duration = Duration::from_secs(2);
const PART: &str = "messages[0].content[1].image_url";

/// The tests' certificate authority.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestCa { issuer }
    }

    /// A certificate for `names` signed by this authority, with its key.
    fn certify(&self, names: &[&str]) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = (CertificateParams::new(names).unwrap())
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.der().clone(), private_key(&key))
    }

    fn root(&self) -> reqwest::tls::Certificate {
        reqwest::tls::Certificate::from_der(self.issuer.der()).unwrap()
    }
}

fn private_key(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

/// A certificate for 127.0.0.1 signed by itself, with its key.
fn self_signed() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let key = KeyPair::generate().unwrap();
    let cert = (CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap())
        .self_signed(&key)
        .unwrap();
    (cert.der().clone(), private_key(&key))
}

/// How a loopback host talks on its port.
enum Speaks {
    /// TLS with this certificate, then [`answer`].
    Tls(CertificateDer<'static>, PrivateKeyDer<'static>),
    /// Plain HTTP: [`answer`] on the bare connection.
    Http,
    /// Nothing: it accepts and never writes.
    Nothing,
    /// Nothing: it accepts and closes the connection at once.
    HangUp,
}

/// A loopback host on a port of its own, served until dropped.
struct Host {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Host {
    async fn start(speaks: Speaks) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = match speaks {
            Speaks::Tls(cert, key) => {
                let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
                let config = (rustls::ServerConfig::builder_with_provider(provider))
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(vec![cert], key)
                    .unwrap();
                Some(TlsAcceptor::from(Arc::new(config)))
            }
            Speaks::Http => None,
            Speaks::Nothing => {
                let task = tokio::spawn(async move {
                    let mut held = Vec::new();
                    while let Ok((stream, _)) = listener.accept().await {
                        held.push(stream);
                    }
                });
                return Host { addr, task };
            }
            Speaks::HangUp => {
                let task = tokio::spawn(async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        drop(stream);
                    }
                });
                return Host { addr, task };
            }
        };
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(stream).await {
                                answer(tls).await;
                            }
                        }
                        None => answer(stream).await,
                    }
                });
            }
        });
        Host { addr, task }
    }

    /// `scheme://127.0.0.1:PORT{path}`, whatever the host speaks.
    fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://{}{path}", self.addr)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one request: `/image` ([`IMAGE`]), `/away?URL` (a redirect to URL), else a 404.
/// Bytes that do not start an HTTP request (a TLS hello) get a 400, as real servers answer.
async fn answer(mut stream: impl AsyncRead + AsyncWrite + Unpin) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if !head[0].is_ascii_uppercase() {
            break;
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let (status, headers, body): (&str, String, &[u8]) = if !head.starts_with("GET ") {
        ("400 Bad Request", String::new(), b"")
    } else if path == "/image" {
        let headers = format!(
            "Content-Type: image/png\r\nContent-Length: {}\r\n",
            IMAGE.len()
        );
        ("200 OK", headers, IMAGE)
    } else if let Some(target) = path.strip_prefix("/away?") {
        ("302 Found", format!("Location: {target}\r\n"), b"")
    } else {
        ("404 Not Found", String::new(), b"")
    };
    let head = format!("HTTP/1.1 {status}\r\n{headers}Connection: close\r\n\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

fn config() -> MediaFetchConfig {
    MediaFetchConfig {
        allowed_domains: vec!["127.0.0.1".to_string()],
        timeout: TIMEOUT,
        ..MediaFetchConfig::default()
    }
}

/// The 400's message for fetching `url` with `fetcher`, which must fail at once.
async fn refusal(fetcher: &MediaFetcher, url: &str) -> String {
    let started = Instant::now();
    let err = fetcher.fetch(url, PART).await.unwrap_err();
    assert!(
        started.elapsed() < PROMPTLY,
        "{:?}: {err}",
        started.elapsed()
    );
    assert_eq!(err.status(), 400, "{err}");
    let message = err.to_string();
    assert!(message.contains(PART), "{message}");
    message
}

fn image() -> FetchedImage {
    FetchedImage {
        mime: "image/png".to_string(),
        bytes: IMAGE.to_vec(),
    }
}

#[tokio::test]
async fn an_https_image_from_a_trusted_host_is_fetched() {
    let ca = TestCa::new();
    let (cert, key) = ca.certify(&["127.0.0.1"]);
    let host = Host::start(Speaks::Tls(cert, key)).await;
    let fetcher = MediaFetcher::trusting(config(), ca.root());
    let url = host.url("https", "/image");
    assert_eq!(fetcher.fetch(&url, PART).await.unwrap(), image());
    // A redirect that stays on https is followed.
    let away = host.url("https", &format!("/away?{url}"));
    assert_eq!(fetcher.fetch(&away, PART).await.unwrap(), image());
}

#[tokio::test]
async fn a_self_signed_certificate_is_a_400_saying_it_is_not_trusted() {
    let (cert, key) = self_signed();
    let host = Host::start(Speaks::Tls(cert, key)).await;
    let url = host.url("https", "/image");
    let message = refusal(&MediaFetcher::new(config()), &url).await;
    assert!(message.contains(&url), "{message}");
    assert!(
        message.contains("TLS certificate is not trusted"),
        "{message}"
    );
    assert!(
        message.contains("not signed by a certificate authority"),
        "{message}"
    );
}

#[tokio::test]
async fn a_private_cas_certificate_is_not_trusted_by_the_server() {
    let ca = TestCa::new();
    let (cert, key) = ca.certify(&["127.0.0.1"]);
    let host = Host::start(Speaks::Tls(cert, key)).await;
    let message = refusal(&MediaFetcher::new(config()), &host.url("https", "/image")).await;
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn a_certificate_for_another_name_is_a_400_saying_so() {
    let ca = TestCa::new();
    let (cert, key) = ca.certify(&["images.example.com"]);
    let host = Host::start(Speaks::Tls(cert, key)).await;
    let fetcher = MediaFetcher::trusting(config(), ca.root());
    let message = refusal(&fetcher, &host.url("https", "/image")).await;
    assert!(
        message.contains("not valid for this host name"),
        "{message}"
    );
}

#[tokio::test]
async fn a_plain_http_port_addressed_with_https_is_a_400_naming_the_tls_failure() {
    let host = Host::start(Speaks::Http).await;
    let fetcher = MediaFetcher::new(config());
    // The host does serve the image, over plain http.
    let plain = host.url("http", "/image");
    assert_eq!(fetcher.fetch(&plain, PART).await.unwrap(), image());
    let url = host.url("https", "/image");
    let message = refusal(&fetcher, &url).await;
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("TLS handshake failed"), "{message}");
}

#[tokio::test]
async fn a_redirect_from_https_down_to_http_is_not_followed() {
    let ca = TestCa::new();
    let (cert, key) = ca.certify(&["127.0.0.1"]);
    let secure = Host::start(Speaks::Tls(cert, key)).await;
    let plain = Host::start(Speaks::Http).await;
    let fetcher = MediaFetcher::trusting(config(), ca.root());
    let target = plain.url("http", "/image");
    assert_eq!(fetcher.fetch(&target, PART).await.unwrap(), image());
    let url = secure.url("https", &format!("/away?{target}"));
    let message = refusal(&fetcher, &url).await;
    assert!(message.contains("from https to plain http"), "{message}");
    assert!(message.contains(&target), "{message}");
    // Up from http to https is followed.
    let up = plain.url("http", &format!("/away?{}", secure.url("https", "/image")));
    assert_eq!(fetcher.fetch(&up, PART).await.unwrap(), image());
}

#[tokio::test]
async fn an_https_redirect_to_a_host_not_allowed_is_refused() {
    let ca = TestCa::new();
    let (cert, key) = ca.certify(&["127.0.0.1", "localhost"]);
    let host = Host::start(Speaks::Tls(cert, key)).await;
    let fetcher = MediaFetcher::trusting(config(), ca.root());
    let elsewhere = host
        .url("https", "/image")
        .replace("127.0.0.1", "localhost");
    let url = host.url("https", &format!("/away?{elsewhere}"));
    let message = refusal(&fetcher, &url).await;
    assert!(
        message.contains("not in --allowed-media-domains"),
        "{message}"
    );
}

#[tokio::test]
async fn a_host_that_never_answers_the_tls_hello_is_a_400_at_the_time_limit() {
    let host = Host::start(Speaks::Nothing).await;
    let limit = Duration::from_millis(500);
    let fetcher = MediaFetcher::new(MediaFetchConfig {
        timeout: limit,
        ..config()
    });
    let started = Instant::now();
    let err = fetcher
        .fetch(&host.url("https", "/image"), PART)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(took >= limit && took < limit + PROMPTLY, "{took:?}");
    assert_eq!(err.status(), 400, "{err}");
    assert!(err.to_string().contains("--media-fetch-timeout"), "{err}");
}

#[tokio::test]
async fn a_host_that_hangs_up_on_the_tls_hello_is_a_400_saying_so() {
    let host = Host::start(Speaks::HangUp).await;
    let url = host.url("https", "/image");
    let message = refusal(&MediaFetcher::new(config()), &url).await;
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("TLS handshake failed"), "{message}");
}
