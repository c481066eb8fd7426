//! Responses `input_image` parts (`{"type": "input_image", "image_url": "data:..."}`) in a
//! user message, and the images of a stored conversation, read again for the next turn.

use serde_json::{json, Value};

use crate::error::ApiError;
use crate::validate::images::{image_error, image_from_url, ImagePart};
use crate::wire::chat::ContentPart;

/// Whether a message's content holds an image.
pub(super) fn has_images(content: Option<&Value>) -> bool {
    let kind = |p: &Value| p.get("type").and_then(Value::as_str) == Some("input_image");
    matches!(content, Some(Value::Array(parts)) if parts.iter().any(kind))
}

/// A user message's parts as chat parts, each image read (a 400 names it by `field[j]`).
pub(super) fn input_parts(parts: &[Value], field: &str) -> Result<Vec<ContentPart>, ApiError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{field}[{j}]");
        let text = part.get("text").and_then(Value::as_str);
        match (part.get("type").and_then(Value::as_str), text) {
            (Some("input_text" | "text"), Some(text)) => out.push(ContentPart {
                kind: "text".into(),
                text: Some(text.to_string()),
                ..ContentPart::default()
            }),
            (Some("input_image"), _) => {
                let Some(url) = part.get("image_url").and_then(Value::as_str) else {
                    let why = match part.get("file_id") {
                        Some(_) => {
                            "images by file_id are not supported (no Files API); send \
                                    image_url as a data URL"
                        }
                        None => "an input_image needs image_url (a data URL)",
                    };
                    return Err(image_error(&format!("{at}.image_url"), why));
                };
                let image = image_from_url(url, &format!("{at}.image_url"))?;
                out.push(ContentPart {
                    kind: "image_url".into(),
                    image_url: Some(json!(url)),
                    decoded: Some(image),
                    ..ContentPart::default()
                });
            }
            (kind, _) => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    format!(
                        "a user message's parts must be input_text or input_image, got '{}'",
                        kind.unwrap_or("(missing)")
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// The images of a stored conversation (template-form messages whose image parts kept their
/// URL), in order; read again, they are named by `param`. Each is a data URL: an `http(s)`
/// image was fetched and replaced by one before its turn was validated, so a later turn sees
/// the bytes that turn saw, never a second fetch.
pub(super) fn stored_images(
    conversation: &[Value],
    param: &str,
) -> Result<Vec<ImagePart>, ApiError> {
    let parts = (conversation.iter())
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("image"));
    parts
        .map(|p| match p.get("url").and_then(Value::as_str) {
            Some(url) => image_from_url(url, param),
            None => Err(image_error(
                param,
                "a stored image has no data to read again",
            )),
        })
        .collect()
}
