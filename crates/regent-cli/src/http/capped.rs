//! A listener that holds at most [`MAX_CONNECTIONS`] connections open, each
//! closed after [`IDLE`] without a byte either way: a client that opens
//! sockets without end exhausts the endpoint, never regent's descriptors,
//! which its store connections and the command's supervision need; and
//! idle keep-alive connections (a scanner's, a sleeping laptop's, a
//! half-open socket) cannot hold every place, so the probes keep
//! answering. (axum's `serve` sets no timer, so hyper's own header-read
//! timeout is off; this is the bound instead.)

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections served at once; the next waits in the kernel's backlog.
pub(super) const MAX_CONNECTIONS: usize = 32;

/// A connection with no byte read or written for this long is closed.
pub(super) const IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// A TCP listener that accepts only while fewer than [`MAX_CONNECTIONS`]
/// of its connections are open.
pub(super) struct Capped {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl Capped {
    pub(super) fn new(inner: TcpListener) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        }
    }
}

/// A connection, and its place among the open ones until it closes.
pub(super) struct Held {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    /// When the connection is closed unless a byte moves first.
    idle: Pin<Box<tokio::time::Sleep>>,
}

impl Held {
    /// Progress: the idle deadline moves on.
    fn moved(&mut self) {
        self.idle.as_mut().reset(tokio::time::Instant::now() + IDLE);
    }

    /// While the stream is pending: an error once the idle deadline passed.
    fn expired(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        match self.idle.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "idle connection closed",
            )),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Listener for Capped {
    type Io = Held;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Held, Self::Addr) {
        let permit = match self.permits.clone().acquire_owned().await {
            Ok(p) => p,
            // The semaphore is never closed.
            Err(_) => unreachable!("the connection semaphore is never closed"),
        };
        // axum's accept: logs and retries errors (out of descriptors too).
        let (stream, addr) = Listener::accept(&mut self.inner).await;
        (
            Held {
                stream,
                _permit: permit,
                idle: Box::pin(tokio::time::sleep(IDLE)),
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl AsyncRead for Held {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Pending => self.expired(cx).map(Err),
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(r)
            }
        }
    }
}

impl AsyncWrite for Held {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Pending => self.expired(cx).map(Err),
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.moved();
                }
                Poll::Ready(r)
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_next_connection_waits_until_one_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut capped = Capped::new(listener);
        let mut clients = Vec::new();
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            clients.push(TcpStream::connect(addr).await.unwrap());
            held.push(capped.accept().await.0);
        }
        // One more connects (the kernel's backlog) but is not accepted.
        clients.push(TcpStream::connect(addr).await.unwrap());
        let next =
            tokio::time::timeout(std::time::Duration::from_millis(200), capped.accept()).await;
        assert!(next.is_err(), "accepted past the cap");
        held.pop();
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), capped.accept()).await;
        assert!(next.is_ok(), "not accepted after one closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_idle_past_the_bound_is_closed() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut capped = Capped::new(listener);
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut held, _) = capped.accept().await;
        // Bytes keep it open past the bound.
        tokio::time::sleep(IDLE - std::time::Duration::from_secs(1)).await;
        client.write_all(b"x").await.unwrap();
        let mut byte = [0u8; 1];
        held.read_exact(&mut byte).await.unwrap();
        tokio::time::sleep(IDLE - std::time::Duration::from_secs(1)).await;
        // Silence past the bound: the read fails, and the place is freed.
        let err = held.read(&mut byte).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }
}
