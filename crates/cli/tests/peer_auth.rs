//! A peer link carries envelopes only after the dialer proved it holds the cluster secret, and only
//! in frames sealed with the keys of that connection. Here an impostor dials node2's peer port
//! claiming to be node1: with a wrong secret its handshake fails, node2 counts the failure, and a
//! transaction it then writes onto the connection anyway is never applied; with the right secret,
//! a frame without the link's MAC is not applied either. The control: the same connection with the
//! right secret and a sealed frame does write the key — so the first tests could fail.

mod common;

use common::{key_with_primary, poll, Cluster, Spec};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use waymark_core::message::PrepareWrites;
use waymark_core::{Body, Envelope, TxId, TxnMsg, VnodeId, Write, WriteOp};
use waymark_server::net::auth::{self, AuthError, Identity};
use waymark_server::net::frame::{self, PeerFramed};
use waymark_server::net::seal::Session;

const COUNTED_WITHIN: Duration = Duration::from_secs(10);
const CLOSED_WITHIN: Duration = Duration::from_secs(15);
/// Connections the control test makes: node1's own link may replace one before node2 reads it.
const CONTROL_ATTEMPTS_MAX: usize = 5;
/// Reads of the key, 50 ms apart, after each of those connections.
const CONTROL_READS_MAX: usize = 40;

/// A 2-host cluster of single replicas, and a key whose primary (and only replica) is on node2.
fn cluster_and_key() -> (Cluster, String) {
    let cluster = Cluster::start(&Spec::new(2, 1).fsync_never());
    let key = key_with_primary(&cluster.topology(), "evil", "store0@node2");
    (cluster, key)
}

/// Dials node2's peer port as node1, holding `secret`.
async fn dial_as_node1(cluster: &Cluster, secret: Vec<u8>) -> (PeerFramed, Result<Session, AuthError>) {
    let node2 = cluster.host("node2");
    let stream = TcpStream::connect(node2.peer_addr()).await.expect("connect to node2's peer port");
    let mut framed = frame::framed(stream, node2.cfg.limits.frame_max_bytes);
    let me = Identity { cluster: node2.cfg.cluster.name.clone(), host: "node1".into(), secret };
    let result = auth::dial(&mut framed, &me, "node2").await;
    (framed, result)
}

/// A one-phase prepare of `SET key x` from node1's store vnode to the key's primary on node2: a
/// transaction that commits as soon as its only replica takes it.
fn forged_prepare(key: &str) -> Envelope {
    let near = VnodeId::new("store0", "node1");
    let primary = VnodeId::new("store0", "node2");
    let tx = TxId { near: near.clone(), incarnation: 99, seq: 1 };
    let writes = vec![Write { key: key.as_bytes().to_vec(), op: WriteOp::Set(b"x".to_vec()) }];
    let body = Body::Txn(TxnMsg::Prepare {
        tx,
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

/// Writes `payload` as a raw frame (its length, then it), whatever the handshake said.
async fn write_raw_frame(stream: &mut (impl tokio::io::AsyncWrite + Unpin), payload: &[u8]) {
    let mut bytes = (payload.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(payload);
    stream.write_all(&bytes).await.expect("write the forged frame");
}

fn get(cluster: &Cluster, host: &str, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(&mut cluster.redis(host)).expect("GET")
}

fn auth_failures(cluster: &Cluster, host: &str) -> u64 {
    let status = cluster.status(host).expect("/status");
    status["links"]["auth_failures"].as_u64().expect("links.auth_failures")
}

#[tokio::test]
async fn an_impostor_without_the_secret_is_refused_and_its_frames_are_not_applied() {
    let (cluster, key) = cluster_and_key();
    let failures_before = auth_failures(&cluster, "node2");

    let wrong_secret = b"0123456789abcdef0123456789abcdef".to_vec();
    assert_ne!(wrong_secret, cluster.secret());
    let (framed, dialed) = dial_as_node1(&cluster, wrong_secret).await;
    // node2 checks the dialer's proof first, and answers why it refuses.
    assert!(matches!(dialed, Err(AuthError::Refused(_))), "a dial with the wrong secret gave {dialed:?}");

    let mut stream = framed.into_inner();
    write_raw_frame(&mut stream, &frame::encode(&forged_prepare(&key))).await;
    // node2 closes the connection, having said nothing more (no proof of its own).
    let mut rest = vec![];
    let closed = tokio::time::timeout(CLOSED_WITHIN, stream.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "node2 kept the impostor's connection open for {CLOSED_WITHIN:?}");
    assert_eq!(rest, Vec::<u8>::new(), "node2 wrote after its refusal");
    poll("node2 counts the failed handshake", COUNTED_WITHIN, || match auth_failures(&cluster, "node2") {
        n if n > failures_before => Ok(()),
        n => Err(format!("links.auth_failures is {n}")),
    });

    assert_eq!(get(&cluster, "node2", &key), None, "node2 applied a transaction from an unauthenticated peer");
    assert_eq!(get(&cluster, "node1", &key), None);
}

/// Authentication at the handshake alone would let anyone on the path write into the link after
/// it: every frame must carry the link's MAC.
#[tokio::test]
async fn a_frame_without_the_links_mac_after_a_good_handshake_is_not_applied() {
    let (cluster, key) = cluster_and_key();
    let (framed, dialed) = dial_as_node1(&cluster, cluster.secret()).await;
    dialed.expect("a dial with the right secret is welcome");
    let mut stream = framed.into_inner();
    write_raw_frame(&mut stream, &frame::encode(&forged_prepare(&key))).await;
    let mut rest = vec![];
    let closed = tokio::time::timeout(CLOSED_WITHIN, stream.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "node2 kept a link open after a frame without its MAC");
    for _ in 0..CONTROL_READS_MAX {
        assert_eq!(get(&cluster, "node2", &key), None, "node2 applied a frame without the link's MAC");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_peer_holding_the_secret_can_write_through_its_link() {
    let (cluster, key) = cluster_and_key();
    let mut written = false;
    for _ in 0..CONTROL_ATTEMPTS_MAX {
        let (framed, dialed) = dial_as_node1(&cluster, cluster.secret()).await;
        let mut session = dialed.expect("a dial with the right secret is welcome");
        let mut stream = framed.into_inner();
        write_raw_frame(&mut stream, &frame::encode_sealed(&forged_prepare(&key), &mut session.sealer)).await;
        for _ in 0..CONTROL_READS_MAX {
            written = get(&cluster, "node2", &key).as_deref() == Some("x");
            if written {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if written {
            break;
        }
    }
    assert!(written, "{CONTROL_ATTEMPTS_MAX} authenticated connections did not write {key}");
    assert_eq!(get(&cluster, "node1", &key).as_deref(), Some("x"));
}
