//! The drain gate: a layer over the whole app that counts every API request in flight until
//! its response is sent (a stream to its last event) and, once the server drains, answers new
//! ones 503 with `Retry-After` while the listener stays open. The probes, `/metrics` and
//! `/version` pass untouched: an orchestrator keeps reading them during a drain.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::BodyExt;

use super::Lifecycle;
use crate::error::ApiError;

/// What the gate needs.
#[derive(Debug, Clone)]
struct Gate {
    lifecycle: Arc<Lifecycle>,
    retry_after_secs: u64,
}

/// `app` behind the drain gate of `lifecycle`; refusals carry `Retry-After: retry_after_secs`.
pub fn gated(app: Router, lifecycle: Arc<Lifecycle>, retry_after_secs: u64) -> Router {
    let gate = Gate {
        lifecycle,
        retry_after_secs,
    };
    app.layer(from_fn_with_state(gate, admit))
}

/// Paths the gate never refuses nor counts: health probes, metrics and version.
pub fn is_open_during_drain(path: &str) -> bool {
    matches!(path, "/health" | "/metrics" | "/version") || path.starts_with("/health/")
}

async fn admit(State(gate): State<Gate>, req: Request, next: Next) -> Response {
    if is_open_during_drain(req.uri().path()) {
        return next.run(req).await;
    }
    let Some(in_flight) = gate.lifecycle.admit() else {
        let refusal = ApiError::Draining {
            retry_after_secs: gate.retry_after_secs,
        };
        // Anthropic's clients read errors in Anthropic's shape (as the auth layer does).
        return if req.uri().path().starts_with("/v1/messages") {
            crate::wire::messages::anthropic_error_response(&refusal)
        } else {
            refusal.into_response()
        };
    };
    let response = next.run(req).await;
    // The count ends when the body is done: sent to its end, or dropped with its connection.
    response.map(|body| {
        Body::new(body.map_frame(move |frame| {
            let _counted = &in_flight;
            frame
        }))
    })
}

#[cfg(test)]
mod tests {
    use axum::http::{header, StatusCode};
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn app(lifecycle: &Arc<Lifecycle>) -> Router {
        let routes = Router::new()
            .route("/v1/models", get(|| async { "models" }))
            .route("/health/ready", get(|| async { "probe" }))
            .route("/metrics", get(|| async { "metrics" }));
        gated(routes, Arc::clone(lifecycle), 7)
    }

    async fn get_path(app: Router, path: &str) -> Response {
        let req = Request::get(path).body(Body::empty()).unwrap();
        app.oneshot(req).await.unwrap()
    }

    #[test]
    fn probes_metrics_and_version_stay_open_and_the_api_does_not() {
        for open in [
            "/health",
            "/health/ready",
            "/health/live",
            "/metrics",
            "/version",
        ] {
            assert!(is_open_during_drain(open), "{open}");
        }
        for gated in [
            "/v1/chat/completions",
            "/healthz",
            "/tokenize",
            "/",
            "/openapi.json",
        ] {
            assert!(!is_open_during_drain(gated), "{gated}");
        }
    }

    #[tokio::test]
    async fn a_request_counts_until_its_body_is_consumed() {
        let lifecycle = Arc::new(Lifecycle::serving());
        let response = get_path(app(&lifecycle), "/v1/models").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(lifecycle.in_flight(), 1, "the body is not sent yet");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"models");
        assert_eq!(lifecycle.in_flight(), 0);
        let probe = get_path(app(&lifecycle), "/health/ready").await;
        assert_eq!(probe.status(), StatusCode::OK);
        assert_eq!(lifecycle.in_flight(), 0, "probes are not counted");
    }

    #[tokio::test]
    async fn draining_refuses_the_api_with_retry_after_and_answers_probes() {
        let lifecycle = Arc::new(Lifecycle::serving());
        lifecycle.begin_drain();
        let refused = get_path(app(&lifecycle), "/v1/models").await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "7");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "service_unavailable");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"));
        for open in ["/health/ready", "/metrics"] {
            assert_eq!(
                get_path(app(&lifecycle), open).await.status(),
                StatusCode::OK
            );
        }
    }
}
