//! A peer link over mutual TLS (`stream.rs`, `peer.rs`) carries what the vnode threads write —
//! frames larger than the socket and rustls take at once — whole, sealed and in order. Apart from
//! `stream.rs` so that its imports of the links above it form no loop.

use crate::config::TlsFiles;
use crate::net::auth::Identity;
use crate::net::outgoing::Outgoing;
use crate::net::peer::{self, LinkContext, LinkStats, Peer, PeerTls};
use crate::router::Router;
use crate::tls::HostTls;
use crate::vnode::VnodeCmd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use waymark_core::message::PrepareWrites;
use waymark_core::{Body, Envelope, TxId, TxnMsg, VnodeId, Write, WriteOp};

/// Frames of `VALUE_BYTES` each: many TLS records apiece, and more than the socket and rustls
/// take at once, so the senders leave ciphertext and frames for the link's task.
const FRAMES: usize = 48;
const VALUE_BYTES: usize = 256 << 10;
const WITHIN: Duration = Duration::from_secs(30);

/// A CA and, for each of `hosts`, a certificate it signed and the key, written into `dir`.
fn certificates(dir: &Path, hosts: &[&str]) -> Vec<TlsFiles> {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    hosts
        .iter()
        .map(|h| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert =
                rcgen::CertificateParams::new(vec![h.to_string()]).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
            let files = TlsFiles {
                cert: dir.join(format!("{h}.pem")),
                key: dir.join(format!("{h}-key.pem")),
                ca: dir.join("ca.pem"),
            };
            std::fs::write(&files.cert, cert.pem()).unwrap();
            std::fs::write(&files.key, key.serialize_pem()).unwrap();
            files
        })
        .collect()
}

fn prepare(n: usize) -> Envelope {
    let (near, primary) = (VnodeId::new("store0", "a"), VnodeId::new("store0", "b"));
    let writes = vec![Write { key: n.to_be_bytes().to_vec(), op: WriteOp::Set(vec![n as u8; VALUE_BYTES]) }];
    let body = Body::Txn(TxnMsg::Prepare {
        tx: TxId { near: near.clone(), incarnation: 1, seq: n as u32 },
        reads: vec![],
        writes: PrepareWrites::Unresolved(writes),
        one_phase: true,
        first_committer: primary.clone(),
        downstream: vec![],
        after: vec![],
        epoch: 0,
    });
    Envelope { from: near, to: primary, cut: None, body }
}

/// Host `me`'s links to `other` over TLS, and what `me` has to say to it.
fn link(me: &str, other: &str, tls: &TlsFiles, shutdown: &CancellationToken) -> (LinkContext, Peer, Arc<Router>) {
    let out = Arc::new(Outgoing::new(FRAMES * 2, 64 << 20));
    let router = Arc::new(Router::new(me.into(), [(other.to_string(), out.clone())].into()));
    let ctx = LinkContext {
        me: Identity { cluster: "c".into(), host: me.into(), secret: b"0123456789abcdef0123456789abcdef".to_vec() },
        hosts: vec!["a".into(), "b".into()],
        frame_max_bytes: 64 << 20,
        router: router.clone(),
        stats: Arc::new(LinkStats::default()),
        shutdown: shutdown.clone(),
        tls: Some(PeerTls::new(&HostTls::load(tls).unwrap())),
    };
    (ctx, Peer { host: other.into(), addr: "127.0.0.1:1".parse().unwrap(), out }, router)
}

/// The vnode threads' path over TLS: frames pushed and flushed from a thread outside the runtime
/// arrive whole, MACs intact and in order, though each is larger than what the socket takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_frames_written_from_a_plain_thread_cross_a_tls_link_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let files = certificates(dir.path(), &["a", "b"]);
    let (shutdown, b_shutdown) = (CancellationToken::new(), CancellationToken::new());
    let (_stop, _b_stop) = (shutdown.clone().drop_guard(), b_shutdown.clone().drop_guard());
    let (b_listener, a_listener) =
        (TcpListener::bind("127.0.0.1:0").await.unwrap(), TcpListener::bind("127.0.0.1:0").await.unwrap());
    let (b_ctx, b_peer, b_router) = link("b", "a", &files[1], &b_shutdown);
    let (a_ctx, mut a_peer, _) = link("a", "b", &files[0], &shutdown);
    a_peer.addr = b_listener.local_addr().unwrap();
    let (tx, mut rx) = mpsc::channel(FRAMES * 2);
    b_router.add_local(VnodeId::new("store0", "b"), tx);
    let (a_out, a_stats) = (a_peer.out.clone(), a_ctx.stats.clone());
    peer::start(b_ctx, b_listener, vec![b_peer]);
    peer::start(a_ctx, a_listener, vec![a_peer]);
    let deadline = tokio::time::Instant::now() + WITHIN;
    while a_stats.connects.load(Ordering::Relaxed) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "a never linked to b over TLS");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sender = std::thread::spawn(move || {
        for n in 0..FRAMES {
            a_out.push(&prepare(n)).expect("queued");
            a_out.flush();
        }
    });
    for n in 0..FRAMES {
        let got = tokio::time::timeout(WITHIN, rx.recv()).await.expect("a frame within WITHIN");
        match got {
            Some(VnodeCmd::Deliver(env)) => assert_eq!(env, prepare(n), "frame {n}"),
            _ => panic!("frame {n}: not a delivery"),
        }
    }
    sender.join().unwrap();

    // b stops: its sockets close without TLS's close_notify, as a killed host's do. For a that is
    // the link's end, as on a plaintext link, not a malformed frame.
    b_shutdown.cancel();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(a_stats.malformed_frames.load(Ordering::Relaxed), 0, "a took b's end for a malformed frame");
}
