//! The gRPC port's connections as h2 should write them: one syscall per flush.
//!
//! h2 copies a DATA frame into its write buffer only below a threshold: 256 bytes on a
//! connection with vectored writes, 1 KiB without. A bigger frame is chained, and nothing is
//! buffered after a chained frame until it has been written, so a unary response of 256 bytes
//! to 1 KiB (a task list) left in two syscalls: its headers and message, then its 10-byte
//! trailers. Reporting no vectored writes raises the threshold to 1 KiB, so such a response
//! leaves in one. Without vectored writes h2 would write a chained frame's head and payload in
//! two `write`s, so writes are gathered here until the flush that h2 (and hyper's HTTP/1)
//! always ends with, and leave in one.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Writes at least this big go straight to the connection (h2's frames are at most 16 KiB).
const DIRECT: usize = 64 * 1024;

/// A gathering buffer bigger than this is freed once flushed: an idle connection keeps little.
const KEEP: usize = 4 * 1024;

/// A connection that reports no vectored writes and gathers writes until a flush; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Flattened<T> {
    io: T,
    /// Bytes accepted and not yet written.
    out: Vec<u8>,
    /// How much of `out` has been written.
    sent: usize,
}

impl<T> Flattened<T> {
    /// Wraps `io`.
    pub fn new(io: T) -> Self {
        Self {
            io,
            out: Vec::new(),
            sent: 0,
        }
    }
}

impl<T: AsyncWrite + Unpin> Flattened<T> {
    /// Writes what was gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.sent = 0;
        if self.out.capacity() > KEEP {
            self.out = Vec::new();
        } else {
            self.out.clear();
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `bufs`: gathers them, writing what was gathered first if they would not fit, or,
    /// when they are big, writes them straight after it.
    fn poll_take(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum::<usize>();
        if len >= DIRECT {
            ready!(self.poll_drain(cx))?;
            return Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        }
        if self.out.len() + len > DIRECT {
            ready!(self.poll_drain(cx))?;
        }
        if self.out.is_empty() {
            self.out.reserve(len.max(KEEP));
        }
        for b in bufs {
            self.out.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Flattened<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Flattened<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_take(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_take(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<T: Connected> Connected for Flattened<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection end that records each write it is asked for.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        /// Bytes it accepts per write (0: all).
        accept: usize,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = if self.accept == 0 {
                buf.len()
            } else {
                buf.len().min(self.accept)
            };
            self.writes.push(buf[..n].to_vec());
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn writes_until_a_flush_leave_in_one_write() {
        let mut conn = Flattened::new(Recorder::default());
        assert!(!conn.is_write_vectored());
        conn.write_all(b"head").await.unwrap();
        let n = conn
            .write_vectored(&[IoSlice::new(b"-pay"), IoSlice::new(b"load")])
            .await
            .unwrap();
        assert_eq!(n, 8, "every slice is taken");
        assert!(
            conn.io.writes.is_empty(),
            "nothing written before the flush"
        );
        conn.flush().await.unwrap();
        assert_eq!(conn.io.writes, vec![b"head-payload".to_vec()]);
        conn.write_all(b"trailers").await.unwrap();
        conn.shutdown().await.unwrap();
        assert_eq!(conn.io.writes[1], b"trailers");
    }

    #[tokio::test]
    async fn partial_writes_continue_where_they_stopped() {
        let mut conn = Flattened::new(Recorder {
            accept: 3,
            ..Default::default()
        });
        conn.write_all(b"abcdefgh").await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(conn.io.writes.concat(), b"abcdefgh");
        assert_eq!(conn.io.writes.len(), 3);
    }

    #[tokio::test]
    async fn big_writes_go_straight_through_after_what_was_gathered() {
        let mut conn = Flattened::new(Recorder::default());
        conn.write_all(b"small").await.unwrap();
        let big = vec![7u8; DIRECT];
        conn.write_all(&big).await.unwrap();
        assert_eq!(conn.io.writes, vec![b"small".to_vec(), big]);
    }

    #[tokio::test]
    async fn a_flushed_buffer_is_kept_only_when_small() {
        let mut conn = Flattened::new(Recorder::default());
        conn.write_all(b"small").await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(conn.out.capacity(), KEEP);
        conn.write_all(&[1u8; KEEP + 1]).await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(conn.out.capacity(), 0);
    }

    #[tokio::test]
    async fn bytes_pass_both_ways() {
        let (a, b) = tokio::io::duplex(64);
        let (mut a, mut b) = (Flattened::new(a), Flattened::new(b));
        a.write_all(b"ping").await.unwrap();
        a.flush().await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        b.write_all(b"pong").await.unwrap();
        b.shutdown().await.unwrap();
        let mut back = Vec::new();
        a.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"pong");
    }
}
