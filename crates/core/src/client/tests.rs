//! The transaction client driven by hand: each test plays the near's answers.

use super::*;
use crate::ids::{Key, TxId, VnodeId};
use crate::io::{Request, Response};
use crate::message::AbortReason;
use crate::store::{ReadCheck, ResolvedWrite, Write, WriteOp};
use crate::Breaks;
use waymark_resp::Reply;

fn k(s: &str) -> Key {
    s.as_bytes().to_vec()
}

fn tx(seq: u32) -> TxId {
    TxId { near: VnodeId::new("store0", "h1"), incarnation: 0, seq }
}

fn value(v: &str, version: u64) -> Option<Response> {
    Some(Response::Value { value: Some(k(v)), version, deadline_ms: None, now_ms: 0 })
}

fn committed(seq: u32, written: &[(&str, &str, u64)]) -> Option<Response> {
    let writes = written.iter().map(|(key, v, version)| ResolvedWrite {
        key: k(key),
        value: Some(k(v)),
        version: *version,
        deadline_ms: None,
    });
    Some(Response::Committed { tx: tx(seq), writes: writes.collect() })
}

fn aborted(reason: AbortReason) -> Option<Response> {
    Some(Response::Aborted { tx: Some(tx(9)), reason })
}

fn client() -> TxnClient {
    TxnClient::new(ClientLimits::default(), Breaks::default())
}

fn sent(step: Step) -> Vec<Request> {
    match step {
        Step::Send(requests) => requests,
        other => panic!("expected requests, got {other:?}"),
    }
}

fn done(step: Step) -> Finished {
    match step {
        Step::Done(finished) => finished,
        other => panic!("expected the end of the batch, got {other:?}"),
    }
}

fn gets(keys: &[&str]) -> Vec<Request> {
    keys.iter().map(|key| Request::Get { key: k(key) }).collect()
}

fn watch(c: &mut TxnClient, keys: &[(&str, &str, u64)]) {
    let names: Vec<&str> = keys.iter().map(|(key, ..)| *key).collect();
    assert_eq!(sent(c.watch(names.iter().map(|n| k(n)).collect())), gets(&names));
    let finished = done(c.on_answers(keys.iter().map(|(_, v, version)| value(v, *version)).collect()));
    assert_eq!(finished.answer, Answer::Replies(vec![Reply::ok()]));
}

#[test]
fn a_watched_transfer_commits_with_the_watched_versions_as_read_checks() {
    let mut c = client();
    watch(&mut c, &[("a", "100", 3), ("b", "50", 7)]);
    let step = c.exec(vec![DataCmd::IncrBy(k("a"), -10), DataCmd::IncrBy(k("b"), 10)]);
    let reads = vec![ReadCheck { key: k("a"), version: 3 }, ReadCheck { key: k("b"), version: 7 }];
    let writes = vec![Write { key: k("a"), op: WriteOp::IncrBy(-10) }, Write { key: k("b"), op: WriteOp::IncrBy(10) }];
    assert_eq!(sent(step), vec![Request::Txn { reads: reads.clone(), writes }]);
    let finished = done(c.on_answers(vec![committed(1, &[("a", "90", 4), ("b", "60", 8)])]));
    assert_eq!(finished.answer, Answer::Replies(vec![Reply::Integer(90), Reply::Integer(60)]));
    assert_eq!(finished.ended, Ended::Committed);
    assert_eq!(finished.attempts[0].reads, reads);
    assert!(c.watched().is_empty(), "EXEC forgets the WATCHed keys");
}

#[test]
fn an_exec_whose_watched_key_changed_answers_nil() {
    let mut c = client();
    watch(&mut c, &[("a", "100", 3)]);
    sent(c.exec(vec![DataCmd::Set(k("a"), k("1"))]));
    let finished = done(c.on_answers(vec![aborted(AbortReason::WatchFailed { key: k("a") })]));
    assert_eq!((finished.answer, finished.ended), (Answer::WatchFailed, Ended::WatchFailed));
}

#[test]
fn reads_of_keys_unchanged_since_the_watch_skip_the_commit() {
    let mut c = client();
    watch(&mut c, &[("a", "100", 3), ("b", "50", 7)]);
    assert_eq!(sent(c.command(DataCmd::MGet(vec![k("a"), k("b")]))), gets(&["a", "b"]));
    let finished = done(c.on_answers(vec![value("100", 3), value("50", 7)]));
    assert_eq!(finished.answer, Answer::Replies(vec![Reply::Array(vec![Reply::bulk("100"), Reply::bulk("50")])]));
    assert_eq!(finished.attempts[0].tx, None, "answered from the reads alone");
}

