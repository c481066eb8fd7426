//! The JSON body extractor every POST route uses. Unlike axum's `Json`, every way a body can be
//! wrong ends in an OpenAI error body: wrong content type and malformed JSON are 400 (OpenAI
//! clients expect 400, not axum's 415/422), a body over the limit is 413, and a client that
//! does not finish sending its body within the read deadline gets 408 and its connection back.

use axum::extract::{FromRequest, Request};
use axum::http::header;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::AppState;

/// A JSON request body of type `T`.
#[derive(Debug)]
pub struct OpenAiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for OpenAiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let limit = state.config.max_body_bytes;
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json(content_type) {
            return Err(ApiError::malformed(format!(
                "expected Content-Type: application/json, got '{}'",
                if content_type.is_empty() {
                    "nothing"
                } else {
                    content_type
                }
            )));
        }
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|len| len > limit) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        let deadline = state.config.request_read_timeout;
        let bytes = tokio::time::timeout(deadline, read_limited(req.into_body(), limit))
            .await
            .map_err(|_| ApiError::RequestTimeout(deadline.as_secs()))??;
        serde_json::from_slice(&bytes)
            .map(OpenAiJson)
            .map_err(|e| ApiError::malformed(format!("invalid JSON body: {e}")))
    }
}

/// Reads at most `limit` bytes of `body`; more is a 413 (the length header may be absent).
async fn read_limited(mut body: axum::body::Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| ApiError::malformed(format!("failed to read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// `application/json`, optionally with parameters, or any `+json` type.
pub(crate) fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognized() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("Application/JSON"));
        assert!(is_json("application/vnd.api+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
        assert!(!is_json(""));
    }
}
