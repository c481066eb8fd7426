//! Fetching one image URL from an allowed host: a total time limit, a byte limit checked
//! against `Content-Length` and again while the body streams in, and redirects followed by
//! hand, each hop's host checked against the allow-list and never from `https` down to plain
//! `http`. An `https` host's certificate is checked as [`super::tls`] says; a handshake that
//! fails is a 400 saying why.

use std::time::Duration;

use reqwest::header::{HeaderName, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{redirect, Client, Url};

use super::tls;
use crate::error::ApiError;
use crate::validate::images::image_error;

/// Default of [`MediaFetchConfig::timeout`] (vLLM's `VLLM_IMAGE_FETCH_TIMEOUT`).
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Default of [`MediaFetchConfig::max_bytes`].
pub const DEFAULT_MAX_FETCH_BYTES: usize = 20 << 20;
/// Redirects one fetch follows; one more is a 400.
pub const MAX_REDIRECTS: usize = 3;

/// Which image URLs may be fetched, and the limits of each fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaFetchConfig {
    /// `--allowed-media-domains`: hosts (names or IP addresses, matched exactly and without
    /// regard to case) whose `http` and `https` URLs may be fetched; empty: none is.
    pub allowed_domains: Vec<String>,
    /// `--media-fetch-timeout`: the whole fetch of one image, redirects and body included.
    pub timeout: Duration,
    /// `--media-fetch-max-mib`: most bytes one image's body may have.
    pub max_bytes: usize,
}

impl Default for MediaFetchConfig {
    fn default() -> Self {
        MediaFetchConfig {
            allowed_domains: Vec::new(),
            timeout: DEFAULT_FETCH_TIMEOUT,
            max_bytes: DEFAULT_MAX_FETCH_BYTES,
        }
    }
}

/// Fetches images from the hosts of a [`MediaFetchConfig`].
#[derive(Debug)]
pub struct MediaFetcher {
    config: MediaFetchConfig,
    client: Client,
}

/// An image's body as its host served it.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedImage {
    /// `Content-Type` when it names an image type, else `application/octet-stream` (the
    /// decoder reads the format from the bytes' signature, never from this).
    pub mime: String,
    /// The body.
    pub bytes: Vec<u8>,
}

impl MediaFetcher {
    /// A fetcher for `config`; it follows no redirect itself and uses no proxy.
    pub fn new(config: MediaFetchConfig) -> Self {
        Self::with_extra_roots(config, Vec::new())
    }

    /// A fetcher that also trusts `root`: the tests' own certificate authority (tests only:
    /// the server trusts what the system and Mozilla do, nothing it is told).
    #[cfg(test)]
    pub(crate) fn trusting(config: MediaFetchConfig, root: reqwest::tls::Certificate) -> Self {
        Self::with_extra_roots(config, vec![root])
    }

    fn with_extra_roots(
        config: MediaFetchConfig,
        extra_roots: Vec<reqwest::tls::Certificate>,
    ) -> Self {
        let builder = Client::builder()
            .redirect(redirect::Policy::none())
            .no_proxy();
        let client = (tls::with_roots(builder, extra_roots).build())
            // Only a root certificate that does not parse fails it, and the compiled-in ones
            // all do (every test builds a fetcher); the system's that do not are skipped.
            .expect("the image fetch client builds with its root certificates");
        MediaFetcher { config, client }
    }

    /// Whether any host is allowed (without one, URLs are refused before any fetch).
    pub fn enabled(&self) -> bool {
        !self.config.allowed_domains.is_empty()
    }

    /// The image at `url`, sent at `part`: every failure (a host not allowed, a timeout, an
    /// error status, a body too large) is a 400 naming the part.
    pub async fn fetch(&self, url: &str, part: &str) -> Result<FetchedImage, ApiError> {
        let timeout = self.config.timeout;
        match tokio::time::timeout(timeout, self.fetch_following(url, part)).await {
            Ok(result) => result,
            Err(_) => Err(image_error(
                part,
                format!(
                    "fetching {url} took longer than {} s (--media-fetch-timeout)",
                    timeout.as_secs_f64()
                ),
            )),
        }
    }

