//! TLS for image fetches: which certificate authorities an `https` image host is checked
//! against, and what a failed handshake is called in the 400 that reports it.
//!
//! Roots: the system's (`/etc/ssl/certs`, or `SSL_CERT_FILE` / `SSL_CERT_DIR`, read once when
//! the client is built) together with Mozilla's, compiled in from `webpki-root-certs`. The
//! compiled-in set means a fresh Debian machine or a slim container without the
//! `ca-certificates` package still fetches from public hosts (with the system's alone, building
//! the client fails there), and the system's means a private CA installed the usual way is
//! trusted too. Verification is never turned off: there is no switch for it.

use std::error::Error;

use reqwest::tls::Certificate;
use reqwest::ClientBuilder;
use rustls::CertificateError;

/// `builder` checking servers against the system's roots, Mozilla's and `extra_roots`.
pub(super) fn with_roots(builder: ClientBuilder, extra_roots: Vec<Certificate>) -> ClientBuilder {
    let mozilla = (webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter())
        .filter_map(|der| Certificate::from_der(der).ok());
    builder.tls_certs_merge(mozilla.chain(extra_roots))
}

/// What went wrong, when `error` is a failed TLS handshake: `None` for any other failure.
pub(super) fn handshake_failure(error: &reqwest::Error) -> Option<String> {
    let Some(tls) = tls_error(error) else {
        // Connected, then the host hung up before the handshake was done: a TCP connect
        // itself neither reads nor sends, so a stream ended or reset while connecting to an
        // https URL is the handshake's.
        let https = error.url().is_some_and(|url| url.scheme() == "https");
        let hung_up = https
            && error.is_connect()
            && io_errors(error).any(|io| {
                use std::io::ErrorKind::{ConnectionReset, UnexpectedEof};
                matches!(io.kind(), UnexpectedEof | ConnectionReset)
            });
        return hung_up.then(|| {
            "the TLS handshake failed: the host closed the connection during it".to_string()
        });
    };
    Some(match tls {
        rustls::Error::InvalidCertificate(why) => {
            let plainly = match why {
                CertificateError::UnknownIssuer => {
                    "it is not signed by a certificate authority this server trusts (a \
                     self-signed certificate or a private CA's)"
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    "it is not valid for this host name"
                }
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "it has expired"
                }
                _ => "it was refused",
            };
            format!("the TLS certificate is not trusted: {plainly} ({why})")
        }
        // What a plain-http port answers a TLS hello with is no TLS record at all.
        rustls::Error::InvalidMessage(_) => format!(
            "the TLS handshake failed: the host did not answer in TLS (is the port plain \
             http?) ({tls})"
        ),
        other => format!("the TLS handshake failed: {other}"),
    })
}

/// The rustls error somewhere in `error`'s chain of causes.
fn tls_error(error: &reqwest::Error) -> Option<&rustls::Error> {
    causes(error).find_map(|cause| cause.downcast_ref::<rustls::Error>())
}

fn io_errors(error: &reqwest::Error) -> impl Iterator<Item = &std::io::Error> {
    causes(error).filter_map(|cause| cause.downcast_ref::<std::io::Error>())
}

/// `error` and its causes, outermost first. The TLS stream reports a rustls error inside an
/// `io::Error`, itself wrapped in another, and an `io::Error`'s `source()` skips the error it
/// wraps, so each is opened instead.
fn causes(error: &reqwest::Error) -> impl Iterator<Item = &(dyn Error + 'static)> {
    std::iter::successors(Some(error as &(dyn Error + 'static)), |e| {
        let wrapped = (e.downcast_ref::<std::io::Error>()).and_then(|io| io.get_ref());
        match wrapped {
            Some(inner) => Some(inner as &(dyn Error + 'static)),
            None => (*e).source(),
        }
    })
}

#[cfg(test)]
mod tests;
