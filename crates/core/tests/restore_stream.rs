//! The streaming restore filter (`CutReplay`) against the filter as it was before it streamed,
//! kept here verbatim as the reference: on generated logs (prepares, commits with and without
//! their writes, rollbacks, cut markers of this cut and others, finishes with any `before` and
//! `after`), a replay that knows the finish up front and one that seeks it (running again when
//! it must) end in the same store, the same included transactions, or the same error.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use waymark_core::cut::restore::{
    find_finish, Checkpoint, CutReplay, KeepWhole, Replayed, RestoreError, Restored, Step,
};
use waymark_core::record::{CutFinish, Prepared};
use waymark_core::{Branch, CutId, Record, RecordView, ResolvedWrite, Role, Store, TxId, VnodeId};

const CUT: CutId = CutId(1);

/// `restore_to_cut` before this change, word for word (without the simulator's breaks).
fn reference(base: Checkpoint, log: &[Record], target: &CutFinish) -> Result<Restored, RestoreError> {
    let Checkpoint { mut store, mut prepared } = base;
    let mut included = BTreeSet::new();
    let mut inside = false;
    for (index, record) in log.iter().enumerate() {
        match record {
            Record::TxPrepared(p) => drop(prepared.insert(p.branch(), p.writes.clone())),
            Record::TxRolledBack { branch: Some(branch), .. } => drop(prepared.remove(branch)),
            Record::TxCommitted { branch, writes, .. } => {
                let tx = &branch.tx;
                let writes = if !writes.is_empty() {
                    writes.to_vec()
                } else {
                    prepared
                        .remove(branch)
                        .ok_or_else(|| RestoreError::CommitWithoutPrepare { tx: branch.tx.clone(), index })?
                };
                let keep = if inside { target.before.contains(tx) } else { !target.after.contains(tx) };
                if keep {
                    store.apply_all(&writes);
                    included.insert(tx.clone());
                }
            }
            Record::CutStart { cut } if *cut == target.cut => inside = true,
            Record::CutFinish(f) if f.cut == target.cut => {
                if !inside {
                    return Err(RestoreError::NoStart { cut: target.cut });
                }
                if f != target {
                    return Err(RestoreError::FinishMismatch { cut: target.cut });
                }
                return Ok(Restored { store, digests: Default::default(), included });
            }
            _ => {}
        }
    }
    if inside {
        Err(RestoreError::NoFinish { cut: target.cut })
    } else {
        Err(RestoreError::NoStart { cut: target.cut })
    }
}

/// Feeds `log`, decoded from its bytes as the server does, to `replay`.
fn run(mut replay: CutReplay, log: &[Record]) -> Result<Replayed, RestoreError> {
    for record in log {
        let bytes = record.encode();
        let view = RecordView::decode(record.kind(), &bytes).expect("a record decodes as a view");
        if replay.step(view)? == Step::Finished {
            break;
        }
    }
    replay.finish()
}

/// `replay`, keeping whole only what `whole` says if it says anything.
fn keeping(replay: CutReplay, whole: &Option<KeepWhole>) -> CutReplay {
    match whole {
        Some(whole) => replay.keeping_whole(whole.clone()),
        None => replay,
    }
}

/// A replay that seeks its finish, and runs again toward it when it says so.
fn seeking(base: &Checkpoint, log: &[Record]) -> Result<Restored, RestoreError> {
    seeking_with(base, log, &None)
}

fn seeking_with(base: &Checkpoint, log: &[Record], whole: &Option<KeepWhole>) -> Result<Restored, RestoreError> {
    match run(keeping(CutReplay::seeking(base.clone(), CUT), whole), log)? {
        Replayed::Restored(r) => Ok(r),
        Replayed::Again(finish) => {
            match run(keeping(CutReplay::toward(base.clone(), finish, Default::default()), whole), log)? {
                Replayed::Restored(r) => Ok(r),
                Replayed::Again(_) => panic!("a replay toward a known finish asked again"),
            }
        }
    }
}

fn toward(base: &Checkpoint, log: &[Record], target: &CutFinish) -> Result<Restored, RestoreError> {
    toward_with(base, log, target, &None)
}

fn toward_with(
    base: &Checkpoint,
    log: &[Record],
    target: &CutFinish,
    whole: &Option<KeepWhole>,
) -> Result<Restored, RestoreError> {
    match run(keeping(CutReplay::toward(base.clone(), target.clone(), Default::default()), whole), log)? {
        Replayed::Restored(r) => Ok(r),
        Replayed::Again(_) => panic!("a replay toward a known finish asked again"),
    }
}

/// What a replay keeping whole the keys `whole` accepts should end in: `full` split by key, the
/// other side's values digested.
fn split(full: Restored, whole: &KeepWhole) -> Restored {
    let (store, rest) = full.store.split_by(|k| whole(k));
    Restored { store, digests: rest.digested(), included: full.included }
}

fn vnode(i: u8) -> VnodeId {
    VnodeId::new("store0", format!("node{i}"))
}

fn tx(seq: u8) -> TxId {
    TxId { near: vnode(seq % 2), incarnation: 0, seq: u32::from(seq) }
}

fn branch(seq: u8, upstream: u8, backup: bool) -> Branch {
    Branch { tx: tx(seq), upstream: vnode(upstream), role: if backup { Role::Backup } else { Role::Primary } }
}

