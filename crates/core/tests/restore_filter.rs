//! The restore filter on hand-made logs (DESIGN §4): before `CutStart` everything committed counts
//! (minus `after`); between `CutStart` and `CutFinish` only `before`; after `CutFinish` nothing.

use std::collections::BTreeSet;
use waymark_core::cut::restore::{restore_to_cut, Checkpoint, RestoreError};
use waymark_core::record::{CutFinish, Prepared};
use waymark_core::{Branch, CutId, Record, ResolvedWrite, Role, TxId, VnodeId};

fn near() -> VnodeId {
    VnodeId::new("store0", "node000")
}

fn tx(seq: u32) -> TxId {
    TxId { near: near(), incarnation: 0, seq }
}

fn branch(seq: u32) -> Branch {
    Branch { tx: tx(seq), upstream: near(), role: Role::Primary }
}

fn write(key: &str, value: &str, version: u64) -> ResolvedWrite {
    ResolvedWrite { key: key.into(), value: Some(value.into()), version, deadline_ms: None }
}

fn prepared(seq: u32, w: ResolvedWrite) -> Record {
    Record::TxPrepared(Prepared {
        tx: tx(seq),
        writes: vec![w],
        first_committer: near(),
        upstream: near(),
        downstream: vec![],
        one_phase: false,
        role: Role::Primary,
        after: vec![],
        read_locks: vec![],
    })
}

fn committed(seq: u32, tx_cut: Option<CutId>) -> Record {
    Record::TxCommitted { branch: branch(seq), tx_cut, writes: vec![] }
}

fn finish(before: &[u32], after: &[u32]) -> CutFinish {
    CutFinish {
        cut: CutId(1),
        before: before.iter().map(|s| tx(*s)).collect::<BTreeSet<_>>(),
        after: after.iter().map(|s| tx(*s)).collect::<BTreeSet<_>>(),
    }
}

fn value(store: &waymark_core::Store, key: &str) -> Option<String> {
    store.get(key.as_bytes()).value.map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn a_transaction_prepared_before_the_log_starts_and_committed_in_the_window_comes_from_the_checkpoint() {
    let mut base = Checkpoint::default();
    base.prepared.insert(branch(1), vec![write("a", "from-checkpoint", 1)]);
    let target = finish(&[1], &[]);
    let log = [Record::CutStart { cut: CutId(1) }, committed(1, None), Record::CutFinish(target.clone())];
    let restored = restore_to_cut(base, &log, &target).unwrap();
    assert_eq!(value(&restored.store, "a").as_deref(), Some("from-checkpoint"));
    assert!(restored.included.contains(&tx(1)));
}

#[test]
fn each_side_of_the_cut_is_kept_or_dropped() {
    let target = finish(&[3], &[4]);
    let log = [
        prepared(1, write("a", "1", 1)),
        committed(1, None), // before the start: kept
        prepared(3, write("b", "3", 1)),
        prepared(4, write("c", "4", 1)),
        Record::CutStart { cut: CutId(1) },
        prepared(5, write("d", "5", 1)),
        committed(3, None),           // in the window and in `before`: kept
        committed(4, Some(CutId(1))), // in the window and in `after`: dropped
        committed(5, Some(CutId(1))), // in the window, not waited for: dropped
        Record::CutFinish(target.clone()),
        prepared(6, write("a", "6", 2)),
        committed(6, None), // after the finish: dropped
    ];
    let restored = restore_to_cut(Checkpoint::default(), &log, &target).unwrap();
    assert_eq!(value(&restored.store, "a").as_deref(), Some("1"));
    assert_eq!(value(&restored.store, "b").as_deref(), Some("3"));
    assert_eq!(value(&restored.store, "c"), None);
    assert_eq!(value(&restored.store, "d"), None);
    assert_eq!(restored.included, [tx(1), tx(3)].into_iter().collect());
}

#[test]
fn a_cut_without_its_finish_cannot_be_restored() {
    let target = finish(&[], &[]);
    let log = [Record::CutStart { cut: CutId(1) }, prepared(1, write("a", "1", 1))];
    assert_eq!(restore_to_cut(Checkpoint::default(), &log, &target), Err(RestoreError::NoFinish { cut: CutId(1) }));
    assert_eq!(restore_to_cut(Checkpoint::default(), &[], &target), Err(RestoreError::NoStart { cut: CutId(1) }));
}

#[test]
fn a_commit_whose_prepare_is_nowhere_is_an_error_not_a_guess() {
    let target = finish(&[], &[]);
    let log = [committed(9, None), Record::CutStart { cut: CutId(1) }, Record::CutFinish(target.clone())];
    let err = restore_to_cut(Checkpoint::default(), &log, &target).unwrap_err();
    assert!(matches!(err, RestoreError::CommitWithoutPrepare { index: 0, .. }), "{err}");
}
