//! A socket that gives up on a client that stops reading.
//!
//! hyper writes a response for as long as the socket takes bytes and otherwise waits, with no
//! limit: a client that keeps its connection open but never reads holds the response, and the
//! engine request behind it, forever. [`WriteDeadline`] starts a clock when a write finds the
//! socket full and stops it when any byte goes out; if the clock runs out, the write fails with
//! `TimedOut`, hyper drops the connection, and dropping the response's event stream cancels the
//! request in the engine (its KV blocks are freed at the next step). A client reading slowly but
//! steadily is never cut off: only time with no progress at all counts.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner` with a limit on how long a write may find it full.
pub struct WriteDeadline<T> {
    inner: T,
    timeout: Duration,
    /// Running while writes find the socket full; `None` once a write made progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteDeadline<T> {
    /// Wraps `inner`: a write that cannot proceed for `timeout` fails.
    pub fn new(inner: T, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Passes a finished write through (progress stops the clock); on a pending one, starts
    /// the clock if it is not running and fails once it has run out.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.timeout;
        let clock = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + timeout)));
        ready!(clock.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client took no bytes for {timeout:?}"),
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_timeout() {
        // A 64-byte pipe the other end never reads from.
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(ours, Duration::from_millis(100));
        let started = std::time::Instant::now();
        let err = io.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_slow_but_steady_reader_is_never_cut_off() {
        use tokio::io::AsyncReadExt;
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut io = WriteDeadline::new(ours, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut total = 0;
            let mut buf = [0u8; 8];
            // 8 bytes every 50 ms: far slower than the writer, never silent for 200 ms.
            while total < 128 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                total += theirs.read(&mut buf).await.unwrap();
            }
        });
        io.write_all(&[7u8; 128]).await.unwrap();
        reader.await.unwrap();
    }
}
