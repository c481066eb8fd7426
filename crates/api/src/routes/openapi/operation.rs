//! One operation of the document: its body, its success answer and the error answers a
//! protected route lists.

use serde_json::{json, Value};

/// The error answers every protected operation lists.
pub(super) fn error_responses() -> Value {
    let err = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let with = |description: &str| {
        let mut e = err.clone();
        e["description"] = json!(description);
        e
    };
    json!({
        "400": with("Invalid request (bad field, malformed JSON, wrong content type, context exceeded, a token id outside the vocabulary)"),
        "401": with("Missing or wrong API key"),
        "404": with("Unknown model"),
        "408": with("Body not received within the read deadline"),
        "413": with("Body too large"),
        "429": with("Queue full; see the Retry-After header"),
        "500": with("Engine failure"),
        "503": with("Engine not running")
    })
}

/// A required JSON body of the named schema.
fn json_body(schema: &str) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

/// A 200 answer with a JSON body of `schema`.
pub(super) fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

/// A protected `POST` taking the `request` schema and answering `response` (or events, when
/// it `streams`).
pub(super) fn post(summary: &str, request: &str, response: &str, streams: bool) -> Value {
    let mut responses = error_responses();
    let mut success = ok(
        summary,
        json!({"$ref": format!("#/components/schemas/{response}")}),
    );
    if streams {
        // One server-sent event (what SSE-aware tools validate each event against): `data:` a
        // chunk's JSON (then `[DONE]` on the OpenAI routes), `event:` its name where the API
        // names events (Responses, Messages).
        success["content"]["text/event-stream"] = json!({"schema": {"type": "object",
            "required": ["data"], "properties": {
                "data": {"type": "string", "description": "a chunk's JSON, or [DONE]"},
                "event": {"type": "string"}, "id": {"type": "string"},
                "retry": {"type": "integer"}},
            "description": "data: <chunk JSON> events (event: <name> where the API names them), then data: [DONE] on the OpenAI routes"}});
    }
    responses["200"] = success;
    json!({"post": {"summary": summary, "security": [{"bearer": []}, {"apiKey": []}], "requestBody": json_body(request), "responses": responses}})
}

/// `POST /admin/models/{model}/load|unload`: an empty JSON body (the type is required, the
/// body not read), the model's admin view back.
/// An admin model action: its 409 (where the model's state can refuse it) and, for actions that
/// load, the load's own failures.
pub(super) fn admin_action(summary: &str, conflict: Option<&str>, loads: bool) -> Value {
    let errors = error_responses();
    let error = |description: &str| {
        json!({"description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let mut responses = json!({
        "200": ok(summary, json!({"$ref": "#/components/schemas/AdminModel"})),
        "401": error("Missing or wrong key: the --admin-key key when set (invalid_admin_key), else an API key"),
        "403": error("A browser's request from another origin (cross_origin_request), or a Host the server does not answer to (host_not_allowed)"),
        "404": errors["404"].clone(),
        "415": error("Not Content-Type: application/json (unsupported_media_type)")});
    if let Some(conflict) = conflict {
        responses["409"] = error(conflict);
    }
    if loads {
        responses["500"] = error("The model's files could not be loaded");
        responses["503"] =
            error("The model does not fit the memory budget, or the server is stopping");
    }
    json!({"post": {"summary": summary, "security": [{"bearer": []}, {"apiKey": []}],
        "parameters": [{"name": "model", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "description": "Content-Type: application/json is required (a browser cannot send it cross-site without a preflight); the body is not read: send {} (or nothing)",
            "content": {"application/json": {"schema": {}}}},
        "responses": responses}})
}

/// A health probe: no key, 200 or 503 with a `Probe` body (the status, and why not).
pub(super) fn probe(summary: &str, healthy: &str, unhealthy: &str) -> Value {
    let body = |description: &str| {
        json!({"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Probe"}}}})
    };
    json!({"get": {"summary": summary, "responses": {"200": body(healthy), "503": body(unhealthy)}}})
}