    async fn fetch_following(&self, url: &str, part: &str) -> Result<FetchedImage, ApiError> {
        let mut url = Url::parse(url.trim())
            .map_err(|e| image_error(part, format!("'{url}' is not a valid URL: {e}")))?;
        for _ in 0..=MAX_REDIRECTS {
            self.check_allowed(&url, part)?;
            let response = (self.client.get(url.clone()).send().await).map_err(|e| {
                let why = tls::handshake_failure(&e).unwrap_or_else(|| cause(&e));
                image_error(part, format!("could not fetch {url}: {why}"))
            })?;
            let status = response.status();
            if status.is_redirection() {
                let location = (response.headers().get(LOCATION))
                    .and_then(|l| l.to_str().ok())
                    .ok_or_else(|| {
                        image_error(part, format!("{url} answered {status} with no Location"))
                    })?;
                let next = url.join(location).map_err(|e| {
                    image_error(part, format!("{url} redirected to '{location}': {e}"))
                })?;
                // What came over TLS is not then fetched in the clear, where anyone on the
                // path could swap the image.
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(image_error(
                        part,
                        format!("{url} redirected from https to plain http ({next}); not followed"),
                    ));
                }
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(image_error(
                    part,
                    format!("fetching {url} answered {status}"),
                ));
            }
            return self.read_image(response, &url, part).await;
        }
        Err(image_error(
            part,
            format!("fetching the image took more than {MAX_REDIRECTS} redirects"),
        ))
    }

    /// Refuses a scheme other than http(s) and a host the allow-list does not name.
    fn check_allowed(&self, url: &Url, part: &str) -> Result<(), ApiError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(image_error(
                part,
                format!("only http and https image URLs are fetched, not {url}"),
            ));
        }
        let host = url.host_str().unwrap_or("");
        // An IPv6 host is written in brackets in a URL and bare in the allow-list.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let allowed = (self.config.allowed_domains.iter())
            .any(|d| d.eq_ignore_ascii_case(host) || d.eq_ignore_ascii_case(bare));
        if !allowed {
            return Err(image_error(
                part,
                format!("the host '{host}' of {url} is not in --allowed-media-domains"),
            ));
        }
        Ok(())
    }

    /// The body of a successful response, refused past the byte limit (announced or read)
    /// and when its `Content-Type` says it is something other than an image.
    async fn read_image(
        &self,
        mut response: reqwest::Response,
        url: &Url,
        part: &str,
    ) -> Result<FetchedImage, ApiError> {
        let max = self.config.max_bytes;
        let too_large = || {
            image_error(
                part,
                format!("{url} is larger than {max} bytes (--media-fetch-max-mib)"),
            )
        };
        let header =
            |name: HeaderName| (response.headers().get(name)).and_then(|v| v.to_str().ok());
        let mime = header(CONTENT_TYPE).map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        let mime = match mime.as_deref() {
            Some(t) if t.starts_with("image/") => t.to_string(),
            None | Some("" | "application/octet-stream") => "application/octet-stream".into(),
            Some(other) => {
                return Err(image_error(
                    part,
                    format!("{url} is not an image (Content-Type: {other})"),
                ))
            }
        };
        let announced = header(CONTENT_LENGTH).and_then(|n| n.parse::<u64>().ok());
        if announced.is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        let mut bytes = Vec::with_capacity(announced.map_or(0, |n| n as usize));
        while let Some(chunk) = (response.chunk().await)
            .map_err(|e| image_error(part, format!("reading {url} failed: {}", cause(&e))))?
        {
            if bytes.len() + chunk.len() > max {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        if bytes.is_empty() {
            return Err(image_error(part, format!("{url} sent an empty body")));
        }
        Ok(FetchedImage { mime, bytes })
    }
}

/// The innermost cause of a client error ("Connection refused (os error 111)"), which says
/// more than reqwest's own "error sending request".
fn cause(error: &reqwest::Error) -> String {
    let mut inner: &dyn std::error::Error = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(allowed: &[&str]) -> MediaFetcher {
        MediaFetcher::new(MediaFetchConfig {
            allowed_domains: allowed.iter().map(|s| s.to_string()).collect(),
            ..MediaFetchConfig::default()
        })
    }

    #[test]
    fn only_named_hosts_over_http_or_https_are_allowed() {
        let f = fetcher(&["images.example.com", "127.0.0.1", "::1"]);
        let ok = |u: &str| f.check_allowed(&Url::parse(u).unwrap(), "p").is_ok();
        assert!(ok("http://IMAGES.example.com:8080/a.png"));
        assert!(ok("http://127.0.0.1:9/a.png"));
        assert!(ok("http://[::1]:9/a.png"));
        assert!(!ok("https://example.com/a.png"));
        assert!(!ok("https://evil.images.example.com/a.png"));
        assert!(!ok("http://localhost/a.png"));
        assert!(!ok("ftp://images.example.com/a.png"));
        assert!(ok("https://images.example.com/a.png"));
        assert!(ok("https://127.0.0.1:9/a.png"));
        let err = f
            .check_allowed(
                &Url::parse("http://x.test/a").unwrap(),
                "messages[0].content[1]",
            )
            .unwrap_err();
        assert!(err.to_string().contains("messages[0].content[1]"), "{err}");
        assert!(err.to_string().contains("--allowed-media-domains"), "{err}");
    }
}
