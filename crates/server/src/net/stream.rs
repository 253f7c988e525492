//! A peer link's byte stream, plaintext or TLS (issue 36): `PeerStream` while the handshakes run,
//! then split (`split`) into the reader the link's task reads frames from and the writer that the
//! vnode threads write their frames to without waiting (`outgoing.rs`).
//!
//! Why not tokio-rustls's stream after the handshake: the senders write from the vnode threads, not
//! from the runtime, with `try_write` (never waiting, never registering a waker). Over TLS that is
//! `TlsLink`: rustls's connection behind a mutex and the socket shared by both halves; a write
//! encrypts into rustls's buffer and sends what the socket takes, the link's task sends the rest
//! when it is writable. *Invariant*: while rustls holds ciphertext not yet sent, no new plaintext
//! is taken (`try_write` says `WouldBlock`), so at most one buffer of it waits (rustls's limit,
//! 64 KiB), and records leave in the order they were made: the link stays FIFO.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A peer connection before its split: what the secret's handshake (`auth.rs`) runs over.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl From<TcpStream> for PeerStream {
    fn from(stream: TcpStream) -> Self {
        PeerStream::Plain(stream)
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Splits an authenticated connection into its reader and its writer. Whatever rustls decrypted
/// and nobody read yet stays in its connection, which the reader reads first.
pub fn split(stream: PeerStream) -> (PeerReader, Arc<PeerWriter>) {
    match stream {
        PeerStream::Plain(s) => {
            let (read, write) = s.into_split();
            (PeerReader::Plain(read), Arc::new(PeerWriter::Plain(write)))
        }
        PeerStream::Tls(s) => {
            let (tcp, tls) = match *s {
                tokio_rustls::TlsStream::Client(c) => {
                    let (tcp, conn) = c.into_inner();
                    (tcp, rustls::Connection::Client(conn))
                }
                tokio_rustls::TlsStream::Server(c) => {
                    let (tcp, conn) = c.into_inner();
                    (tcp, rustls::Connection::Server(conn))
                }
            };
            let link = Arc::new(TlsLink { tcp, tls: Mutex::new(tls) });
            (PeerReader::Tls(link.clone()), Arc::new(PeerWriter::Tls(link)))
        }
    }
}

/// A TLS connection shared by the link's reader and every sender.
pub struct TlsLink {
    tcp: TcpStream,
    tls: Mutex<rustls::Connection>,
}

impl TlsLink {
    fn lock(&self) -> MutexGuard<'_, rustls::Connection> {
        // rustls leaves its state consistent between calls; a sender that panicked mid-call
        // would at worst leave a record half made, which the peer's MAC check then refuses.
        self.tls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends the ciphertext rustls holds, as far as the socket takes it now.
    fn send_tls(&self, tls: &mut rustls::Connection) -> io::Result<()> {
        while tls.wants_write() {
            match tls.write_tls(&mut NonBlocking(&self.tcp)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The socket's non-waiting reads and writes as `std::io`, for rustls.
struct NonBlocking<'a>(&'a TcpStream);

impl Read for NonBlocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for NonBlocking<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the link's task reads frames from.
pub enum PeerReader {
    Plain(OwnedReadHalf),
    Tls(Arc<TlsLink>),
}

impl AsyncRead for PeerReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let link = match self.get_mut() {
            PeerReader::Plain(s) => return Pin::new(s).poll_read(cx, buf),
            PeerReader::Tls(link) => link,
        };
        loop {
            {
                let mut tls = link.lock();
                match tls.reader().read(buf.initialize_unfilled()) {
                    // 0: the peer closed the connection with close_notify.
                    Ok(n) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // The peer's socket closed without close_notify (a host killed or gone):
                    // the end of the link, as a plaintext one ends. Nothing is lost unnoticed: a
                    // frame cut short fails the codec, and every whole frame passed its MAC.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                    Err(e) => return Poll::Ready(Err(e)),
                }
                match tls.read_tls(&mut NonBlocking(&link.tcp)) {
                    // The socket ended: the next read above says whether it ended cleanly.
                    Ok(0) => continue,
                    Ok(_) => {
                        tls.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        // rustls may answer (a key update): sent now, or by the next write.
                        link.send_tls(&mut tls)?;
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            // `try_read` cleared the socket's readiness: this waits for the next bytes.
            match link.tcp.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// What the senders write their frames to: never waits (`try_write`); the link's task waits for
/// `writable` and sends what is left.
pub enum PeerWriter {
    Plain(OwnedWriteHalf),
    Tls(Arc<TlsLink>),
}

impl PeerWriter {
    /// Takes what it can of `buf` now: `WouldBlock` when nothing.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            PeerWriter::Plain(s) => s.try_write(buf),
            PeerWriter::Tls(link) => {
                let mut tls = link.lock();
                link.send_tls(&mut tls)?;
                if tls.wants_write() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                let n = tls.writer().write(buf)?;
                link.send_tls(&mut tls)?;
                match n {
                    0 => Err(io::ErrorKind::WouldBlock.into()),
                    n => Ok(n),
                }
            }
        }
    }

    /// Sends what an earlier write left encrypted but unsent, as far as the socket takes it;
    /// whether some is still left.
    pub fn send_pending(&self) -> io::Result<bool> {
        match self {
            PeerWriter::Plain(_) => Ok(false),
            PeerWriter::Tls(link) => {
                let mut tls = link.lock();
                link.send_tls(&mut tls)?;
                Ok(tls.wants_write())
            }
        }
    }

    /// Waits until the socket may take more.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            PeerWriter::Plain(s) => s.writable().await,
            PeerWriter::Tls(link) => link.tcp.writable().await,
        }
    }
}