#[test]
fn reads_of_a_key_that_moved_since_the_watch_need_the_commit() {
    let mut c = client();
    watch(&mut c, &[("a", "100", 3), ("b", "50", 7)]);
    sent(c.command(DataCmd::MGet(vec![k("a"), k("b")])));
    let step = c.on_answers(vec![value("100", 3), value("55", 8)]);
    let reads = vec![ReadCheck { key: k("a"), version: 3 }, ReadCheck { key: k("b"), version: 8 }];
    assert_eq!(sent(step), vec![Request::Txn { reads, writes: vec![] }]);
}

#[test]
fn a_conflict_is_retried_after_a_back_off_with_fresh_reads_and_a_fresh_evaluation() {
    let mut c = client();
    sent(c.exec(vec![DataCmd::Get(k("l")), DataCmd::Append(k("l"), k("2,"))]));
    sent(c.on_answers(vec![value("1,", 1)]));
    let step = c.on_answers(vec![aborted(AbortReason::LockConflict { key: k("l") })]);
    assert!(matches!(step, Step::Backoff { base_us: BACKOFF_MIN_US, .. }), "{step:?}");
    assert_eq!(sent(c.resume()), gets(&["l"]));
    let step = c.on_answers(vec![value("1,5,", 2)]);
    let reads = vec![ReadCheck { key: k("l"), version: 2 }];
    let writes = vec![Write { key: k("l"), op: WriteOp::Set(k("1,5,2,")) }];
    assert_eq!(sent(step), vec![Request::Txn { reads, writes }]);
    let finished = done(c.on_answers(vec![committed(2, &[("l", "1,5,2,", 3)])]));
    assert_eq!(finished.answer, Answer::Replies(vec![Reply::bulk("1,5,"), Reply::Integer(6)]));
    assert_eq!((finished.retries, finished.attempts.len()), (1, 2));
    assert_eq!(finished.attempts[0].outcome, AttemptOutcome::Aborted);
}

#[test]
fn conflicts_past_the_limit_end_the_batch_with_an_error() {
    let limits = ClientLimits { conflict_retries_max: 3, ..ClientLimits::default() };
    let mut c = TxnClient::new(limits, Breaks::default());
    let mut step = c.command(DataCmd::Set(k("a"), k("1")));
    for _ in 0..2 {
        sent(step);
        let backoff = c.on_answers(vec![aborted(AbortReason::LockConflict { key: k("a") })]);
        assert!(matches!(backoff, Step::Backoff { .. }));
        step = c.resume();
    }
    sent(step);
    let finished = done(c.on_answers(vec![aborted(AbortReason::LockConflict { key: k("a") })]));
    assert_eq!(finished.ended, Ended::Conflicts);
    assert!(matches!(finished.answer, Answer::Error(e) if e.contains("3 times by conflicting transactions")));
}

#[test]
fn an_incrby_on_text_in_exec_falls_back_to_evaluation_where_only_it_fails() {
    let mut c = client();
    let cmds = vec![DataCmd::IncrBy(k("t"), 1), DataCmd::Set(k("u"), k("x"))];
    sent(c.exec(cmds));
    let step = c.on_answers(vec![aborted(AbortReason::NotAnInteger { key: k("t") })]);
    assert_eq!(sent(step), gets(&["t"]));
    let step = c.on_answers(vec![value("text", 4)]);
    let writes = vec![Write { key: k("u"), op: WriteOp::Set(k("x")) }];
    assert_eq!(sent(step), vec![Request::Txn { reads: vec![ReadCheck { key: k("t"), version: 4 }], writes }]);
    let finished = done(c.on_answers(vec![committed(3, &[("u", "x", 1)])]));
    let not_an_integer = Reply::error("ERR value is not an integer or out of range");
    assert_eq!(finished.answer, Answer::Replies(vec![not_an_integer, Reply::ok()]));
}

#[test]
fn a_commit_not_answered_in_time_is_an_unknown_outcome() {
    let mut c = client();
    sent(c.command(DataCmd::IncrBy(k("n"), 1)));
    let finished = done(c.on_answers(vec![None]));
    assert_eq!(finished.attempts[0].outcome, AttemptOutcome::Unknown);
    assert!(matches!(finished.answer, Answer::Error(e) if e.contains("timed out")));
}

