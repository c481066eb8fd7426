//! `GET /v1/responses/{id}/input_items` (the OpenAI SDK's `responses.input_items.list`): the
//! input items of a stored response, as an OpenAI list page.
//!
//! The store keeps a response's conversation once, template-ready
//! ([`StoredResponse::input`]); the items are that conversation's tail from
//! [`StoredResponse::input_start`] (the request's own input, not the turns of its
//! `previous_response_id`), turned back into Responses items when asked for. An item's id is
//! derived from the response's id and the item's place, so a page's `last_id` names the same
//! item on the next call (`after`).

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::responses_store::StoredResponse;
use crate::AppState;

/// Items per page unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 20;
/// The most items a page holds.
const MAX_LIMIT: usize = 100;

/// Lists a stored response's input items: `limit` (1 to 100, default 20), `order` (`asc` or
/// `desc`, default `desc`), `after` (an item id: the items after it in that order; after an id
/// the response does not have, none; empty: from the start); `include` and any other
/// parameter are ignored. Another caller's response is a 404.
pub async fn list_input_items(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let page = PageQuery::parse(&query)?;
    let stored = state
        .responses
        .get(&id, caller.key)
        .ok_or(ApiError::ResponseNotFound(id.clone()))?;
    let items = input_items(&id, &stored)?;
    Ok(Json(page.list(items)).into_response())
}

/// What page of the items a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PageQuery {
    limit: usize,
    descending: bool,
    after: Option<String>,
}

impl PageQuery {
    /// The page `query` names (the last of a repeated parameter counts).
    fn parse(query: &[(String, String)]) -> Result<Self, ApiError> {
        let mut page = PageQuery {
            limit: DEFAULT_LIMIT,
            descending: true,
            after: None,
        };
        for (name, value) in query {
            match name.as_str() {
                "limit" => {
                    page.limit = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            ApiError::invalid(
                                "limit",
                                format!(
                                    "limit must be an integer from 1 to {MAX_LIMIT}, got '{value}'"
                                ),
                            )
                        })?;
                }
                "order" => {
                    page.descending = match value.as_str() {
                        "asc" => false,
                        "desc" => true,
                        other => {
                            return Err(ApiError::invalid(
                                "order",
                                format!("order must be asc or desc, got '{other}'"),
                            ))
                        }
                    }
                }
                "after" => page.after = Some(value.clone()).filter(|id| !id.is_empty()),
                _ => {}
            }
        }
        Ok(page)
    }

    /// The page of `items` (in input order) as an OpenAI list.
    fn list(&self, mut items: Vec<Value>) -> Value {
        if self.descending {
            items.reverse();
        }
        // Nothing follows an item that is not there: an empty page, as a cursor past the end.
        let start = match &self.after {
            None => 0,
            Some(after) => items
                .iter()
                .position(|item| item["id"].as_str() == Some(after))
                .map_or(items.len(), |at| at + 1),
        };
        let rest = items.len() - start;
        let data: Vec<Value> = items.into_iter().skip(start).take(self.limit).collect();
        json!({
            "object": "list",
            "first_id": data.first().map(|item| item["id"].clone()),
            "last_id": data.last().map(|item| item["id"].clone()),
            "has_more": rest > data.len(),
            "data": data,
        })
    }
}

/// The request's own input of the response stored under `id`, as Responses items in order.
fn input_items(id: &str, stored: &StoredResponse) -> Result<Vec<Value>, ApiError> {
    let messages = stored
        .input
        .as_array()
        .and_then(|all| all.get(stored.input_start..))
        .ok_or_else(|| ApiError::Internal("a stored response's input is malformed".into()))?;
    let stem = id.strip_prefix("resp_").unwrap_or(id);
    let mut items = Vec::with_capacity(messages.len());
    for message in messages {
        message_items(message, &mut items);
    }
    for (n, item) in items.iter_mut().enumerate() {
        let prefix = match item["type"].as_str() {
            Some("function_call") => "fc",
            Some("function_call_output") => "fco",
            Some("reasoning") => "rs",
            _ => "msg",
        };
        item["id"] = json!(format!("{prefix}_{stem}_{n}"));
    }
    Ok(items)
}

