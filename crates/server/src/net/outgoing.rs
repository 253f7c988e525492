//! What this host has to say to one peer (DESIGN §7): frames encoded straight into one buffer by
//! the threads that send them, and written to the connection by those same threads when the socket
//! takes them; the link's task writes only what the socket would not take at once.
//!
//! Why not a queue to the link's task: every message then woke a runtime thread to encode and
//! write it, a futex wake and two context switches per hop of every transaction, on two cores
//! shared by three nodes (`bench/flamegraph.sh`, docs/BENCHMARKS.md). A vnode's driver queues
//! what its steps send and writes it with one system call a peer per turn (`Router::flush`).
//!
//! Invariant: the bytes in `buf` are whole frames, in the order `push` was called, possibly less
//! a prefix already written; they are written in that order, so the link stays FIFO. While a
//! connection is attached every frame in `buf` is sealed with its `Sealer`, in that order (the
//! sequence numbers the peer counts); between connections none is, and those waiting are sealed
//! when the next connection attaches.

use super::frame;
use super::seal::Sealer;
use super::stream::PeerWriter;
use bytes::{Buf, BytesMut};
use std::io;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use waymark_core::Envelope;

/// Why an envelope was not queued; like a broken connection, the protocols survive it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    #[error("no connection to the peer")]
    NoLink,
    #[error("the peer's backlog is full")]
    Full,
    #[error("the frame is larger than the frame limit")]
    TooBig,
}

pub struct Outgoing {
    state: Mutex<State>,
    /// Wakes the link's task when bytes are left that the socket did not take, or a write failed.
    backlog: Notify,
    /// Frames waiting beyond which envelopes are dropped (`limits.peer_queue_max`).
    frames_max: usize,
    frame_max_bytes: usize,
}

#[derive(Default)]
struct State {
    buf: BytesMut,
    /// Frames pushed since `buf` was last empty: an upper bound on the frames waiting in it.
    frames: usize,
    conn: Option<Arc<PeerWriter>>,
    /// Seals this connection's frames: `Some` exactly when `conn` is.
    sealer: Option<Sealer>,
    /// A write from a sending thread failed: the link's task ends this connection.
    failed: Option<io::Error>,
}

impl Outgoing {
    pub fn new(frames_max: usize, frame_max_bytes: usize) -> Self {
        Outgoing { state: Mutex::default(), backlog: Notify::new(), frames_max, frame_max_bytes }
    }

    /// Encodes `env` behind the frames already waiting; `flush` writes them.
    pub fn push(&self, env: &Envelope) -> Result<(), Dropped> {
        let mut s = self.lock();
        // Between connections frames wait for the next one (the dialer is backing off, or the
        // peer is about to dial again); a failed connection's task is about to drop them.
        if s.failed.is_some() {
            return Err(Dropped::NoLink);
        }
        if s.frames >= self.frames_max {
            return Err(Dropped::Full);
        }
        let s = &mut *s;
        let body = frame::encode_sealable_into(&mut s.buf, env);
        if body.len() > self.frame_max_bytes {
            s.buf.truncate(body.start - 4);
            return Err(Dropped::TooBig);
        }
        if let Some(sealer) = &mut s.sealer {
            sealer.seal(&mut s.buf[body]);
        }
        s.frames += 1;
        Ok(())
    }

    /// Writes what the socket takes now, from the calling thread; the link's task is woken for the
    /// rest. Never waits for the socket.
    pub fn flush(&self) {
        let mut s = self.lock();
        if s.buf.is_empty() || s.failed.is_some() {
            return;
        }
        let Some(conn) = s.conn.clone() else { return };
        let left = match write_some(&mut s, &conn) {
            Ok(left) => left,
            Err(e) => {
                s.failed = Some(e);
                true
            }
        };
        if left {
            self.backlog.notify_one();
        }
    }