#[test]
fn each_client_break_changes_what_is_sent() {
    let breaks = Breaks { client_ignores_watch: true, ..Breaks::default() };
    let mut c = TxnClient::new(ClientLimits::default(), breaks);
    watch(&mut c, &[("a", "100", 3)]);
    let writes = vec![Write { key: k("a"), op: WriteOp::Set(k("1")) }];
    assert_eq!(sent(c.exec(vec![DataCmd::Set(k("a"), k("1"))])), vec![Request::Txn { reads: vec![], writes }]);

    let breaks = Breaks { client_skips_read_only_commit: true, ..Breaks::default() };
    let mut c = TxnClient::new(ClientLimits::default(), breaks);
    sent(c.command(DataCmd::MGet(vec![k("a"), k("b")])));
    done(c.on_answers(vec![value("1", 1), value("2", 1)]));
}

mod unchanged_since_seen {
    use super::super::run::unchanged_since_seen;
    use crate::ids::{Key, Version};
    use std::collections::BTreeMap;

    fn versions(pairs: &[(&str, Version)]) -> BTreeMap<Key, Version> {
        pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), *v)).collect()
    }

    fn keys(names: &[&str]) -> Vec<Key> {
        names.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    #[test]
    fn reads_of_keys_unchanged_since_the_watch_need_no_commit() {
        let seen = versions(&[("a", 3), ("b", 7)]);
        assert!(unchanged_since_seen(&keys(&["a", "b"]), &versions(&[("a", 3), ("b", 7)]), &BTreeMap::new(), &seen));
    }

    #[test]
    fn a_key_moved_or_never_seen_needs_the_commit() {
        let seen = versions(&[("a", 3), ("b", 7)]);
        let none = BTreeMap::new();
        assert!(!unchanged_since_seen(&keys(&["a", "b"]), &versions(&[("a", 3), ("b", 8)]), &none, &seen));
        assert!(!unchanged_since_seen(&keys(&["a", "c"]), &versions(&[("a", 3), ("c", 1)]), &none, &seen));
        assert!(!unchanged_since_seen(&[], &none, &none, &seen));
    }

    #[test]
    fn a_watched_key_not_read_again_needs_the_commit() {
        // WATCH a b; MULTI; GET b; EXEC — `a` may have moved: only the commit's check tells.
        let watched = versions(&[("a", 3), ("b", 7)]);
        let checks = versions(&[("a", 3), ("b", 7)]);
        assert!(!unchanged_since_seen(&keys(&["b"]), &checks, &watched, &watched));
    }
}

#[test]
fn an_append_beside_a_get_of_another_key_is_evaluated_by_its_primary() {
    let mut c = client();
    let step = c.exec(vec![DataCmd::Get(k("l1")), DataCmd::Append(k("l2"), k("7,"))]);
    assert_eq!(sent(step), gets(&["l1"]));
    let step = c.on_answers(vec![value("3,", 5)]);
    let reads = vec![ReadCheck { key: k("l1"), version: 5 }];
    let writes = vec![Write { key: k("l2"), op: WriteOp::Append(k("7,")) }];
    assert_eq!(sent(step), vec![Request::Txn { reads, writes }]);
    let finished = done(c.on_answers(vec![committed(4, &[("l2", "1,7,", 2)])]));
    assert_eq!(finished.answer, Answer::Replies(vec![Reply::bulk("3,"), Reply::Integer(4)]));
}

#[test]
fn an_append_its_primary_refuses_for_its_size_answers_the_error_alone_in_exec() {
    let mut c = client();
    sent(c.exec(vec![DataCmd::Append(k("a"), k("xx")), DataCmd::Set(k("b"), k("y"))]));
    let step = c.on_answers(vec![aborted(AbortReason::ValueTooLarge { key: k("a") })]);
    assert_eq!(sent(step), gets(&["a"]), "evaluated here instead");
    let big = "v".repeat(ClientLimits::default().value_max_bytes - 1);
    let step = c.on_answers(vec![value(&big, 3)]);
    let writes = vec![Write { key: k("b"), op: WriteOp::Set(k("y")) }];
    assert_eq!(sent(step), vec![Request::Txn { reads: vec![ReadCheck { key: k("a"), version: 3 }], writes }]);
    let finished = done(c.on_answers(vec![committed(5, &[("b", "y", 1)])]));
    let Answer::Replies(replies) = finished.answer else { panic!("replies") };
    assert!(matches!(&replies[0], Reply::Error(e) if e.contains("exceeds maximum allowed size")));
    assert_eq!(replies[1], Reply::ok());

    sent(c.command(DataCmd::Append(k("a"), k("xx"))));
    let finished = done(c.on_answers(vec![aborted(AbortReason::ValueTooLarge { key: k("a") })]));
    assert!(matches!(finished.answer, Answer::Error(e) if e.contains("exceeds maximum allowed size (4194304 bytes)")));
}
