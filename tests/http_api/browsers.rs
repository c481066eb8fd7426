//! What a browser on another site can make this server do (issue 30): nothing that changes
//! state. Cross-origin requests that change state are refused (`Sec-Fetch-Site`, `Origin`),
//! the admin routes take JSON only, a `Host` the server does not answer to is refused (DNS
//! rebinding) while the probes keep answering, and `--admin-key` separates operators from API
//! callers.

use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use sluice_api::server::allowed_hosts::AllowedHosts;

use crate::server::{start, ServerOptions, TestServer};

const EVIL: &str = "https://evil.example";

/// Sends `req` and returns its status and JSON body (`null` when not JSON).
async fn send(req: RequestBuilder) -> (u16, Value) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn request(server: &TestServer, method: Method, path: &str) -> RequestBuilder {
    reqwest::Client::new().request(method, server.url(path))
}

/// What a page on `origin` makes its browser send: `Origin` and `Sec-Fetch-Site` (as a
/// browser computes it for a page elsewhere).
fn from_page(req: RequestBuilder, origin: &str, site: &str) -> RequestBuilder {
    req.header("origin", origin).header("sec-fetch-site", site)
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_text_plain_post_to_the_admin_routes_is_refused() {
    let server = start(ServerOptions::default()).await;
    for action in ["load", "unload", "pin", "unpin"] {
        let path = format!("/admin/models/llama/{action}");
        // A "simple" request, which a browser sends without a preflight.
        let simple = request(&server, Method::POST, &path)
            .header("content-type", "text/plain")
            .body("{}");
        for site in ["cross-site", "same-site"] {
            let (status, body) = send(from_page(simple.try_clone().unwrap(), EVIL, site)).await;
            assert_eq!(status, 403, "{action} {site}: {body}");
            assert_eq!(code(&body), "cross_origin_request");
            assert_eq!(body["error"]["type"], "permission_error");
            assert!(body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allowed-origins"));
        }
        // An older browser sends no Sec-Fetch-Site, only the Origin.
        let (status, _) = send(simple.header("origin", EVIL)).await;
        assert_eq!(status, 403, "{action} without Sec-Fetch-Site");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_that_changes_state_refuses_other_sites_and_reads_stay_open() {
    let server = start(ServerOptions::default()).await;
    let completion = serde_json::json!({"model": "llama", "prompt": "hi", "max_tokens": 1});
    let post = |path: &str| request(&server, Method::POST, path).json(&completion);
    for req in [
        post("/v1/completions"),
        post("/tokenize"),
        request(&server, Method::DELETE, "/v1/responses/resp_x"),
    ] {
        let (status, body) = send(from_page(req, EVIL, "cross-site")).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(code(&body), "cross_origin_request");
    }
    // Anthropic's clients read Anthropic's shape on /v1/messages.
    let (status, body) = send(from_page(post("/v1/messages"), EVIL, "cross-site")).await;
    assert_eq!(status, 403);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "permission_error");
    // Reading is not refused (without CORS the page cannot read the answer anyway).
    for path in ["/v1/models", "/admin/models", "/health/ready", "/metrics"] {
        let req = from_page(request(&server, Method::GET, path), EVIL, "cross-site");
        assert_eq!(send(req).await.0, 200, "{path}");
    }
    // Clients that are not browsers send neither header and pass.
    assert_eq!(send(post("/v1/completions")).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_origin_json_admin_posts_pass_and_other_content_types_are_a_415() {
    let server = start(ServerOptions::default()).await;
    let own = server.base.clone();
    let load = || request(&server, Method::POST, "/admin/models/llama/load");
    for req in [
        from_page(load(), &own, "same-origin").json(&serde_json::json!({})),
        // The web app's own calls, as an older browser sends them: Origin is this host.
        load()
            .header("origin", &own)
            .header("content-type", "application/json; charset=utf-8"),
        // A user's own navigation; curl and SDKs, which send no Origin.
        load()
            .header("sec-fetch-site", "none")
            .header("content-type", "application/json"),
        load().header("content-type", "application/json"),
    ] {
        let (status, body) = send(req).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["id"], "llama");
    }
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
    ] {
        let mut req = from_page(load(), &own, "same-origin").body("{}");
        if let Some(content_type) = content_type {
            req = req.header("content-type", content_type);
        }
        let (status, body) = send(req).await;
        assert_eq!(status, 415, "{content_type:?}: {body}");
        assert_eq!(code(&body), "unsupported_media_type");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Content-Type: application/json"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_may_post_as_cors_lets_it() {
    let app = "https://app.example";
    let server = start(ServerOptions {
        allowed_origins: vec![app.into()],
        ..ServerOptions::default()
    })
    .await;
    let load = || {
        request(&server, Method::POST, "/admin/models/llama/load")
            .header("content-type", "application/json")
    };
    let res = from_page(load(), app, "cross-site").send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], app);
    assert_eq!(send(from_page(load(), EVIL, "cross-site")).await.0, 403);
}

/// A GET of `path` with `Host: host`.
async fn get_with_host(server: &TestServer, path: &str, host: &str) -> (u16, Value) {
    send(request(server, Method::GET, path).header("host", host)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_a_loopback_bind_and_accepted_when_allowed() {
    let server = start(ServerOptions::default()).await;
    let port = server.base.rsplit(':').next().unwrap().to_string();
    for host in [
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("app.localhost:{port}"),
        // A pod's address, as kubelet sends it.
        "10.0.0.7:8000".to_string(),
    ] {
        assert_eq!(
            get_with_host(&server, "/v1/models", &host).await.0,
            200,
            "{host}"
        );
    }
    for path in ["/v1/models", "/health/ready", "/admin/models", "/nope"] {
        let (status, body) = get_with_host(&server, path, &format!("evil.example:{port}")).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(code(&body), "host_not_allowed");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allowed-hosts evil.example"));
    }
    let widened = start(ServerOptions {
        allowed_hosts: AllowedHosts::from_flag(&[".example".into()]).unwrap(),
        ..ServerOptions::default()
    })
    .await;
    assert_eq!(
        get_with_host(&widened, "/v1/models", "evil.example:1")
            .await
            .0,
        200
    );
    assert_eq!(
        get_with_host(&widened, "/v1/models", "evil.test").await.0,
        403
    );
    let any = start(ServerOptions {
        allowed_hosts: AllowedHosts::Any,
        ..ServerOptions::default()
    })
    .await;
    assert_eq!(get_with_host(&any, "/v1/models", "evil.test").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_to_every_address_any_host_is_answered_so_probes_keep_working() {
    let server = start(ServerOptions {
        bind_all: true,
        ..ServerOptions::default()
    })
    .await;
    for host in [
        "10.0.0.7:8000",
        "sluice.default.svc.cluster.local:8000",
        "api.example",
    ] {
        for path in [
            "/health/live",
            "/health/ready",
            "/health/startup",
            "/metrics",
            "/v1/models",
        ] {
            assert_eq!(
                get_with_host(&server, path, host).await.0,
                200,
                "{host}{path}"
            );
        }
    }
    // With --allowed-hosts the guard is on there too; a pod's address still passes.
    let listed = start(ServerOptions {
        bind_all: true,
        allowed_hosts: AllowedHosts::from_flag(&["api.example".into()]).unwrap(),
        ..ServerOptions::default()
    })
    .await;
    assert_eq!(
        get_with_host(&listed, "/health/ready", "10.0.0.7:8000")
            .await
            .0,
        200
    );
    assert_eq!(
        get_with_host(&listed, "/v1/models", "api.example").await.0,
        200
    );
    assert_eq!(
        get_with_host(&listed, "/v1/models", "evil.example").await.0,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_admin_key_the_admin_routes_need_it_and_api_keys_do_not_open_them() {
    let server = start(ServerOptions {
        api_keys: vec!["api".into()],
        admin_key: Some("operator".into()),
        ..ServerOptions::default()
    })
    .await;
    let with_key = |method: Method, path: &str, key: Option<&str>| {
        let mut req = request(&server, method, path).header("content-type", "application/json");
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        req
    };
    for key in [Some("api"), Some("wrong"), None] {
        for (method, path) in [
            (Method::GET, "/admin/models"),
            (Method::POST, "/admin/models/llama/load"),
        ] {
            let (status, body) = send(with_key(method, path, key)).await;
            assert_eq!(status, 401, "{key:?} {path}");
            assert_eq!(code(&body), "invalid_admin_key");
            assert!(body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--admin-key"));
        }
    }
    let (status, _) = send(with_key(Method::GET, "/admin/models", Some("operator"))).await;
    assert_eq!(status, 200);
    let (status, body) = send(with_key(
        Method::POST,
        "/admin/models/llama/load",
        Some("operator"),
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    // The admin key opens the API too; the API key still does; nothing else.
    for (key, want) in [(Some("operator"), 200), (Some("api"), 200), (None, 401)] {
        assert_eq!(
            send(with_key(Method::GET, "/v1/models", key)).await.0,
            want,
            "{key:?}"
        );
    }
    let x_api_key = request(&server, Method::GET, "/admin/models").header("x-api-key", "operator");
    assert_eq!(send(x_api_key).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_key_the_admin_routes_take_the_api_keys_as_before() {
    let server = start(ServerOptions {
        api_keys: vec!["api".into()],
        ..ServerOptions::default()
    })
    .await;
    let admin = |key: Option<&str>| {
        let req = request(&server, Method::GET, "/admin/models");
        match key {
            Some(key) => req.bearer_auth(key),
            None => req,
        }
    };
    assert_eq!(send(admin(Some("api"))).await.0, 200);
    let (status, body) = send(admin(None)).await;
    assert_eq!(status, 401);
    assert_eq!(code(&body), "invalid_api_key");
}
