//! The errors of image input, typed so that the API layer can name the part at fault (each is a
//! client error: the bytes or the configuration, never the server).

use thiserror::Error;

/// Why an image was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImageError {
    /// The bytes are not in a format sluice reads (named by its usual extension, or `unknown`).
    #[error("unsupported image format `{0}`: expected one of png, jpeg, webp, gif")]
    UnsupportedFormat(String),
    /// The bytes claim a format but cannot be decoded (truncated, corrupt).
    #[error("the image could not be decoded: {0}")]
    Undecodable(String),
    /// The header announces more pixels, or a longer side, than allowed; nothing was decoded.
    #[error(
        "the image is {width}x{height} pixels; at most {max_pixels} pixels and {max_side} per side are accepted"
    )]
    TooLarge {
        /// Columns the header announces.
        width: u32,
        /// Rows the header announces.
        height: u32,
        /// The limit on width × height.
        max_pixels: u64,
        /// The limit on either side.
        max_side: u32,
    },
    /// The image is too thin for a processor that keeps the aspect ratio (Qwen2-VL's refuses
    /// one side over 200 times the other, and a side that resizes to nothing).
    #[error("the image is {width}x{height} pixels; its aspect ratio is beyond what the model's processor accepts (200:1)")]
    AspectRatio {
        /// Columns.
        width: u32,
        /// Rows.
        height: u32,
    },
}

/// Why a processor configuration cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file is missing or unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not the JSON expected.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The configuration asks for processing sluice does not implement.
    #[error("{path}: unsupported image processing: {what}")]
    Unsupported {
        /// The file.
        path: std::path::PathBuf,
        /// Which setting.
        what: String,
    },
}
