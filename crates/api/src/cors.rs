//! `--allowed-origins`: CORS, so that browser apps on those origins can call the API. A
//! preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin is answered
//! here, before authentication (browsers send no credentials on a preflight); other requests
//! from an allowed origin get `Access-Control-Allow-Origin` on their response, errors included.
//! Without the flag nothing changes: no CORS headers, and `OPTIONS` is a 405.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

/// Headers a browser app may send when the preflight does not list its own.
const DEFAULT_ALLOWED_HEADERS: &str = "authorization, content-type, x-api-key";

/// Answers preflights and marks responses for allowed origins.
pub async fn cors(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(origin) = allowed_origin(&state.config.allowed_origins, req.headers()) else {
        return next.run(req).await;
    };
    let is_preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if is_preflight {
        let allow_headers = req
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or(HeaderValue::from_static(DEFAULT_ALLOWED_HEADERS));
        let mut response = StatusCode::NO_CONTENT.into_response();
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            // Every method a route has (`DELETE /v1/responses/{id}` included).
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allow_headers);
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(600));
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        return response;
    }
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("retry-after"),
    );
    response
}

/// The request's `Origin` when it is allowed (`*` allows any).
pub(crate) fn allowed_origin(allowed: &[String], headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    allowed
        .iter()
        .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(text))
        .then(|| origin.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_or_a_wildcard_are_allowed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://app.example"),
        );
        let listed = vec!["https://app.example/".to_string()];
        assert!(allowed_origin(&listed, &h).is_some());
        assert!(allowed_origin(&["https://other.example".to_string()], &h).is_none());
        assert!(allowed_origin(&["*".to_string()], &h).is_some());
        assert!(allowed_origin(&listed, &HeaderMap::new()).is_none());
    }
}
