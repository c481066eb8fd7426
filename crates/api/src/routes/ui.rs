//! The built-in web app: a chat playground and a live operations dashboard, served at `/` and
//! `/ui/{file}` from files embedded in the binary at compile time (`crates/api/ui/`), so it needs
//! no network, no separate process and no Node toolchain.
//!
//! The page is a client of the public API only: it calls `/v1/*`, `/admin/*` and `/metrics`
//! like any other client (sending the API key the user typed, kept in the browser), so this
//! module adds routes and nothing else. The binary merges [`router`] into the API router unless
//! `--no-ui` is given; unknown paths, including unknown `/ui/...` files, keep the API's JSON 404.

use axum::extract::Path;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;

/// One embedded file: its name under `/ui/`, its content type and its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Every file of the app. `index.html` is also served at `/`.
const ASSETS: &[Asset] = &[
    asset("index.html", HTML, include_str!("../../ui/index.html")),
    asset("app.css", CSS, include_str!("../../ui/app.css")),
    asset("icon.svg", SVG, include_str!("../../ui/icon.svg")),
    asset("main.js", JS, include_str!("../../ui/main.js")),
    asset("api.js", JS, include_str!("../../ui/api.js")),
    asset("dom.js", JS, include_str!("../../ui/dom.js")),
    asset("markdown.js", JS, include_str!("../../ui/markdown.js")),
    asset(
        "conversations.js",
        JS,
        include_str!("../../ui/conversations.js"),
    ),
    asset("models.js", JS, include_str!("../../ui/models.js")),
    asset("playground.js", JS, include_str!("../../ui/playground.js")),
    asset(
        "attachments.js",
        JS,
        include_str!("../../ui/attachments.js"),
    ),
    asset("raw.js", JS, include_str!("../../ui/raw.js")),
    asset("prometheus.js", JS, include_str!("../../ui/prometheus.js")),
    asset("chart.js", JS, include_str!("../../ui/chart.js")),
    asset("dashboard.js", JS, include_str!("../../ui/dashboard.js")),
];

const fn asset(name: &'static str, content_type: &'static str, body: &'static str) -> Asset {
    Asset {
        name,
        content_type,
        body,
    }
}

/// The page's own strict policy: its scripts, styles and API calls go to this origin only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; \
     style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; \
     frame-ancestors 'none'; form-action 'none'";

/// The routes of the web app: `GET /` and `GET /ui/{file}`.
pub fn router() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/{file}", get(file))
}

async fn index() -> Response {
    serve(find("index.html").expect("index.html is embedded"))
}

async fn file(Path(name): Path<String>, method: Method, uri: Uri) -> Response {
    match find(&name) {
        Some(asset) => serve(asset),
        None => ApiError::RouteNotFound {
            method: method.to_string(),
            path: uri.path().to_string(),
        }
        .into_response(),
    }
}

fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

fn serve(asset: &'static Asset) -> Response {
    let mut res = (StatusCode::OK, asset.body).into_response();
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // The files change with the binary, not by date: revalidate cheaply instead of caching stale
    // code across an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_path(path: &str) -> (StatusCode, String, String) {
        let res = router()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = res.status();
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn root_serves_the_page() {
        let (status, content_type, body) = get_path("/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, HTML);
        assert!(body.contains("<title>sluice</title>"));
    }

    #[tokio::test]
    async fn every_file_the_page_references_is_embedded_with_its_type() {
        // Scripts import each other by `./name.js`; the page links `/ui/name`.
        let mut referenced = Vec::new();
        for asset in ASSETS {
            for part in asset.body.split(['"', '\'']) {
                let name = part
                    .strip_prefix("/ui/")
                    .or_else(|| part.strip_prefix("./"));
                if let Some(name) = name.filter(|n| n.contains('.') && !n.contains(' ')) {
                    referenced.push(name.to_string());
                }
            }
        }
        assert!(referenced.iter().any(|n| n == "main.js"));
        for name in referenced {
            let (status, content_type, _) = get_path(&format!("/ui/{name}")).await;
            assert_eq!(status, StatusCode::OK, "/ui/{name}");
            assert!(!content_type.is_empty(), "/ui/{name} has a content type");
        }
    }

    #[tokio::test]
    async fn unknown_ui_file_is_the_api_json_404() {
        let (status, content_type, body) = get_path("/ui/nope.js").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(content_type.starts_with("application/json"));
        assert!(body.contains("/ui/nope.js"));
    }

    #[test]
    fn no_asset_loads_anything_from_another_origin() {
        for asset in ASSETS {
            for needle in ["http://", "https://", "//cdn", "@import url("] {
                let hits: Vec<_> = asset
                    .body
                    .match_indices(needle)
                    .map(|(i, _)| &asset.body[i..(i + 40).min(asset.body.len())])
                    // The SVG namespace is an identifier, not a fetch.
                    .filter(|s| !s.starts_with("http://www.w3.org/"))
                    .collect();
                assert!(hits.is_empty(), "{} references {hits:?}", asset.name);
            }
        }
    }
}
