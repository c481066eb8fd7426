//! `--api-key` (repeatable, or a keys file): a key on the API routes, sent as
//! `Authorization: Bearer KEY` (the scheme in any case, as RFC 9110 has it) or `X-Api-Key: KEY`.
//! Health, metrics and version stay open so load balancers and scrapers need no secret.
//!
//! `--admin-key` separates operators from API callers: when it is set, the admin routes
//! (`/admin/*`) need that key and no API key opens them ([`require_admin_key`]); the admin key
//! opens the API routes too, so the web app's dashboard and playground work with it alone.
//! Without it the admin routes take the API keys, as before.
//!
//! Which key a request came with is its [`Caller`]: the prefix cache is scoped per key (see
//! [`Caller::cache_salt`]), so one tenant's cache hits reveal nothing of another's prompts, and
//! the engine shares its running seats fairly between callers (see [`Caller::fair_share_id`]).

use std::hash::BuildHasher;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// Who sent a request, as far as the server can tell: which API key (its index in the
/// configured list), or `None` when the server has no keys. Handlers take it as an
/// `Extension<Caller>`; it is always present on the API routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller {
    /// Index of the presented key among the configured ones.
    pub key: Option<usize>,
}

impl Caller {
    /// The prefix-cache scope of a request: one per API key, split further by the request's
    /// own `cache_salt` (as in vLLM). `None` (the one shared scope) only when the server has
    /// no keys and the request no salt. Derived from the key itself (not its place in the
    /// list, nor a per-start secret), so a tenant's cached prefixes keep their keys across
    /// restarts (see `sluice_engine::block_manager::cache_scope`).
    pub fn cache_salt(&self, api_keys: &[String], request_salt: Option<&str>) -> Option<u64> {
        let key = self.key.and_then(|i| api_keys.get(i)).map(String::as_str);
        sluice_engine::block_manager::cache_scope(key, request_salt)
    }
}

impl Caller {
    /// Who the request counts as for fair sharing of the engine's seats: its API key when the
    /// server has several, else the request's `user` field (one key shared by many users),
    /// else `None`, the one anonymous caller. An opaque hash keyed by `hasher` (random per
    /// start), never the key itself.
    pub fn fair_share_id(
        &self,
        hasher: &std::collections::hash_map::RandomState,
        num_keys: usize,
        user: Option<&str>,
    ) -> Option<u64> {
        match (self.key, user) {
            (Some(key), _) if num_keys > 1 => Some(hasher.hash_one(("key", key))),
            (_, Some(user)) => Some(hasher.hash_one(("user", user))),
            _ => None,
        }
    }
}

