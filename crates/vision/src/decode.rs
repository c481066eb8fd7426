//! Image bytes to 8-bit RGB: the format guessed from the bytes (PNG, JPEG, WebP, GIF; a GIF's
//! first frame), the size read from the header and checked against a pixel limit before any
//! pixel is decoded, then colour converted as the reference processors convert it.
//!
//! What matches transformers (its `convert_to_rgb`, which both Gemma 3 processor backends call
//! on a PIL image): an image with an alpha channel, or a palette or colour with a transparent
//! entry, is composited onto opaque white with PIL's integer `alpha_composite` arithmetic (the
//! same bytes for every colour and alpha, see [`over_white`]); grayscale is repeated into
//! three channels. An EXIF orientation (JPEG, WebP, PNG) is applied, so the model sees the image
//! upright as a viewer shows it: transformers' `load_image` does the same for the URLs, paths and
//! base64 strings it opens (`ImageOps.exif_transpose`), though its processor leaves an
//! already-opened image as it is. Images with 16 bits per channel are reduced to 8 bits by the
//! `image` crate (rounding `v / 257`), where PIL would clip; no reference processor gives those a
//! meaning to equal.

use std::io::Cursor;

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

use crate::error::ImageError;

/// An 8-bit RGB image, rows top to bottom, pixels left to right, `[r, g, b]` interleaved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    /// Columns.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// `[height, width, 3]`.
    pub pixels: Vec<u8>,
}

impl RgbImage {
    /// Wraps interleaved RGB bytes; `None` unless `pixels` holds exactly `width * height` pixels.
    pub fn new(width: u32, height: u32, pixels: Vec<u8>) -> Option<Self> {
        let len = (width as usize)
            .checked_mul(height as usize)?
            .checked_mul(3)?;
        (pixels.len() == len).then_some(Self {
            width,
            height,
            pixels,
        })
    }
}

/// What [`decode`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The most pixels (width × height) an image may have, checked against the header before
    /// decoding: a small file that claims a huge image (a decompression bomb) is refused
    /// without allocating for it.
    pub max_pixels: u64,
    /// The longest width or height accepted, also from the header: resizing works row by row,
    /// so a thin image of many rows (1 × 30,000,000) costs as much as its rows times the
    /// output's width, however few its pixels.
    pub max_side: u32,
}

impl Default for DecodeLimits {
    /// 32 megapixels (a 6,000 × 5,000 photo fits; 96 MiB as RGB) and 32,768 pixels a side (a
    /// full-page screenshot of 1,280 × 25,000 fits).
    fn default() -> Self {
        Self {
            max_pixels: 32 * 1024 * 1024,
            max_side: 32 * 1024,
        }
    }
}

/// The formats [`decode`] reads.
pub const SUPPORTED_FORMATS: [&str; 4] = ["png", "jpeg", "webp", "gif"];

/// Decodes `bytes` (the format guessed from their first bytes) into 8-bit RGB, refusing images
/// over `limits` before decoding them.
pub fn decode(bytes: &[u8], limits: DecodeLimits) -> Result<RgbImage, ImageError> {
    let format = guess_format(bytes)?;
    if format == ImageFormat::Jpeg && !jpeg_has_end(bytes) {
        // The JPEG decoder fills missing scan data with gray; a cut-off upload is an error.
        return Err(ImageError::Undecodable("the JPEG data is truncated".into()));
    }
    let (width, height) = reader(bytes, format)
        .into_dimensions()
        .map_err(|e| ImageError::Undecodable(e.to_string()))?;
    let pixels = u64::from(width) * u64::from(height);
    if pixels > limits.max_pixels || width.max(height) > limits.max_side {
        return Err(ImageError::TooLarge {
            width,
            height,
            max_pixels: limits.max_pixels,
            max_side: limits.max_side,
        });
    }
    if pixels == 0 {
        return Err(ImageError::Undecodable(format!(
            "the image is {width}x{height}"
        )));
    }
    let mut reader = reader(bytes, format);
    // The header's size was checked; the decoder holds to it too (a GIF frame or a malformed
    // file could claim more later), with room for 16-bit channels and its own buffers.
    let mut decoder_limits = Limits::default();
    decoder_limits.max_image_width = Some(width);
    decoder_limits.max_image_height = Some(height);
    decoder_limits.max_alloc = Some(pixels.saturating_mul(16).max(1 << 20));
    reader.limits(decoder_limits);
    let undecodable = |e: image::ImageError| match e {
        image::ImageError::Limits(e) => {
            ImageError::Undecodable(format!("the image needs more than its header says ({e})"))
        }
        e => ImageError::Undecodable(e.to_string()),
    };
    let mut decoder = reader.into_decoder().map_err(undecodable)?;
    // Unreadable metadata leaves the image as stored rather than refusing it.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(undecodable)?;
    image.apply_orientation(orientation);
    Ok(to_rgb(image))
}

