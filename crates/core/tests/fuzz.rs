//! Peer messages and WAL records under the stable-toolchain fuzzer (`waymark_fuzz`): a
//! mutation-based random tester over the committed corpora `fuzz/corpus/peer_message/` and
//! `fuzz/corpus/wal_record/`, seeded and bounded — not coverage-guided. The coverage-guided runs
//! of the same bodies are nightly-only: `cd crates/core/fuzz && cargo +nightly fuzz run
//! peer_message corpus/peer_message` (or `wal_record`).

use std::collections::BTreeSet;
use waymark_core::alter::{AlterMsg, AlterRecord, AlterSeq, ProposalId, Relayed, Term};
use waymark_core::cut::versions::TxVersion;
use waymark_core::fuzzing::{peer_message, wal_record};
use waymark_core::message::{PrepareWrites, TxStatus};
use waymark_core::record::Prepared;
use waymark_core::{
    AbortReason, Body, Branch, CutFinish, CutId, CutMsg, Envelope, ReadCheck, Record, ResolvedWrite, Role, TxId,
    TxnMsg, VnodeId, Write, WriteOp,
};
use waymark_fuzz::{corpus_dir, BoundedAlloc, Campaign};

/// A message or record of a few KiB has no reason to make its decoder hold more than this.
#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc::new(64 << 20, 1 << 30);

#[test]
fn peer_messages_of_any_bytes_are_decoded_or_refused_never_a_crash() {
    let summary = Campaign::new("peer_message", corpus_dir(env!("CARGO_MANIFEST_DIR"), "peer_message"))
        .mutants(600_000)
        .run(peer_message);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant decoded: the mutations are too coarse");
}

#[test]
fn wal_records_of_any_bytes_are_decoded_alike_by_recovery_and_restore_or_refused() {
    let summary = Campaign::new("wal_record", corpus_dir(env!("CARGO_MANIFEST_DIR"), "wal_record"))
        .mutants(600_000)
        .run(wal_record);
    assert!(summary.accepted > summary.corpus_files as u32, "no mutant decoded: the mutations are too coarse");
}

fn v(kind: &str, host: &str) -> VnodeId {
    VnodeId::new(kind, host)
}

fn tx(seq: u32) -> TxId {
    TxId { near: v("store0", "node1"), incarnation: 2, seq }
}

fn branch() -> Branch {
    Branch { tx: tx(5), upstream: v("store1", "node2"), role: Role::Backup }
}

fn resolved() -> Vec<ResolvedWrite> {
    vec![
        ResolvedWrite { key: b"user:1".to_vec(), value: Some(b"alice".to_vec()), version: 9, deadline_ms: None },
        ResolvedWrite { key: b"gone".to_vec(), value: None, version: 10, deadline_ms: None },
        ResolvedWrite {
            key: b"session".to_vec(),
            value: Some(b"s".to_vec()),
            version: 2,
            deadline_ms: Some(1_796_000_000_000),
        },
        ResolvedWrite { key: b"expired".to_vec(), value: None, version: 3, deadline_ms: Some(1_796_000_000_001) },
    ]
}

/// One envelope of each kind of body the links carry most, with real-looking fields.
fn envelopes() -> Vec<(&'static str, Envelope)> {
    let propose = AlterMsg::Propose {
        id: ProposalId { initiator: v("store0", "node1"), n: 7 },
        record: AlterRecord::set("config/x", "1"),
    };
    let bodies = vec![
        (
            "prepare",
            Body::Txn(TxnMsg::Prepare {
                tx: tx(1),
                reads: vec![ReadCheck { key: b"a".to_vec(), version: 3 }],
                writes: PrepareWrites::Unresolved(vec![
                    Write { key: b"a".to_vec(), op: WriteOp::Set(b"1".to_vec()) },
                    Write { key: b"n".to_vec(), op: WriteOp::IncrBy(-4) },
                    Write { key: b"s".to_vec(), op: WriteOp::Append(b"xy".to_vec()) },
                    Write { key: b"d".to_vec(), op: WriteOp::Del },
                ]),
                one_phase: false,
                first_committer: v("store0", "node1"),
                downstream: vec![v("store0", "node2"), v("store0", "node3")],
                after: vec![tx(0)],
                epoch: 4,
            }),
        ),
        (
            "prepare-ack",
            Body::Txn(TxnMsg::PrepareAck {
                tx: tx(1),
                role: Role::Primary,
                result: Ok(resolved()),
                tx_cut: Some(CutId(2)),
            }),
        ),
        (
            "prepare-refused",
            Body::Txn(TxnMsg::PrepareAck {
                tx: tx(1),
                role: Role::Backup,
                result: Err(AbortReason::LockConflict { key: b"a".to_vec() }),
                tx_cut: None,
            }),
        ),
        (
            "read-reply",
            Body::Txn(TxnMsg::ReadReply {
                req: 12,
                value: Some(b"v".to_vec()),
                version: 3,
                writer_cut: None,
                deadline_ms: Some(9),
                now_ms: 1,
            }),
        ),
        ("status-reply", Body::Txn(TxnMsg::StatusReply { tx: tx(1), status: TxStatus::Committed { tx_cut: None } })),
        ("cut-finished", Body::Cut(CutMsg::Finished { cut: CutId(8), ok: true })),
        ("alter-reach", Body::Alter(AlterMsg::Reach { hears: vec![v("store0", "node2"), v("manager1", "node1")] })),
        ("alter-propose", Body::Alter(propose.clone())),
        (
            "alter-relay",
            Body::Alter(AlterMsg::Relay {
                to: v("store0", "node3"),
                origin: v("store0", "node1"),
                msg: Relayed::wrap(&propose).expect("a proposal is relayed"),
            }),
        ),
    ];
    bodies
        .into_iter()
        .map(|(name, body)| {
            (name, Envelope { from: v("store0", "node1"), to: v("store0", "node2"), cut: Some(CutId(3)), body })
        })
        .collect()
}

