//! `--api-key`: a bearer token on the API routes. Health, metrics and version stay open so
//! load balancers and scrapers need no secret.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// Rejects requests without `Authorization: Bearer <api key>` when a key is configured.
pub async fn require_api_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(expected) = &state.config.api_key {
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if !presented.is_some_and(|key| constant_time_eq(key.as_bytes(), expected.as_bytes())) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(req).await
}

/// Compares without stopping at the first difference, so timing does not reveal the key.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_equal_only_when_identical() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