/// The Responses items one template-form message stands for (without ids): an assistant
/// turn is its reasoning, its text and its calls, as the input items it was made of.
fn message_items(message: &Value, items: &mut Vec<Value>) {
    let text = message["content"].as_str().unwrap_or_default();
    match message["role"].as_str().unwrap_or_default() {
        "assistant" => {
            if let Some(reasoning) = message["reasoning_content"].as_str() {
                items.push(json!({"type": "reasoning", "summary": [],
                    "content": [{"type": "reasoning_text", "text": reasoning}]}));
            }
            if !text.is_empty() {
                items.push(
                    json!({"type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}),
                );
            }
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                // Templates get parsed arguments; the wire carries them as a JSON string.
                let arguments = match &call["function"]["arguments"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                items.push(json!({"type": "function_call", "status": "completed",
                    "call_id": call["id"], "name": call["function"]["name"],
                    "arguments": arguments}));
            }
        }
        "tool" => items.push(
            json!({"type": "function_call_output", "status": "completed",
            "call_id": message["tool_call_id"], "output": text}),
        ),
        role => items.push(
            json!({"type": "message", "role": role, "status": "completed",
            "content": input_content(message)}),
        ),
    }
}

/// A user or system message's content parts: its text, or (a message with images, whose
/// content stayed a list) each part in order, an image with the data URL it was sent as.
fn input_content(message: &Value) -> Value {
    let Some(parts) = message["content"].as_array() else {
        let text = message["content"].as_str().unwrap_or_default();
        return json!([{"type": "input_text", "text": text}]);
    };
    let part = |p: &Value| match p["type"].as_str() {
        Some("image") => json!({"type": "input_image", "detail": "auto", "image_url": p["url"]}),
        _ => json!({"type": "input_text", "text": p["text"]}),
    };
    Value::Array(parts.iter().map(part).collect())
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn stored(input: Value, input_start: usize) -> StoredResponse {
        StoredResponse {
            input,
            input_start,
            output: json!([]),
            body: json!({}),
            created: Instant::now(),
            owner: None,
        }
    }

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn items_are_the_requests_own_input_turned_back_into_responses_items() {
        let input = json!([
            {"role": "user", "content": "earlier turn"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "reasoning_content": "need a tool",
             "tool_calls": [{"id": "call_a", "type": "function",
                             "function": {"name": "get", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "-3C"},
        ]);
        let items = input_items("resp_abc", &stored(input, 2)).unwrap();
        let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "message",
                "reasoning",
                "function_call",
                "function_call_output"
            ]
        );
        assert_eq!(items[0]["role"], "system");
        assert_eq!(
            items[1]["content"][0],
            json!({"type": "input_text", "text": "weather?"})
        );
        assert_eq!(items[2]["content"][0]["text"], "need a tool");
        assert_eq!(items[3]["call_id"], "call_a");
        assert_eq!(items[3]["arguments"], r#"{"city":"Oslo"}"#);
        assert_eq!(items[4]["output"], "-3C");
        let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(
            ids,
            [
                "msg_abc_0",
                "msg_abc_1",
                "rs_abc_2",
                "fc_abc_3",
                "fco_abc_4"
            ]
        );
    }

    #[test]
    fn a_start_past_the_input_is_an_internal_error_not_a_panic() {
        let bad = stored(json!([{"role": "user", "content": "x"}]), 2);
        assert!(matches!(
            input_items("resp_x", &bad),
            Err(ApiError::Internal(_))
        ));
    }

    fn numbered(n: usize) -> Vec<Value> {
        (0..n).map(|i| json!({"id": format!("i{i}")})).collect()
    }

    fn ids(page: &Value) -> Vec<&str> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn pages_go_newest_first_by_default_and_follow_after() {
        let page = PageQuery::parse(&query(&[("limit", "2"), ("include[]", "x")])).unwrap();
        let first = page.list(numbered(5));
        assert_eq!(ids(&first), ["i4", "i3"]);
        assert_eq!(first["first_id"], "i4");
        assert_eq!(first["last_id"], "i3");
        assert_eq!(first["has_more"], true);
        let next = PageQuery::parse(&query(&[("limit", "2"), ("after", "i1")])).unwrap();
        let last = next.list(numbered(5));
        assert_eq!(ids(&last), ["i0"]);
        assert_eq!(last["has_more"], false);
        let asc = PageQuery::parse(&query(&[("order", "asc"), ("after", "i3")])).unwrap();
        assert_eq!(ids(&asc.list(numbered(5))), ["i4"]);
        let all = PageQuery::parse(&[]).unwrap().list(numbered(25));
        assert_eq!(ids(&all).len(), DEFAULT_LIMIT);
        let empty = PageQuery::parse(&[]).unwrap().list(Vec::new());
        assert_eq!(empty["first_id"], Value::Null);
        assert_eq!(empty["has_more"], false);
    }

    #[test]
    fn out_of_range_parameters_are_400s() {
        for (name, value) in [
            ("limit", "0"),
            ("limit", "101"),
            ("limit", "ten"),
            ("order", "up"),
        ] {
            assert!(
                PageQuery::parse(&query(&[(name, value)])).is_err(),
                "{name}={value}"
            );
        }
        assert_eq!(
            PageQuery::parse(&query(&[("limit", "100")])).unwrap().limit,
            100
        );
    }

    #[test]
    fn after_an_unknown_item_is_an_empty_page_and_an_empty_after_none() {
        let page = PageQuery::parse(&query(&[("after", "nope")])).unwrap();
        let empty = page.list(numbered(3));
        assert_eq!(ids(&empty), Vec::<&str>::new());
        assert_eq!(empty["has_more"], false);
        let page = PageQuery::parse(&query(&[("after", "")])).unwrap();
        assert_eq!(page.after, None);
        assert_eq!(ids(&page.list(numbered(2))), ["i1", "i0"]);
    }
}