    /// A new connection and the sealer of its frames: what was queued since the last one went
    /// down is sealed and written on it first.
    pub fn attach(&self, conn: Arc<PeerWriter>, mut sealer: Sealer) {
        let mut s = self.lock();
        assert!(s.conn.is_none(), "a second connection attached to one peer");
        seal_waiting(&mut s.buf, &mut sealer);
        s.conn = Some(conn);
        s.sealer = Some(sealer);
        drop(s);
        self.flush();
    }

    /// The connection is gone: what was waiting for it is lost, as on a broken link (the frame at
    /// the front may be half written). Frames pushed from now on wait for the next connection.
    pub fn detach(&self) {
        *self.lock() = State::default();
    }

    /// No connection came in time: what waited for one is lost.
    pub fn discard(&self) {
        let mut s = self.lock();
        if s.conn.is_none() {
            *s = State::default();
        }
    }

    /// The link's task: writes the backlog whenever the senders leave one, waiting for the socket
    /// to take it. Returns when a write fails (from here or from a sender).
    pub async fn write_backlog(&self, conn: &PeerWriter) -> io::Error {
        loop {
            self.backlog.notified().await;
            loop {
                if let Some(e) = self.lock().failed.take() {
                    return e;
                }
                if let Err(e) = conn.writable().await {
                    return e;
                }
                let mut s = self.lock();
                match write_some(&mut s, conn) {
                    Err(e) => return e,
                    Ok(false) => break,
                    Ok(true) => {}
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A thread that panicked while holding the lock left whole frames or an empty buffer:
        // every mutation above keeps the invariant before it can panic.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Seals the frames that waited for a connection, in order. Nothing of them was written: a
/// connection's end resets the buffer (`detach`).
fn seal_waiting(buf: &mut BytesMut, sealer: &mut Sealer) {
    let mut at = 0;
    while at < buf.len() {
        let len_field: [u8; 4] = buf[at..at + 4].try_into().expect("a whole frame starts here");
        let body = at + 4..at + 4 + u32::from_be_bytes(len_field) as usize;
        sealer.seal(&mut buf[body.clone()]);
        at = body.end;
    }
    assert_eq!(at, buf.len(), "the buffer held a torn frame");
}

/// Writes until the socket would block or the buffer is empty; whether anything is left for the
/// link's task (frames, or what TLS encrypted and could not send yet).
fn write_some(s: &mut State, conn: &PeerWriter) -> io::Result<bool> {
    while !s.buf.is_empty() {
        match conn.try_write(&s.buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => s.buf.advance(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    s.frames = 0;
    conn.send_pending()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::seal::{Opener, Session};
    use futures_util::StreamExt;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
    use waymark_core::alter::AlterMsg;
    use waymark_core::{Body, VnodeId};

    const FRAME_MAX_BYTES: usize = 1 << 20;
    /// How long a test waits for the next frame (or the end) before it fails rather than hangs.
    const FRAME_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

    type Reader = FramedRead<TcpStream, LengthDelimitedCodec>;

    /// The next frame, or `None` at the end of the connection; a test failure after `FRAME_WITHIN`.
    async fn next_frame(reader: &mut Reader) -> Option<bytes::BytesMut> {
        let next = tokio::time::timeout(FRAME_WITHIN, reader.next()).await;
        next.expect("a frame or the end within FRAME_WITHIN").map(|f| f.expect("a well-formed frame"))
    }

    fn envelope(n: u32) -> Envelope {
        Envelope {
            from: VnodeId::new(format!("store{n}"), "a"),
            to: VnodeId::new("store0", "b"),
            cut: None,
            body: Body::Alter(AlterMsg::Alive { sent_us: 0, echo_us: None }),
        }
    }

    /// The sealer of the sending end of a connection, and the opener of the receiving end.
    fn keys() -> (Sealer, Opener) {
        let (a_to_b, b_to_a) = ([1; 32], [2; 32]);
        (Session::new(&a_to_b, &b_to_a).sealer, Session::new(&b_to_a, &a_to_b).opener)
    }

    /// A connected pair on 127.0.0.1: the writing half for an `Outgoing`, and a frame reader.
    async fn pair() -> (Arc<PeerWriter>, Reader) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dialed = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let (_, write) = dialed.into_split();
        let codec = LengthDelimitedCodec::builder().length_field_type::<u32>().new_codec();
        (Arc::new(PeerWriter::Plain(write)), FramedRead::new(accepted, codec))
    }

    #[tokio::test]
    async fn frames_pushed_between_connections_go_out_sealed_first_on_the_next_unless_discarded() {
        let out = Outgoing::new(8, FRAME_MAX_BYTES);
        out.push(&envelope(0)).unwrap();
        out.discard();
        out.push(&envelope(1)).unwrap();
        out.flush();
        let (conn, mut reader) = pair().await;
        let (sealer, mut opener) = keys();
        out.attach(conn, sealer);
        out.push(&envelope(2)).unwrap();
        out.flush();
        for n in [1, 2] {
            let frame = next_frame(&mut reader).await.unwrap();
            assert_eq!(frame::decode::<Envelope>(opener.open(&frame).unwrap()).unwrap(), envelope(n));
        }
    }

    #[tokio::test]
    async fn frames_queued_past_the_limit_are_dropped_and_the_rest_arrive_in_order() {
        let (conn, mut reader) = pair().await;
        let (sealer, mut opener) = keys();
        let out = Outgoing::new(3, FRAME_MAX_BYTES);
        out.attach(conn, sealer);
        for n in 0..3 {
            assert_eq!(out.push(&envelope(n)), Ok(()));
        }
        assert_eq!(out.push(&envelope(3)), Err(Dropped::Full));
        out.flush();
        for n in 0..3 {
            let frame = next_frame(&mut reader).await.unwrap();
            assert_eq!(frame::decode::<Envelope>(opener.open(&frame).unwrap()).unwrap(), envelope(n));
        }
        // Written: the limit counts what waits, so there is room again.
        assert_eq!(out.push(&envelope(4)), Ok(()));
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_and_nothing_of_it_is_written() {
        let (conn, mut reader) = pair().await;
        let (sealer, _) = keys();
        let out = Outgoing::new(8, 16);
        out.attach(conn, sealer);
        assert_eq!(out.push(&envelope(1)), Err(Dropped::TooBig));
        out.detach();
        drop(out);
        // Nothing was written: the reader sees the connection close with no frame.
        assert!(next_frame(&mut reader).await.is_none());
    }

    /// Senders on other threads write while the socket takes it; when the receiver stops reading,
    /// the rest waits in the buffer and the link's task writes it once the receiver reads again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_the_socket_does_not_take_is_written_by_the_link_task_in_order() {
        const FRAMES: u32 = 200_000;
        let (conn, mut reader) = pair().await;
        let (sealer, mut opener) = keys();
        let out = Arc::new(Outgoing::new(FRAMES as usize, FRAME_MAX_BYTES));
        out.attach(conn.clone(), sealer);
        let task = tokio::spawn({
            let out = out.clone();
            async move { out.write_backlog(&conn).await }
        });
        let sender = std::thread::spawn({
            let out = out.clone();
            move || {
                for n in 0..FRAMES {
                    out.push(&envelope(n)).expect("room for every frame");
                    if n % 100 == 99 {
                        out.flush();
                    }
                }
                out.flush();
            }
        });
        // Nobody reads until the sender is done: its writes filled the socket's buffers.
        tokio::task::spawn_blocking(move || sender.join().unwrap()).await.unwrap();
        assert!(!out.lock().buf.is_empty(), "the socket took all {FRAMES} frames: make the test bigger");
        let read_all = async {
            for n in 0..FRAMES {
                let frame = next_frame(&mut reader).await.unwrap();
                assert_eq!(frame::decode::<Envelope>(opener.open(&frame).unwrap()).unwrap(), envelope(n));
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), read_all).await.expect("every frame within 60 s");
        assert!(out.lock().buf.is_empty());
        task.abort();
    }
}
