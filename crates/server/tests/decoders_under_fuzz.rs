//! Fuzzing that runs in every `cargo test`, on the stable toolchain: proptest feeds each decoder of
//! bytes from outside — peer frames and their envelopes, WAL records as recovery reads them,
//! checkpoint files, snapshot manifests — random bytes and damaged copies of valid encodings (bits
//! flipped, bytes cut off, runs repeated), and each must answer an error or a value, never panic,
//! abort or hang. The case counts keep the file to seconds; `PROPTEST_CASES=100000` runs longer.
//!
//! Found so far: a frame of nested relays overflowed the stack (fixed by `alter::Relayed`; its own
//! test is in `core/src/alter/io.rs`).

use proptest::prelude::*;
use std::path::Path;
use waymark_core::alter::{AlterMsg, AlterRecord, ProposalId, Relayed};
use waymark_core::{Body, CutId, Envelope, Record, VnodeId, VnodeImage};
use waymark_server::net::frame;
use waymark_server::snapshot::manifest::{read_manifest, MANIFEST_FILE};
use waymark_server::storage::checkpoint::{self, Image};
use waymark_wal::Position;

const CASES: u32 = 512;

fn v(kind: &str, host: &str) -> VnodeId {
    VnodeId::new(kind, host)
}

/// Valid envelopes to damage: one of each kind of body the tree sends most.
fn envelopes() -> Vec<Envelope> {
    let reach = AlterMsg::Reach { hears: vec![v("store0", "node2"), v("manager1", "node1")] };
    let propose = AlterMsg::Propose {
        id: ProposalId { initiator: v("store0", "node1"), n: 7 },
        record: AlterRecord::set("config/x", "1"),
    };
    let relay = AlterMsg::Relay {
        to: v("store0", "node3"),
        origin: v("store0", "node1"),
        msg: Relayed::wrap(&propose).expect("a proposal is relayed"),
    };
    [reach, propose, relay]
        .into_iter()
        .map(|msg| Envelope {
            from: v("store0", "node1"),
            to: v("store0", "node2"),
            cut: Some(CutId(3)),
            body: Body::Alter(msg),
        })
        .collect()
}

/// A valid encoding, damaged: bits flipped, cut short, or a stretch repeated.
fn damaged(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = valid.len();
    (0..n, prop::collection::vec((any::<usize>(), any::<u8>()), 0..8), any::<usize>(), 0usize..3, any::<usize>())
        .prop_map(move |(which, flips, cut, mode, repeat_at)| {
            let mut bytes = valid[which].clone();
            if bytes.is_empty() {
                return bytes;
            }
            for (at, mask) in flips {
                let len = bytes.len();
                bytes[at % len] ^= mask;
            }
            match mode {
                0 => bytes.truncate(cut % (bytes.len() + 1)),
                1 => {
                    let at = repeat_at % bytes.len();
                    let stretch: Vec<u8> = bytes[at..].iter().copied().take(16).collect();
                    for _ in 0..(cut % 64) {
                        bytes.splice(at..at, stretch.iter().copied());
                    }
                }
                _ => {}
            }
            bytes
        })
}

fn frames() -> Vec<Vec<u8>> {
    envelopes()
        .iter()
        .map(|e| {
            let mut buf = bytes::BytesMut::new();
            frame::encode_into(&mut buf, e);
            buf[4..].to_vec() // what the codec hands `decode`: version byte and payload
        })
        .collect()
}

fn records() -> Vec<(u8, Vec<u8>)> {
    [Record::Boot { incarnation: 3 }, Record::CutStart { cut: CutId(9) }]
        .iter()
        .map(|r| (r.kind(), r.encode()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn a_peer_frame_of_random_bytes_decodes_or_is_refused(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = frame::decode::<Envelope>(&bytes);
    }

    #[test]
    fn a_damaged_peer_frame_decodes_or_is_refused(bytes in damaged(frames())) {
        if let Ok(Envelope { body: Body::Alter(AlterMsg::Relay { msg, .. }), .. }) = frame::decode::<Envelope>(&bytes) {
            // What a relay carries is opened one level, and never to another relay.
            let nested = matches!(msg.open(), Some(AlterMsg::Relay { .. }));
            prop_assert!(!nested, "a relay opened to a relay");
        }
    }

    #[test]
    fn a_wal_record_of_random_or_damaged_bytes_decodes_or_is_refused(
        kind in any::<u8>(),
        random in prop::collection::vec(any::<u8>(), 0..256),
        damage in damaged(records().into_iter().map(|(_, b)| b).collect()),
    ) {
        let _ = Record::decode(kind, &random);
        for (k, _) in records() {
            let _ = Record::decode(k, &damage);
        }
    }
}

/// Files are read from a directory: a few hundred damaged copies of a valid checkpoint and of a
/// valid manifest, each read back, must give an error or a value.
#[test]
fn damaged_checkpoints_and_manifests_are_refused_or_read_never_a_panic() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    checkpoint::write(dir.path(), &Image::Store(VnodeImage::empty(None)), Position::new(0, 16)).expect("a checkpoint");
    let valid_checkpoint = std::fs::read(dir.path().join(checkpoint::FILE_NAME)).expect("its bytes");
    let valid_manifest = br#"{"format":1,"name":"n","kind":"Full","cut":1,"created_unix_ms":0,
        "cluster":{"name":"c","partitions":1,"replicas":1,"hosts":["node1"]},"metadata_md5":"",
        "vnodes":[{"vnode":"store0@node1","partitions":[0],"checkpoint":null,
        "from":{"segment":0,"offset":16},"upto":{"segment":0,"offset":16},"segments":[]}]}"#
        .to_vec();
    assert!(read_back_manifest(dir.path(), &valid_manifest).is_ok(), "the seed manifest is valid");

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: CASES / 2, ..Default::default() });
    let strategy = damaged(vec![valid_checkpoint, valid_manifest.clone()]);
    runner
        .run(&strategy, |bytes| {
            std::fs::write(dir.path().join(checkpoint::FILE_NAME), &bytes).expect("write the checkpoint");
            let _ = checkpoint::read(dir.path());
            let _ = read_back_manifest(dir.path(), &bytes);
            Ok(())
        })
        .expect("every damaged file was refused or read");
}

fn read_back_manifest(dir: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(dir.join(MANIFEST_FILE), bytes).map_err(|e| e.to_string())?;
    read_manifest(dir).map(|_| ()).map_err(|e| e.to_string())
}

/// The damage starts from encodings that decode: otherwise the fuzzing would only ever see junk.
#[test]
fn the_seeds_are_valid_encodings() {
    for (bytes, envelope) in frames().iter().zip(envelopes()) {
        assert_eq!(frame::decode::<Envelope>(bytes).expect("a seed frame decodes"), envelope);
    }
    for (kind, bytes) in records() {
        Record::decode(kind, &bytes).expect("a seed record decodes");
    }
}
