//! The one error type of the HTTP edge, and its two forms on the wire: an HTTP response with
//! OpenAI's error body, or (once a stream has started) a `data:` event with an `error` object.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Everything that can go wrong serving a request, each with its HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// A parameter is missing, malformed or out of range (400).
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong, in words a client author can act on.
        message: String,
        /// The offending field, when there is one.
        param: Option<String>,
        /// A machine-readable code, e.g. `context_length_exceeded`.
        code: Option<&'static str>,
    },
    /// The prompt (with the tokens asked for, when given) does not fit the model's context
    /// (400 `context_length_exceeded`); the numbers let each API word it its own way.
    #[error("{}", context_message(*.prompt_tokens, *.max_tokens, *.context, .param))]
    ContextLengthExceeded {
        /// Tokens in the prompt.
        prompt_tokens: usize,
        /// The completion tokens asked for, when they are what does not fit.
        max_tokens: Option<u64>,
        /// The model's context length.
        context: usize,
        /// The prompt's field (`messages`, `prompt`, `input`).
        param: String,
    },
    /// `--api-key` is set and the bearer token is missing or wrong (401).
    #[error("invalid or missing API key: send it as 'Authorization: Bearer <key>'")]
    Unauthorized,
    /// `--admin-key` is set and an admin route came without it (401); an API key does not
    /// open the admin routes.
    #[error("invalid or missing admin key: the admin routes need the --admin-key key (an API key is not enough), sent as 'Authorization: Bearer <key>'")]
    AdminUnauthorized,
    /// Refused whatever key it carries (403): a browser's cross-origin request to a route that
    /// changes state, or a `Host` this server does not answer to (DNS rebinding).
    #[error("{message}")]
    Forbidden {
        /// Why, and what the operator or client can change.
        message: String,
        /// A machine-readable code, e.g. `cross_origin_request`.
        code: &'static str,
    },
    /// The body is not of a type the route takes (415): the admin routes want
    /// `Content-Type: application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// No served model has this name (404).
    #[error("the model '{name}' does not exist{list}", name = .0, list = served_list(.1))]
    ModelNotFound(String, Vec<String>),
    /// No stored response has this id (404): `GET`/`DELETE /v1/responses/{id}` and
    /// `previous_response_id`.
    #[error("no response with id '{0}' is stored (it may have expired or been deleted)")]
    ResponseNotFound(String),
    /// No route has this path (404).
    #[error("no route for {method} {path}")]
    RouteNotFound {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The route exists but not for this method (405).
    #[error("method {method} is not allowed for {path}")]
    MethodNotAllowed {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The client did not send its body within the read deadline (408).
    #[error("the request body was not received within {0} seconds")]
    RequestTimeout(u64),
    /// The body is larger than the server accepts (413).
    #[error("request body exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The engine's queue is full; retry later (429 with `Retry-After`).
    #[error("the server is at capacity: the request queue is full, retry in {retry_after_secs} s")]
    Overloaded {
        /// Seconds to send in `Retry-After`.
        retry_after_secs: u64,
    },
    /// The engine is not serving: loading, shut down or dead (503).
    #[error("{0}")]
    Unavailable(String),
    /// The server is draining before it exits: running requests finish, new ones are refused
    /// (503 with `Retry-After`; another replica can take them).
    #[error("the server is shutting down: send the request again (to another replica), retry in {retry_after_secs} s")]
    Draining {
        /// Seconds to send in `Retry-After`.
        retry_after_secs: u64,
    },
    /// A fault on the server's side (500).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 naming the offending parameter.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        ApiError::InvalidRequest {
            message: message.into(),
            param: Some(param.to_string()),
            code: None,
        }
    }

    /// A 400 that concerns the request as a whole (malformed JSON, wrong content type).
    pub fn malformed(message: impl Into<String>) -> Self {
        ApiError::InvalidRequest {
            message: message.into(),
            param: None,
            code: None,
        }
    }

    /// This error with its `param` `from` named `to`, and so in its message (the same field
    /// under another API's name: one parser serving `prompt` and `input`, say).
    pub fn with_param_renamed(mut self, from: &str, to: &str) -> Self {
        match &mut self {
            ApiError::InvalidRequest {
                message,
                param: Some(param),
                ..
            } if param == from => {
                *message = message.replace(from, to);
                *param = to.to_string();
            }
            // The message is made from the param.
            ApiError::ContextLengthExceeded { param, .. } if param == from => {
                *param = to.to_string();
            }
            _ => {}
        }
        self
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest { .. } | ApiError::ContextLengthExceeded { .. } => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Unauthorized | ApiError::AdminUnauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::ModelNotFound(..)
            | ApiError::ResponseNotFound(_)
            | ApiError::RouteNotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) | ApiError::Draining { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI's `{"error": {...}}` body for this error.
    pub fn body(&self) -> ErrorBody {
        let (kind, param, code) = match self {
            ApiError::InvalidRequest { param, code, .. } => (
                "invalid_request_error",
                param.clone(),
                code.map(str::to_string),
            ),
            ApiError::ContextLengthExceeded { param, .. } => (
                "invalid_request_error",
                Some(param.clone()),
                Some("context_length_exceeded".into()),
            ),
            ApiError::Unauthorized => {
                ("authentication_error", None, Some("invalid_api_key".into()))
            }
            ApiError::AdminUnauthorized => (
                "authentication_error",
                None,
                Some("invalid_admin_key".into()),
            ),
            ApiError::Forbidden { code, .. } => ("permission_error", None, Some(code.to_string())),
            ApiError::UnsupportedMediaType(_) => (
                "invalid_request_error",
                None,
                Some("unsupported_media_type".into()),
            ),
            ApiError::ModelNotFound(..) => (
                "invalid_request_error",
                Some("model".into()),
                Some("model_not_found".into()),
            ),
            ApiError::ResponseNotFound(_) => (
                "invalid_request_error",
                Some("previous_response_id".into()),
                Some("response_not_found".into()),
            ),
            ApiError::RouteNotFound { .. } => {
                ("invalid_request_error", None, Some("not_found".into()))
            }
            ApiError::MethodNotAllowed { .. } => (
                "invalid_request_error",
                None,
                Some("method_not_allowed".into()),
            ),
            ApiError::RequestTimeout(_) => ("invalid_request_error", None, Some("timeout".into())),
            ApiError::PayloadTooLarge { .. } => (
                "invalid_request_error",
                None,
                Some("payload_too_large".into()),
            ),
            ApiError::Overloaded { .. } => {
                ("rate_limit_error", None, Some("rate_limit_exceeded".into()))
            }
            ApiError::Unavailable(_) | ApiError::Draining { .. } => {
                ("server_error", None, Some("service_unavailable".into()))
            }
            ApiError::Internal(_) => ("server_error", None, None),
        };
        ErrorBody {
            error: ErrorDetail {
                message: self.to_string(),
                kind: kind.to_string(),
                param,
                code,
            },
        }
    }

    /// The seconds this error's response sends in `Retry-After`, if it sends one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::Overloaded { retry_after_secs } | ApiError::Draining { retry_after_secs } => {
                Some(*retry_after_secs)
            }
            _ => None,
        }
    }

    /// The JSON of the `data:` event that reports this error after a stream has started;
    /// the stream then ends with `data: [DONE]`.
    pub fn stream_event_data(&self) -> String {
        serde_json::to_string(&self.body()).expect("error bodies always serialize")
    }
}

