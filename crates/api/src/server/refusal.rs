//! The answer to a connection past `--max-connections`: an HTTP 503 with an OpenAI-shaped error
//! body and `Connection: close`, written without parsing the request.
//!
//! A 503 rather than a bare close, because clients then see why (and OpenAI's SDKs retry a 503
//! with back-off, as they do a 429); a reset would read as a network fault. The refused socket
//! stays open only to let the client read the answer: at most [`LINGER`], and at most
//! [`MAX_LINGERING`] such sockets at once. Past that, the connection is closed at once, so a
//! flood of connections can never hold more than the cap plus that many descriptors.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::error::ApiError;

/// How long a refused connection stays open for the client to read its 503.
pub const LINGER: Duration = Duration::from_secs(1);

/// Refused connections lingering at once; more are closed without an answer.
pub const MAX_LINGERING: usize = 64;

/// Refuses connections over the cap.
#[derive(Clone)]
pub struct Refusal {
    response: Arc<[u8]>,
    lingering: Arc<Semaphore>,
}

impl Refusal {
    /// The refusal for a server that allows `max_connections` connections.
    pub fn new(max_connections: usize) -> Self {
        let error = ApiError::Unavailable(format!(
            "the server has {max_connections} connections open (--max-connections); retry shortly"
        ));
        let body = serde_json::to_string(&error.body()).unwrap_or_default();
        let response = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        Refusal {
            response: response.into_bytes().into(),
            lingering: Arc::new(Semaphore::new(MAX_LINGERING)),
        }
    }

    /// Answers `tcp` with the 503 and closes it, on a task of its own.
    pub fn refuse(&self, mut tcp: TcpStream) {
        let Ok(slot) = Arc::clone(&self.lingering).try_acquire_owned() else {
            return; // Dropping `tcp` closes it.
        };
        let response = Arc::clone(&self.response);
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tokio::time::timeout(LINGER, async move {
                tcp.write_all(&response).await?;
                tcp.shutdown().await?;
                // Reading until the client closes keeps unread request bytes from turning
                // our close into a reset that could discard the answer on the client's side.
                let mut scratch = [0u8; 1024];
                while tcp.read(&mut scratch).await? > 0 {}
                std::io::Result::Ok(())
            })
            .await;
        });
    }
}