/// One record of each kind recovery and a restore meet most.
fn records() -> Vec<(&'static str, Record)> {
    let finish = CutFinish { cut: CutId(4), before: BTreeSet::from([tx(1)]), after: BTreeSet::from([tx(2), tx(3)]) };
    vec![
        ("boot", Record::Boot { incarnation: 3 }),
        (
            "prepared",
            Record::TxPrepared(Prepared {
                tx: tx(5),
                writes: resolved(),
                first_committer: v("store0", "node1"),
                upstream: v("store1", "node2"),
                downstream: vec![v("store0", "node3")],
                one_phase: true,
                role: Role::Backup,
                after: vec![tx(4)],
                read_locks: vec![b"r".to_vec()],
            }),
        ),
        ("committed", Record::TxCommitted { branch: branch(), tx_cut: Some(CutId(4)), writes: resolved() }),
        ("rolled-back", Record::TxRolledBack { tx: tx(5), branch: Some(branch()) }),
        ("tombstone", Record::TxRolledBack { tx: tx(6), branch: None }),
        ("decided", Record::TxDecided { tx: tx(5), tx_cut: None }),
        ("cut-start", Record::CutStart { cut: CutId(4) }),
        ("cut-finish", Record::CutFinish(finish)),
        (
            "alteration",
            Record::Alteration { seq: AlterSeq(3), bytes: AlterRecord::set("k", "v").encode(Default::default()) },
        ),
        ("alter-applied", Record::AlterApplied { term: Term(2), seq: AlterSeq(3), record: AlterRecord::set("k", "v") }),
        ("versions-local-state", Record::VersionsLocalState { cut: CutId(4), snp: TxVersion::of(&tx(7)) }),
        ("versions-skip", Record::VersionsSkip { cut: CutId(4), skip: BTreeSet::from([tx(8)]) }),
    ]
}

/// The seed corpora: the encodings the code writes of the values above (`valid-…`, each must
/// decode), and a few edges. `cargo test -p waymark-core --test fuzz -- --ignored` rewrites them.
#[test]
#[ignore]
fn writes_the_seed_corpus() {
    let messages = corpus_dir(env!("CARGO_MANIFEST_DIR"), "peer_message");
    std::fs::create_dir_all(&messages).unwrap();
    for (name, envelope) in envelopes() {
        std::fs::write(messages.join(format!("valid-{name}")), postcard::to_allocvec(&envelope).unwrap()).unwrap();
    }
    // A relay whose carried bytes are a relay header repeated: the stack overflow that `Relayed`
    // fixed came from frames like it.
    let relay = postcard::to_allocvec(&Envelope {
        from: v("store0", "node1"),
        to: v("store0", "node2"),
        cut: None,
        body: Body::Alter(AlterMsg::Relay {
            to: v("a", "b"),
            origin: v("c", "d"),
            msg: Relayed::wrap(&AlterMsg::Reach { hears: vec![] }).unwrap(),
        }),
    })
    .unwrap();
    let nested: Vec<u8> = relay.iter().copied().cycle().take(relay.len() * 64).collect();
    std::fs::write(messages.join("nested-relays"), nested).unwrap();
    std::fs::write(messages.join("huge-count"), [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0]).unwrap();

    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "wal_record");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, record) in records() {
        let mut bytes = vec![record.kind()];
        bytes.extend(record.encode());
        std::fs::write(dir.join(format!("valid-{name}")), bytes).unwrap();
    }
    // A commit's bytes under a prepare's kind: the two decoders must both refuse it.
    let (_, committed) = &records()[2];
    let mut mismatch = vec![records()[1].1.kind()];
    mismatch.extend(committed.encode());
    std::fs::write(dir.join("kind-mismatch"), mismatch).unwrap();
}
