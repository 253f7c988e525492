//! Peer frames, WAL segments, checkpoints and snapshot manifests under the stable-toolchain fuzzer
//! (`waymark_fuzz`): a mutation-based random tester over the committed corpora
//! `fuzz/corpus/<target>/`, seeded and bounded — not coverage-guided. The bodies are in
//! `waymark_server::fuzzing`; the coverage-guided runs of the same bodies are nightly-only:
//! `cd crates/server/fuzz && cargo +nightly fuzz run peer_frames corpus/peer_frames` (or
//! `wal_segment`, `checkpoint`, `manifest`).

use std::path::Path;
use waymark_core::alter::Metadata;
use waymark_core::{CutId, ResolvedWrite, TreeImage, TxId, VnodeId, VnodeImage};
use waymark_fuzz::{corpus_dir, BoundedAlloc, Campaign};
use waymark_server::fuzzing::{checkpoint, manifest, peer_frames, wal_segment};
use waymark_server::net::auth::Handshake;
use waymark_server::net::frame;
use waymark_server::snapshot::manifest::{
    write_manifest, ClusterShape, FileEntry, Kind, Manifest, VnodeFiles, FORMAT, MANIFEST_FILE,
};
use waymark_server::storage::checkpoint::{self as checkpoint_file, Image};
use waymark_wal::segment::{segment_file_name, HEADER_BYTES};
use waymark_wal::{Options, Position, Wal};

/// Inputs of a few KiB have no reason to make a decoder hold more than this.
#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc::new(128 << 20, 1 << 30);

fn campaign(target: &'static str) -> Campaign {
    Campaign::new(target, corpus_dir(env!("CARGO_MANIFEST_DIR"), target))
}

#[test]
fn peer_frames_of_any_bytes_are_refused_or_decoded_never_a_crash() {
    let summary = campaign("peer_frames").mutants(400_000).run(peer_frames);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant decoded: the mutations are too coarse");
}

#[test]
fn wal_segments_of_any_bytes_are_recovered_or_refused_never_a_crash() {
    let summary = campaign("wal_segment").mutants(25_000).run(wal_segment);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant opened: the mutations are too coarse");
}

#[test]
fn checkpoints_of_any_bytes_are_read_or_refused_never_a_crash() {
    let summary = campaign("checkpoint").mutants(80_000).run(checkpoint);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant read: the mutations are too coarse");
}

#[test]
fn manifests_of_any_bytes_are_read_and_checked_or_refused_never_a_crash() {
    let summary = campaign("manifest").mutants(50_000).run(manifest);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant read: the mutations are too coarse");
}

