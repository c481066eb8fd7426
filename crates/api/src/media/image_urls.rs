//! The `http(s)` image URLs of a request, fetched and replaced in place by `data:` URLs of the
//! bytes their hosts served, before validation reads them. Validation then sees only inline
//! images, and what a stored Responses turn keeps is the image this turn saw: a later
//! `previous_response_id` never fetches the URL again (its host might serve another image).

use futures_util::future::try_join_all;
use serde_json::Value;

use super::fetch::MediaFetcher;
use crate::error::ApiError;
use crate::scoring::base64;
use crate::validate::images::{image_error, MAX_IMAGES_PER_REQUEST};
use crate::wire::chat::{ChatMessage, MessageContent};
use crate::wire::messages::{AnthropicContent, AnthropicMessage};
use crate::wire::responses::{ResponseInput, ResponsesRequest};

/// Where an image URL is in a request (its part, as validation names it) and the JSON
/// string holding it.
type UrlSlot<'a> = (String, &'a mut Value);

impl MediaFetcher {
    /// Fetches the image URLs of chat messages (`messages[i].content[j].image_url`).
    pub async fn fetch_chat_images(
        &self,
        messages: &mut [ChatMessage],
        takes_images: bool,
    ) -> Result<(), ApiError> {
        let mut slots = Vec::new();
        for (i, message) in messages.iter_mut().enumerate() {
            let Some(MessageContent::Parts(parts)) = message.content.as_mut() else {
                continue;
            };
            for (j, part) in parts.iter_mut().enumerate() {
                let url = match part.image_url.as_mut() {
                    Some(Value::Object(fields)) => fields.get_mut("url"),
                    other => other,
                };
                if part.kind == "image_url" {
                    if let Some(url) = url {
                        slots.push((format!("messages[{i}].content[{j}].image_url"), url));
                    }
                }
            }
        }
        self.replace_urls(slots, takes_images).await
    }

    /// Fetches the image URLs of an Anthropic request's user messages
    /// (`messages[i].content[j].source.url` of `{"type": "url"}` sources).
    pub async fn fetch_message_images(
        &self,
        messages: &mut [AnthropicMessage],
        takes_images: bool,
    ) -> Result<(), ApiError> {
        let mut slots = Vec::new();
        for (i, message) in messages.iter_mut().enumerate() {
            let AnthropicContent::Blocks(blocks) = &mut message.content else {
                continue;
            };
            if message.role != "user" {
                continue;
            }
            for (j, block) in blocks.iter_mut().enumerate() {
                let Some(Value::Object(source)) = block.source.as_mut() else {
                    continue;
                };
                if block.kind != "image"
                    || source.get("type").and_then(Value::as_str) != Some("url")
                {
                    continue;
                }
                if let Some(url) = source.get_mut("url") {
                    slots.push((format!("messages[{i}].content[{j}].source.url"), url));
                }
            }
        }
        self.replace_urls(slots, takes_images).await
    }

    /// Fetches the image URLs of a Responses request's user messages
    /// (`input[i].content[j].image_url` of `input_image` parts).
    pub async fn fetch_response_images(
        &self,
        req: &mut ResponsesRequest,
        takes_images: bool,
    ) -> Result<(), ApiError> {
        let Some(ResponseInput::Items(items)) = req.input.as_mut() else {
            return Ok(());
        };
        let mut slots = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            if item.role.as_deref() != Some("user") {
                continue;
            }
            let Some(Value::Array(parts)) = item.content.as_mut() else {
                continue;
            };
            for (j, part) in parts.iter_mut().enumerate() {
                if part.get("type").and_then(Value::as_str) != Some("input_image") {
                    continue;
                }
                if let Some(url) = part.get_mut("image_url") {
                    slots.push((format!("input[{i}].content[{j}].image_url"), url));
                }
            }
        }
        self.replace_urls(slots, takes_images).await
    }

    /// Fetches every `http(s)` URL among `slots` at once and puts a data URL of each image in
    /// its place. Without an allow-list nothing is fetched (validation refuses the URLs), nor
    /// for a model that takes no images or past the request's image limit: those 400s come
    /// before any fetch.
    async fn replace_urls(
        &self,
        slots: Vec<UrlSlot<'_>>,
        takes_images: bool,
    ) -> Result<(), ApiError> {
        let mut slots: Vec<_> = (slots.into_iter())
            .filter(|(_, url)| url.as_str().is_some_and(is_http))
            .collect();
        let Some((first, _)) = slots.first() else {
            return Ok(());
        };
        if !self.enabled() {
            return Ok(());
        }
        if !takes_images {
            return Err(image_error(
                first,
                "this model does not take images (it has no image encoder); send text only",
            ));
        }
        if slots.len() > MAX_IMAGES_PER_REQUEST {
            return Err(image_error(
                &slots[MAX_IMAGES_PER_REQUEST].0,
                format!(
                    "a request may carry at most {MAX_IMAGES_PER_REQUEST} images, got at least {}",
                    slots.len()
                ),
            ));
        }
        let fetches =
            (slots.iter()).map(|(part, url)| self.fetch(url.as_str().unwrap_or(""), part));
        let images = try_join_all(fetches).await?;
        for ((_, url), image) in slots.iter_mut().zip(images) {
            **url = Value::String(format!(
                "data:{};base64,{}",
                image.mime,
                base64(&image.bytes)
            ));
        }
        Ok(())
    }
}