/// Rejects requests without a configured key when keys are configured; records the
/// [`Caller`] for the handlers.
pub async fn require_api_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let keys = &state.config.api_keys;
    let caller = if keys.is_empty() {
        Caller::default()
    } else {
        let presented = presented_key(req.headers());
        match presented.and_then(|key| matching_key(keys, key)) {
            Some(index) => Caller { key: Some(index) },
            // The operator: the one scope no API key shares.
            None if is_admin_key(&state, presented) => Caller::default(),
            // Anthropic's clients (Claude Code) read errors in Anthropic's shape.
            None if req.uri().path().starts_with("/v1/messages") => {
                return crate::wire::messages::anthropic_error_response(&ApiError::Unauthorized)
            }
            None => return ApiError::Unauthorized.into_response(),
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// With `--admin-key`, only that key opens the admin routes (401 otherwise, an API key
/// included); without it they take the API keys ([`require_api_key`]).
pub async fn require_admin_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    if state.config.admin_key.is_none() {
        return require_api_key(State(state), req, next).await;
    }
    if !is_admin_key(&state, presented_key(req.headers())) {
        return ApiError::AdminUnauthorized.into_response();
    }
    req.extensions_mut().insert(Caller::default());
    next.run(req).await
}

/// Whether `presented` is the `--admin-key` (false when there is none).
fn is_admin_key(state: &AppState, presented: Option<&str>) -> bool {
    match (&state.config.admin_key, presented) {
        (Some(admin), Some(presented)) => constant_time_eq(presented.as_bytes(), admin.as_bytes()),
        _ => false,
    }
}

/// The key in `Authorization: Bearer KEY` (scheme case-insensitive) or `X-Api-Key: KEY`.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, key) = value.trim().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then_some(key.trim());
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The index of the configured key equal to `presented`. Every key is compared in full, so
/// timing reveals neither a key nor which one matched.
fn matching_key(keys: &[String], presented: &str) -> Option<usize> {
    let mut found = None;
    for (index, key) in keys.iter().enumerate() {
        if constant_time_eq(presented.as_bytes(), key.as_bytes()) && found.is_none() {
            found = Some(index);
        }
    }
    found
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
    use axum::http::HeaderValue;

    #[test]
    fn keys_compare_equal_only_when_identical() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for &(name, value) in pairs {
            h.insert(name, HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn the_key_comes_from_a_bearer_header_in_any_case_or_from_x_api_key() {
        for value in ["Bearer k1", "bearer k1", "BEARER  k1 "] {
            assert_eq!(
                presented_key(&headers(&[("authorization", value)])),
                Some("k1")
            );
        }
        assert_eq!(
            presented_key(&headers(&[("authorization", "Basic k1")])),
            None
        );
        assert_eq!(presented_key(&headers(&[("x-api-key", "k2")])), Some("k2"));
        assert_eq!(presented_key(&headers(&[])), None);
    }

    #[test]
    fn the_matching_key_is_found_among_several() {
        let keys = vec!["alpha".to_string(), "beta".to_string()];
        assert_eq!(matching_key(&keys, "beta"), Some(1));
        assert_eq!(matching_key(&keys, "gamma"), None);
    }

    #[test]
    fn the_fair_share_caller_is_the_key_when_there_are_several_else_the_user() {
        let hasher = std::collections::hash_map::RandomState::new();
        let (a, b) = (Caller { key: Some(0) }, Caller { key: Some(1) });
        // Several keys: the key decides, whatever `user` says.
        assert_ne!(
            a.fair_share_id(&hasher, 2, Some("u")),
            b.fair_share_id(&hasher, 2, Some("u"))
        );
        assert_eq!(
            a.fair_share_id(&hasher, 2, Some("u")),
            a.fair_share_id(&hasher, 2, Some("v"))
        );
        // One key or none: the user decides; no user is the anonymous caller.
        assert_ne!(
            a.fair_share_id(&hasher, 1, Some("u")),
            a.fair_share_id(&hasher, 1, Some("v"))
        );
        let anonymous = Caller::default();
        assert_eq!(
            anonymous.fair_share_id(&hasher, 0, Some("u")),
            a.fair_share_id(&hasher, 1, Some("u"))
        );
        assert_eq!(anonymous.fair_share_id(&hasher, 0, None), None);
    }

    #[test]
    fn each_key_and_each_request_salt_is_its_own_cache_scope() {
        let keys = vec!["alpha".to_string(), "beta".to_string()];
        let a = Caller { key: Some(0) };
        let b = Caller { key: Some(1) };
        assert_eq!(Caller::default().cache_salt(&keys, None), None);
        assert_ne!(a.cache_salt(&keys, None), b.cache_salt(&keys, None));
        assert_ne!(a.cache_salt(&keys, None), a.cache_salt(&keys, Some("s")));
        assert_eq!(
            a.cache_salt(&keys, Some("s")),
            a.cache_salt(&keys, Some("s"))
        );
        assert_ne!(
            b.cache_salt(&keys, Some("s")),
            a.cache_salt(&keys, Some("s"))
        );
        // The scope follows the key, not its place in the list (a reordered keys file keeps
        // every tenant's cache).
        let reordered = vec!["beta".to_string(), "alpha".to_string()];
        assert_eq!(b.cache_salt(&keys, None), a.cache_salt(&reordered, None));
    }
}
