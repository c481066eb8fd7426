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
    /// The header announces more pixels than allowed; nothing was decoded.
    #[error("the image is {width}x{height} pixels, more than the limit of {max_pixels}")]
    TooLarge {
        /// Columns the header announces.
        width: u32,
        /// Rows the header announces.
        height: u32,
        /// The limit.
        max_pixels: u64,
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