/// A corpus file kept from a crash the campaign found, run alone so that its test names it.
fn crash(target: &'static str, file: &str, body: impl Fn(&[u8]) -> bool) -> bool {
    let path = corpus_dir(env!("CARGO_MANIFEST_DIR"), target).join(file);
    body(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Found by the campaign: a manifest of kind `Increment` numbered 0, in the full snapshot's place.
/// The check took member 0 for an increment and looked up member -1 (a subtraction overflow that
/// panicked `waymark snapshot check` and a restore); it is a problem of the chain now.
#[test]
fn an_increment_numbered_zero_in_the_full_snapshots_place_is_a_problem_not_a_panic() {
    assert!(crash("manifest", "crash-increment-numbered-zero", manifest), "the manifest itself reads");
}

/// Found by the campaign: a manifest claiming 2147483647 partitions. `fewer_copies` (the check's)
/// built a map of every partition up front — a 32 GiB allocation that aborted the process, as a
/// restore's placement would have; a manifest is refused at read now unless its partition count
/// is one a cluster can have.
#[test]
fn a_manifest_of_more_partitions_than_a_cluster_can_have_is_refused_not_an_abort() {
    assert!(!crash("manifest", "crash-huge-partition-count", manifest), "the manifest is refused");
}

/// Found by the campaign: a manifest whose file sizes add up past `u64::MAX`. The check's total
/// overflowed (a panic in a debug build, a wrong total in a release one); totals saturate now.
#[test]
fn file_sizes_that_add_up_past_u64_max_are_checked_without_overflow() {
    assert!(crash("manifest", "crash-file-sizes-overflow", manifest), "the manifest itself reads");
}

/// Found by the campaign: a store's checkpoint whose map of decisions claims 4294967295 entries
/// (its checksum right). imbl's decoder reserved room for every claimed entry up front — 288 GiB —
/// and the start aborted; the image's persistent maps reserve no more than the bytes can hold now.
#[test]
fn a_checkpoint_claiming_a_huge_map_is_refused_not_an_abort() {
    assert!(!crash("checkpoint", "crash-huge-map-length", checkpoint), "the checkpoint is refused");
}

/// The seed corpora, from values the code encodes (`valid-…`, each must decode) and a few edges:
/// peer frames wrap the core's `peer_message` corpus, WAL segments are written by `Wal` from the
/// core's `wal_record` corpus. `cargo test -p waymark-server --test fuzz -- --ignored` rewrites
/// them (after the core's).
#[test]
#[ignore]
fn writes_the_seed_corpus() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/fuzz/corpus");
    let valid = |target: &str| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(core.join(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("valid-"))
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    };
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };

    // Peer frames: selector bytes (default limit, reads of 7 bytes), then the framed bytes.
    let framed = |payloads: &[Vec<u8>]| {
        let mut out = vec![0, 7];
        for payload in payloads {
            out.extend(u32::try_from(payload.len() + 1).unwrap().to_be_bytes());
            out.push(frame::PROTOCOL_VERSION);
            out.extend(payload);
        }
        out
    };
    let messages: Vec<Vec<u8>> = valid("peer_message").into_iter().map(|(_, b)| b).collect();
    for (name, payload) in valid("peer_message") {
        write("peer_frames", &name, &framed(&[payload]));
    }
    write("peer_frames", "valid-several", &framed(&messages[..3]));
    let hello = Handshake::Hello { cluster: "c".into(), host: "node1".into(), nonce: [7; 32] };
    write("peer_frames", "handshake", &[&[0u8, 255][..], &frame::encode(&hello)].concat());
    let mut over_limit = framed(&messages[..1]);
    over_limit[0] = 1; // the 48-byte limit
    write("peer_frames", "over-small-limit", &over_limit);
    write("peer_frames", "huge-length", &[0, 255, 0xff, 0xff, 0xff, 0xff, frame::PROTOCOL_VERSION]);
    write("peer_frames", "empty-frame", &[0, 255, 0, 0, 0, 0]);

    // WAL segments: the core's records, appended by the log itself.
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(dir.path(), Options { preallocate: false, ..Options::default() }).unwrap();
    for (_, record) in valid("wal_record") {
        wal.append(record[0], &record[1..]).unwrap();
    }
    wal.close().unwrap();
    let segment = std::fs::read(dir.path().join(segment_file_name(0))).unwrap();
    for mode in [0u8, 1] {
        write("wal_segment", &format!("valid-records-{mode}"), &[&[mode][..], &segment].concat());
    }
    write("wal_segment", "valid-header-only", &[&[0u8][..], &segment[..HEADER_BYTES as usize]].concat());
    write("wal_segment", "torn-tail", &[&[0u8][..], &segment[..segment.len() - 3]].concat());

    // Checkpoints: a store's and a manager's, as `checkpoint::write` lays them out.
    let tree = TreeImage { metadata: Metadata::default(), term: waymark_core::alter::Term(7) };
    let mut store = VnodeImage::empty(Some(&Metadata::default()));
    let tx = |seq| TxId { near: VnodeId::new("store0", "node1"), incarnation: 1, seq };
    store.store.apply(&ResolvedWrite {
        key: b"user:1".to_vec(),
        value: Some(b"alice".to_vec()),
        version: 3,
        deadline_ms: None,
    });
    store.store.apply(&ResolvedWrite {
        key: b"n".to_vec(),
        value: Some(b"42".to_vec()),
        version: 4,
        deadline_ms: None,
    });
    store.decided = [(tx(3), Some(CutId(2))), (tx(1), None)].into_iter().collect();
    store.tombstones = [tx(5)].into_iter().collect();
    let images = [
        ("store", Image::Store(VnodeImage::empty(Some(&Metadata::default())))),
        ("store-with-data", Image::Store(store)),
        ("manager", Image::Manager(tree)),
    ];
    for (name, image) in images {
        let dir = tempfile::tempdir().unwrap();
        checkpoint_file::write(dir.path(), &image, Position::new(0, HEADER_BYTES)).unwrap();
        let bytes = std::fs::read(dir.path().join(checkpoint_file::FILE_NAME)).unwrap();
        for mode in [0u8, 1] {
            write("checkpoint", &format!("valid-{name}-{mode}"), &[&[mode][..], &bytes].concat());
        }
    }

    // Manifests: a full snapshot and an increment, as `write_manifest` writes them.
    let vnode = |name: &str, checkpoint: bool| VnodeFiles {
        vnode: name.into(),
        partitions: vec![0, 1],
        epochs: [(0, 2)].into(),
        chains: [(0, vec![name.to_string(), "store0@node2".into()])].into(),
        checkpoint: checkpoint.then(|| FileEntry { path: format!("{name}/checkpoint"), size: 120, crc32c: 7 }),
        from: Position::new(0, HEADER_BYTES),
        upto: Position::new(4096, HEADER_BYTES),
        segments: vec![FileEntry { path: format!("{name}/wal/{}", segment_file_name(0)), size: 4096, crc32c: 9 }],
    };
    let full = Manifest {
        format: FORMAT,
        name: "nightly".into(),
        kind: Kind::Full,
        cut: 12,
        strategy: Default::default(),
        created_unix_ms: 1_700_000_000_000,
        cluster: ClusterShape {
            name: "c".into(),
            partitions: 2,
            replicas: 2,
            hosts: vec!["node1".into(), "node2".into()],
        },
        metadata_md5: String::new(),
        vnodes: vec![vnode("store0@node1", true), vnode("store0@node2", false)],
        hosts_down: vec![],
    };
    let increment = Manifest {
        kind: Kind::Increment { number: 1, previous_cut: 12 },
        cut: 13,
        hosts_down: vec!["node3".into()],
        ..full.clone()
    };
    for (name, m) in [("full", full), ("increment", increment)] {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path(), &m).unwrap();
        write("manifest", &format!("valid-{name}"), &std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap());
    }
}
