//! Browsers cannot drive the routes that change state from another site (cross-site request
//! forgery). Any page can make its visitor's browser send a `POST` to a server on `localhost`
//! or the intranet, with a body and no preflight when it is a "simple" request (a form, or
//! `text/plain`); without keys the server would load, unload or pin models, or generate, for
//! that page. Browsers say where a request comes from, so every request whose method is not
//! `GET`, `HEAD` or `OPTIONS` is checked by these rules (those of Go's
//! `net/http.CrossOriginProtection`), in order:
//! 1. `Sec-Fetch-Site` (every current browser sends it): `same-origin`, or `none` (the user's
//!    own navigation), passes; anything else (`same-site`, `cross-site`) is refused unless the
//!    request's `Origin` is one of `--allowed-origins` (or that list holds `*`): CORS lets those
//!    apps in, so this does too.
//! 2. Without it (older browsers): no `Origin` passes; an `Origin` whose host and port are the
//!    request's `Host` passes; any other (`null` included) is refused unless allowed as in 1.
//!
//! Clients that are not browsers (curl, the OpenAI SDKs, other servers) send neither header and
//! pass, as do the web app's own calls (same origin). A refusal is a 403 with an OpenAI error
//! body, code `cross_origin_request` (Anthropic's shape on `/v1/messages`). The admin routes
//! also take only JSON bodies ([`crate::routes::admin`]), which no browser sends to another
//! origin without a CORS preflight.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// Refuses a browser's cross-origin request that could change state (see the module docs).
pub async fn refuse_cross_origin(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    match check(
        req.method(),
        req.uri(),
        req.headers(),
        &state.config.allowed_origins,
    ) {
        Ok(()) => next.run(req).await,
        Err(message) => {
            tracing::debug!(
                method = %req.method(),
                path = req.uri().path(),
                "{message}"
            );
            let err = ApiError::Forbidden {
                message,
                code: "cross_origin_request",
            };
            error_response(req.uri().path(), err)
        }
    }
}

/// `Ok` when the request may go on; else why not, in words.
fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    allowed_origins: &[String],
) -> Result<(), String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let origin = header_text(headers, header::ORIGIN);
    let allowed = || crate::cors::allowed_origin(allowed_origins, headers).is_some();
    let widen = "; to let a browser app on that origin in, start the server with \
                 --allowed-origins ORIGIN";
    match header_text(headers, SEC_FETCH_SITE) {
        Some("same-origin" | "none") => return Ok(()),
        Some(site) if !allowed() => {
            return Err(format!(
                "cross-origin request refused: the browser sent it from {} (Sec-Fetch-Site: \
                 {site}), and this route changes state{widen}",
                origin.map_or("another site".to_string(), |o| format!("'{o}'"))
            ))
        }
        Some(_) => return Ok(()),
        None => {}
    }
    let Some(origin) = origin else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let origin_host = origin.split_once("://").map(|(_, host)| host);
    let same = matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h));
    if same || allowed() {
        return Ok(());
    }
    Err(format!(
        "cross-origin request refused: its Origin '{origin}' is not this server ('{}'), and \
         this route changes state{widen}",
        host.unwrap_or("unknown")
    ))
}

const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// A header's value; "" when it is not text (which no rule accepts).
fn header_text(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    headers.get(name).map(|v| v.to_str().unwrap_or(""))
}

/// `err` as the route's clients read errors: Anthropic's shape on `/v1/messages`, OpenAI's
/// elsewhere (as the key check and the drain gate answer).
pub(crate) fn error_response(path: &str, err: ApiError) -> Response {
    if path.starts_with("/v1/messages") {
        crate::wire::messages::anthropic_error_response(&err)
    } else {
        err.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn verdict(method: Method, pairs: &[(&'static str, &str)], allowed: &[&str]) -> bool {
        let mut headers = HeaderMap::new();
        for &(name, value) in pairs {
            headers.insert(name, HeaderValue::from_str(value).unwrap());
        }
        let allowed: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        let uri: Uri = "/admin/models/m/unload".parse().unwrap();
        check(&method, &uri, &headers, &allowed).is_ok()
    }

    const HOST: (&str, &str) = ("host", "localhost:8000");

    #[test]
    fn reads_pass_whatever_their_origin() {
        let evil = [
            HOST,
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ];
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert!(verdict(method, &evil, &[]));
        }
        assert!(!verdict(Method::POST, &evil, &[]));
        assert!(!verdict(Method::DELETE, &evil, &[]));
    }

    #[test]
    fn sec_fetch_site_decides_when_present() {
        for (site, ok) in [
            ("same-origin", true),
            ("none", true),
            ("same-site", false),
            ("cross-site", false),
        ] {
            assert_eq!(
                verdict(Method::POST, &[HOST, ("sec-fetch-site", site)], &[]),
                ok,
                "{site}"
            );
        }
        // It wins over an Origin that names this very host.
        let forged = [
            HOST,
            ("origin", "http://localhost:8000"),
            ("sec-fetch-site", "cross-site"),
        ];
        assert!(!verdict(Method::POST, &forged, &[]));
    }

    #[test]
    fn without_sec_fetch_site_the_origin_must_be_this_host() {
        assert!(verdict(Method::POST, &[HOST], &[]), "not a browser");
        assert!(verdict(
            Method::POST,
            &[HOST, ("origin", "http://LOCALHOST:8000")],
            &[]
        ));
        for origin in [
            "http://localhost:8001",
            "http://127.0.0.1:8000",
            "https://evil.example",
            "null",
        ] {
            assert!(
                !verdict(Method::POST, &[HOST, ("origin", origin)], &[]),
                "{origin}"
            );
        }
    }

    #[test]
    fn allowed_origins_pass_as_cors_lets_them() {
        let app = [
            HOST,
            ("origin", "https://app.example"),
            ("sec-fetch-site", "cross-site"),
        ];
        assert!(verdict(Method::POST, &app, &["https://app.example"]));
        assert!(verdict(Method::POST, &app, &["*"]));
        assert!(!verdict(Method::POST, &app, &["https://other.example"]));
        let old_browser = [HOST, ("origin", "https://app.example")];
        assert!(verdict(
            Method::POST,
            &old_browser,
            &["https://app.example/"]
        ));
    }
}
