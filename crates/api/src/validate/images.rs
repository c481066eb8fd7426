//! Images in a request: where each came from (the part, for error messages) and its bytes,
//! read from a `data:` URL or base64 text. Nothing is fetched here: the URLs of hosts in
//! `--allowed-media-domains` were fetched and replaced by data URLs before validation
//! ([`crate::media`]); an `http(s)` URL still here is refused, since the server has no
//! allow-list.

use std::sync::Arc;

use crate::error::ApiError;

/// Most images one request may carry (vLLM's default `--limit-mm-per-prompt` is per modality
/// and unbounded; a bound keeps one request from queueing minutes of encoding).
pub const MAX_IMAGES_PER_REQUEST: usize = 16;

/// One image of a request, its bytes not yet decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePart {
    /// Where it is in the request, e.g. `messages[0].content[1]`; 400s name it.
    pub part: String,
    /// The encoded image (PNG, JPEG, WebP or GIF).
    pub bytes: Arc<[u8]>,
}

/// A 400 about the image at `part`; the message names it too, for protocols whose errors
/// carry no parameter (Anthropic's).
pub fn image_error(part: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(part, format!("{part}: {message}"))
}

/// The image a URL holds: a `data:` URL's base64 payload (an allowed `http(s)` URL is one
/// by now). `part` names where it was sent.
pub fn image_from_url(url: &str, part: &str) -> Result<ImagePart, ApiError> {
    let url = url.trim();
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err(image_error(
            part,
            "image URLs are not fetched (this server has no --allowed-media-domains); send the \
             image inline as a data URL: data:image/png;base64,...",
        ));
    }
    let Some(rest) = url.strip_prefix("data:") else {
        return Err(image_error(
            part,
            "an image URL must be a data URL: data:image/png;base64,...",
        ));
    };
    let Some((header, payload)) = rest.split_once(',') else {
        return Err(image_error(part, "a data URL needs a ',' before its data"));
    };
    if !header.to_ascii_lowercase().ends_with(";base64") {
        return Err(image_error(
            part,
            "an image data URL must be base64: data:image/png;base64,...",
        ));
    }
    image_from_base64(payload, part)
}

/// An image sent as base64 text (Anthropic's `source.data`).
pub fn image_from_base64(data: &str, part: &str) -> Result<ImagePart, ApiError> {
    let bytes = decode_base64(data)
        .ok_or_else(|| image_error(part, "the image data is not valid base64"))?;
    if bytes.is_empty() {
        return Err(image_error(part, "the image data is empty"));
    }
    Ok(ImagePart {
        part: part.to_string(),
        bytes: bytes.into(),
    })
}

/// Standard base64 (RFC 4648 §4), padding optional, ASCII whitespace ignored as browsers do;
/// `None` for any other character or a dangling bit group.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut padding = 0;
    for &c in text.as_bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\t' | b'\n' | b'\r' => continue,
            _ => return None,
        };
        if padding > 0 {
            return None;
        }
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be the zero fill of a partial group (2 or 4 bits), never 6.
    (bits < 6 && padding <= 2).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_or_without_padding() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVs\nbG8h").unwrap(), b"hello!");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert!(decode_base64("aGVsbG8*").is_none());
        assert!(decode_base64("a").is_none());
        assert!(decode_base64("aG=Vs").is_none());
    }

    #[test]
    fn a_data_url_gives_its_bytes_and_an_http_url_is_refused_without_fetching() {
        let image = image_from_url("data:image/png;base64,iVBORw==", "p").unwrap();
        assert_eq!(&image.bytes[..], &[0x89, b'P', b'N', b'G']);
        assert_eq!(image.part, "p");
        for url in [
            "https://example.com/a.png",
            "HTTP://x/y",
            "file:///etc/passwd",
        ] {
            let err = image_from_url(url, "messages[0].content[1]").unwrap_err();
            assert!(err.to_string().contains("data URL"), "{url}: {err}");
        }
        assert!(image_from_url("data:image/png,abc", "p").is_err());
        assert!(image_from_url("data:image/png;base64,", "p").is_err());
    }
}