/// Whether `url` is an `http` or `https` URL (any case).
pub fn is_http(url: &str) -> bool {
    let head = url
        .trim_start()
        .get(..8)
        .unwrap_or(url)
        .to_ascii_lowercase();
    head.starts_with("http://") || head.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::media::MediaFetchConfig;
    use crate::wire::messages::MessagesRequest;

    fn fetcher(allowed: &[&str]) -> MediaFetcher {
        MediaFetcher::new(MediaFetchConfig {
            allowed_domains: allowed.iter().map(|s| s.to_string()).collect(),
            ..MediaFetchConfig::default()
        })
    }

    /// The part a 400 names.
    fn param(err: ApiError) -> String {
        match err {
            ApiError::InvalidRequest { param, .. } => param.unwrap_or_default(),
            other => panic!("not a 400: {other}"),
        }
    }

    const URL: &str = "http://images.test/a.png";

    fn chat_messages(parts: Value) -> Vec<ChatMessage> {
        serde_json::from_value(json!([{"role": "user", "content": parts}])).unwrap()
    }

    #[tokio::test]
    async fn each_protocols_url_parts_are_found_and_named_before_any_fetch() {
        // A model without images refuses the first URL part before fetching it.
        let f = fetcher(&["images.test"]);
        let mut chat = chat_messages(json!([
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": URL}]));
        let err = f.fetch_chat_images(&mut chat, false).await.unwrap_err();
        assert_eq!(param(err), "messages[0].content[2].image_url");

        let mut messages: MessagesRequest = serde_json::from_value(json!({
            "model": "m", "max_tokens": 1, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yes"},
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "url", "url": URL}}]}]}))
        .unwrap();
        let err = (f.fetch_message_images(&mut messages.messages, false).await).unwrap_err();
        assert_eq!(param(err), "messages[2].content[0].source.url");

        let mut responses: ResponsesRequest = serde_json::from_value(json!({
            "model": "m", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "a"},
                {"type": "input_image", "image_url": URL}]}]}))
        .unwrap();
        let err = (f.fetch_response_images(&mut responses, false).await).unwrap_err();
        assert_eq!(param(err), "input[0].content[1].image_url");
    }

    #[tokio::test]
    async fn more_urls_than_a_request_may_carry_are_refused_unfetched() {
        let parts: Vec<Value> = (0..=MAX_IMAGES_PER_REQUEST)
            .map(|_| json!({"type": "image_url", "image_url": {"url": URL}}))
            .collect();
        let mut chat = chat_messages(Value::Array(parts));
        let err = (fetcher(&["images.test"])
            .fetch_chat_images(&mut chat, true)
            .await)
            .unwrap_err();
        let at = format!("messages[0].content[{MAX_IMAGES_PER_REQUEST}].image_url");
        assert_eq!(param(err), at);
    }

    #[tokio::test]
    async fn without_an_allow_list_urls_are_left_for_validation_to_refuse() {
        let parts = json!([{"type": "image_url", "image_url": {"url": URL}}]);
        let mut chat = chat_messages(parts.clone());
        fetcher(&[])
            .fetch_chat_images(&mut chat, true)
            .await
            .unwrap();
        let Some(MessageContent::Parts(after)) = &chat[0].content else {
            panic!("parts")
        };
        assert_eq!(after[0].image_url, Some(json!({"url": URL})));
    }

    #[test]
    fn http_urls_are_told_from_others_in_any_case() {
        assert!(is_http("http://a/b") && is_http(" HTTPS://a/b"));
        assert!(!is_http("data:image/png;base64,") && !is_http("ftp://a") && !is_http("http"));
    }
}