/// Whether a JPEG's last scan is followed by an end-of-image marker. Scan data stuffs a zero
/// after every 0xFF byte, so `FF D9` after the last start-of-scan (`FF DA`) is the end of the
/// image (an embedded thumbnail's end comes before the main scan).
fn jpeg_has_end(bytes: &[u8]) -> bool {
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]);
    last_scan.is_some_and(|scan| bytes[scan..].windows(2).any(|w| w == [0xFF, 0xD9]))
}

/// The format of `bytes` from their signature, if it is one [`decode`] reads.
fn guess_format(bytes: &[u8]) -> Result<ImageFormat, ImageError> {
    match image::guess_format(bytes) {
        Ok(f @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif)) => {
            Ok(f)
        }
        Ok(other) => Err(ImageError::UnsupportedFormat(
            other
                .extensions_str()
                .first()
                .unwrap_or(&"unknown")
                .to_string(),
        )),
        Err(_) => Err(ImageError::UnsupportedFormat("unknown".into())),
    }
}

fn reader(bytes: &[u8], format: ImageFormat) -> ImageReader<Cursor<&[u8]>> {
    ImageReader::with_format(Cursor::new(bytes), format)
}

/// Any decoded image as 8-bit RGB, alpha composited onto white.
fn to_rgb(image: DynamicImage) -> RgbImage {
    let (width, height) = (image.width(), image.height());
    let pixels = match image {
        DynamicImage::ImageRgb8(rgb) => rgb.into_raw(),
        DynamicImage::ImageLuma8(gray) => gray.into_raw().iter().flat_map(|&v| [v; 3]).collect(),
        DynamicImage::ImageLumaA8(gray) => (gray.into_raw().chunks_exact(2))
            .flat_map(|p| [over_white(p[0], p[1]); 3])
            .collect(),
        DynamicImage::ImageRgba8(rgba) => composite_rgba(&rgba.into_raw()),
        other if other.color().has_alpha() => composite_rgba(&other.to_rgba8().into_raw()),
        other => other.to_rgb8().into_raw(),
    };
    RgbImage {
        width,
        height,
        pixels,
    }
}

fn composite_rgba(rgba: &[u8]) -> Vec<u8> {
    (rgba.chunks_exact(4))
        .flat_map(|p| {
            [
                over_white(p[0], p[3]),
                over_white(p[1], p[3]),
                over_white(p[2], p[3]),
            ]
        })
        .collect()
}

/// One channel `value` with opacity `alpha` composited onto opaque white, with PIL's integer
/// `ImagingAlphaComposite` arithmetic (7 extra bits of precision, divisions by 255 as two
/// shifts): equal to `Image.alpha_composite(white, image)` for all 65,536 pairs.
pub fn over_white(value: u8, alpha: u8) -> u8 {
    const PRECISION_BITS: u32 = 7;
    let (src, alpha) = (u32::from(value), u32::from(alpha));
    if alpha == 0 {
        return 255;
    }
    // With an opaque white destination, PIL's blend terms reduce to these.
    let out_alpha_255 = alpha * 255 + 255 * (255 - alpha);
    let coef1 = alpha * 255 * 255 * (1 << PRECISION_BITS) / out_alpha_255;
    let coef2 = 255 * (1 << PRECISION_BITS) - coef1;
    let t = src * coef1 + 255 * coef2 + (0x80 << PRECISION_BITS);
    ((((t >> 8) + t) >> 8) >> PRECISION_BITS) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_and_transparent_pixels_composite_to_themselves_and_white() {
        for v in 0..=255u8 {
            assert_eq!(over_white(v, 255), v);
            assert_eq!(over_white(v, 0), 255);
        }
        // PIL: alpha_composite(white, (0, 0, 0, 128)) is 127.
        assert_eq!(over_white(0, 128), 127);
    }

    #[test]
    fn bytes_of_no_known_format_are_unsupported() {
        let err = decode(b"hello, this is text", DecodeLimits::default()).unwrap_err();
        assert!(matches!(err, ImageError::UnsupportedFormat(_)), "{err}");
        // A BMP signature is recognised but not read.
        let err = decode(b"BM\0\0\0\0\0\0\0\0\0\0\0\0\0\0", DecodeLimits::default()).unwrap_err();
        assert_eq!(err, ImageError::UnsupportedFormat("bmp".into()));
    }
}