/// OpenAI's error envelope.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// OpenAI's error object.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ErrorDetail {
    /// Human-readable description.
    pub message: String,
    /// Error class, e.g. `invalid_request_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The offending parameter, or null.
    pub param: Option<String>,
    /// Machine-readable code, or null.
    pub code: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %self, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), error = %self, "request rejected");
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if let Some(retry_after_secs) = self.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

/// `; served models: a, b` for a 404 on an unknown model (nothing when the list is unknown).
fn served_list(served: &[String]) -> String {
    match served.is_empty() {
        true => String::new(),
        false => format!("; served models: {}", served.join(", ")),
    }
}

/// OpenAI's (and vLLM's) words for a prompt that does not fit: both numbers and what to reduce.
fn context_message(prompt: usize, max_tokens: Option<u64>, context: usize, param: &str) -> String {
    match max_tokens {
        None => format!(
            "This model's maximum context length is {context} tokens. However, your prompt has \
             {prompt} tokens, leaving no room for a completion. Please reduce the length of the \
             {param}."
        ),
        Some(m) => format!(
            "This model's maximum context length is {context} tokens. However, you requested {} \
             tokens ({prompt} in the {param}, {m} for the completion). Please reduce the length \
             of the {param} or the completion.",
            prompt as u64 + m
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_maps_to_its_status() {
        let cases = [
            (ApiError::invalid("n", "bad"), 400),
            (ApiError::Unauthorized, 401),
            (ApiError::AdminUnauthorized, 401),
            (
                ApiError::Forbidden {
                    message: "no".into(),
                    code: "host_not_allowed",
                },
                403,
            ),
            (ApiError::UnsupportedMediaType("text/plain".into()), 415),
            (ApiError::ModelNotFound("x".into(), Vec::new()), 404),
            (
                ApiError::RouteNotFound {
                    method: "GET".into(),
                    path: "/x".into(),
                },
                404,
            ),
            (
                ApiError::MethodNotAllowed {
                    method: "GET".into(),
                    path: "/v1/completions".into(),
                },
                405,
            ),
            (ApiError::RequestTimeout(5), 408),
            (ApiError::PayloadTooLarge { limit: 10 }, 413),
            (
                ApiError::Overloaded {
                    retry_after_secs: 1,
                },
                429,
            ),
            (ApiError::Unavailable("loading".into()), 503),
            (
                ApiError::Draining {
                    retry_after_secs: 1,
                },
                503,
            ),
            (ApiError::Internal("boom".into()), 500),
        ];
        for (err, status) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
        }
    }

    #[test]
    fn body_has_message_type_param_and_code() {
        let v = serde_json::to_value(ApiError::invalid("temperature", "too hot").body()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error":{"message":"too hot","type":"invalid_request_error",
                "param":"temperature","code":null}})
        );
    }

    #[test]
    fn unknown_model_names_the_model_param() {
        let body = ApiError::ModelNotFound("gpt-9".into(), Vec::new()).body();
        assert_eq!(body.error.param.as_deref(), Some("model"));
        assert!(body.error.message.contains("gpt-9"));
    }

    #[test]
    fn overload_response_carries_retry_after() {
        let response = ApiError::Overloaded {
            retry_after_secs: 3,
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
    }

    #[test]
    fn stream_event_is_the_same_error_envelope() {
        let data = ApiError::Internal("engine died".into()).stream_event_data();
        let v: serde_json::Value = serde_json::from_str(&data).unwrap();
        assert_eq!(v["error"]["message"], "engine died");
        assert_eq!(v["error"]["type"], "server_error");
    }
}
