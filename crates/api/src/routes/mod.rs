//! One file per endpoint group; each handler parses, validates, and hands off.

pub mod admin;
pub mod chat;
pub mod completions;
pub mod embeddings;
pub mod health;
pub mod messages;
pub mod metrics;
pub mod models;
pub mod openapi;
pub mod render;
pub mod rerank;
pub mod response_input_items;
pub mod responses;
pub mod tokenize;
pub mod ui;

use axum::http::{Method, Uri};

use crate::error::ApiError;

/// 404 for paths no route serves, with an OpenAI error body.
pub async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::RouteNotFound {
        method: method.to_string(),
        path: uri.path().to_string(),
    }
}

/// 405 for a known path with the wrong method, with an OpenAI error body.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_string(),
    }
}
