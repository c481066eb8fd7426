//! Images sent by URL: fetched from the hosts of `--allowed-media-domains` before a request is
//! validated ([`fetch`]: limits, redirects, errors; [`image_urls`]: which parts of each
//! protocol's request hold URLs, replaced by the fetched bytes as data URLs; [`tls`]: the
//! certificate authorities trusted and what a failed handshake is called).

pub mod fetch;
pub mod image_urls;
mod tls;

pub use fetch::{MediaFetchConfig, MediaFetcher};
