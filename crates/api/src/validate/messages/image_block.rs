//! Anthropic `image` blocks: `{"type": "image", "source": {"type": "base64", "media_type":
//! "image/png", "data": "..."}}`, or a `url` source (a data URL, or an `http(s)` URL of an
//! allowed host, fetched into one already: [`crate::media`]), as the chat content part the rest
//! of the pipeline takes.

use serde_json::Value;

use crate::error::ApiError;
use crate::validate::images::{image_error, image_from_base64, image_from_url};
use crate::wire::chat::ContentPart;
use crate::wire::messages::ContentBlock;

/// The chat part of the image block `block`, found at `at` (`messages[i].content[j]`), its
/// bytes already read (so a 400 names the block where the client sent it).
pub(super) fn image_part(block: &ContentBlock, at: &str) -> Result<ContentPart, ApiError> {
    let source = block
        .source
        .as_ref()
        .filter(|s| s.is_object())
        .ok_or_else(|| {
            image_error(
                &format!("{at}.source"),
                "an image block needs a 'source' object",
            )
        })?;
    let field = |name: &str| source.get(name).and_then(Value::as_str);
    let image = match field("type") {
        Some("base64") => {
            let data = field("data").ok_or_else(|| {
                image_error(&format!("{at}.source.data"), "a base64 source needs 'data'")
            })?;
            image_from_base64(data, &format!("{at}.source.data"))?
        }
        Some("url") => image_from_url(field("url").unwrap_or(""), &format!("{at}.source.url"))?,
        other => {
            return Err(image_error(
                &format!("{at}.source.type"),
                format!(
                    "an image source must be base64 or url; got '{}'",
                    other.unwrap_or("(missing)")
                ),
            ))
        }
    };
    Ok(ContentPart {
        kind: "image_url".into(),
        text: None,
        image_url: None,
        decoded: Some(image),
    })
}

/// A chat text part.
pub(super) fn text_part(text: &str) -> ContentPart {
    ContentPart {
        kind: "text".into(),
        text: Some(text.to_string()),
        image_url: None,
        decoded: None,
    }
}