fn writes() -> impl Strategy<Value = Vec<ResolvedWrite>> {
    let write = (0u8..4, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)), 0u64..5)
        .prop_map(|(k, value, version)| ResolvedWrite { key: vec![b'k', k], value, version, deadline_ms: None });
    proptest::collection::vec(write, 0..3)
}

fn txs() -> impl Strategy<Value = BTreeSet<TxId>> {
    proptest::collection::btree_set((0u8..6).prop_map(tx), 0..4)
}

fn record() -> impl Strategy<Value = Record> {
    let b = (0u8..6, 0u8..2, any::<bool>()).prop_map(|(s, u, r)| branch(s, u, r));
    prop_oneof![
        4 => (b.clone(), writes()).prop_map(|(b, writes)| Record::TxPrepared(Prepared {
            tx: b.tx,
            writes,
            first_committer: vnode(0),
            upstream: b.upstream,
            downstream: vec![],
            one_phase: false,
            role: b.role,
            after: vec![],
            read_locks: vec![],
        })),
        5 => (b.clone(), writes()).prop_map(|(branch, writes)| Record::TxCommitted { branch, tx_cut: None, writes }),
        1 => proptest::option::of(b).prop_map(|branch| Record::TxRolledBack { tx: tx(0), branch }),
        1 => (1u64..3).prop_map(|c| Record::CutStart { cut: CutId(c) }),
        1 => ((1u64..3), txs(), txs()).prop_map(|(c, before, after)| Record::CutFinish(CutFinish { cut: CutId(c), before, after })),
        1 => Just(Record::Boot { incarnation: 1 }),
    ]
}

fn base() -> impl Strategy<Value = Checkpoint> {
    let prepared = proptest::collection::btree_map(
        (0u8..6, 0u8..2, any::<bool>()).prop_map(|(s, u, r)| branch(s, u, r)),
        writes(),
        0..3,
    );
    (writes(), prepared).prop_map(|(data, prepared): (Vec<ResolvedWrite>, BTreeMap<Branch, Vec<ResolvedWrite>>)| {
        let mut store = Store::default();
        store.apply_all(&data);
        Checkpoint { store, prepared }
    })
}

/// A log that reaches the cut (start, some commits, a finish) more often than chance would.
fn log() -> impl Strategy<Value = Vec<Record>> {
    let part = || proptest::collection::vec(record(), 0..12);
    (part(), part(), txs(), txs(), part(), any::<bool>()).prop_map(|(mut pre, window, before, after, post, marked)| {
        if marked {
            pre.push(Record::CutStart { cut: CUT });
            pre.extend(window);
            pre.push(Record::CutFinish(CutFinish { cut: CUT, before, after }));
        } else {
            pre.extend(window);
        }
        pre.extend(post);
        pre
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn streaming_replays_restore_what_the_reference_restores(base in base(), log in log()) {
        let Some(target) = find_finish(&log, CUT).cloned() else {
            // Without a finish there is nothing to restore; which error comes first (this, or a
            // commit without its prepare on the way) is the caller's to say, as the server does.
            prop_assert!(seeking(&base, &log).is_err());
            return Ok(());
        };
        let expected = reference(base.clone(), &log, &target);
        prop_assert_eq!(&toward(&base, &log, &target), &expected);
        prop_assert_eq!(&seeking(&base, &log), &expected);
    }

    /// Keeping some keys whole moves the others to `digests`, with their versions and their values'
    /// digests, and changes nothing else: not the whole keys, not what is included, not the errors.
    #[test]
    fn a_replay_keeping_some_keys_whole_digests_exactly_the_others(
        base in base(),
        log in log(),
        whole_keys in proptest::collection::btree_set(0u8..4, 0..4),
    ) {
        let Some(target) = find_finish(&log, CUT).cloned() else { return Ok(()) };
        let whole: KeepWhole = Arc::new(move |k: &[u8]| k.get(1).is_some_and(|k| whole_keys.contains(k)));
        let expected = reference(base.clone(), &log, &target).map(|r| split(r, &whole));
        let whole = Some(whole);
        prop_assert_eq!(&toward_with(&base, &log, &target, &whole), &expected);
        prop_assert_eq!(&seeking_with(&base, &log, &whole), &expected);
    }
}

/// `after` names a transaction committed before `CutStart`: the seeking replay, which applied it,
/// asks to run again, and the second pass leaves it out.
#[test]
fn a_finish_that_excludes_an_early_commit_makes_a_seeking_replay_run_again() {
    let early = branch(1, 0, false);
    let write = ResolvedWrite { key: b"k".to_vec(), value: Some(b"early".to_vec()), version: 1, deadline_ms: None };
    let finish = CutFinish { cut: CUT, before: BTreeSet::new(), after: [early.tx.clone()].into() };
    let log = vec![
        Record::TxCommitted { branch: early, tx_cut: None, writes: vec![write] },
        Record::CutStart { cut: CUT },
        Record::CutFinish(finish.clone()),
    ];
    let first = run(CutReplay::seeking(Checkpoint::default(), CUT), &log).unwrap();
    assert_eq!(first, Replayed::Again(finish.clone()));
    let restored = seeking(&Checkpoint::default(), &log).unwrap();
    assert!(restored.store.is_empty() && restored.included.is_empty());
    assert_eq!(Ok(restored), reference(Checkpoint::default(), &log, &finish));
}
