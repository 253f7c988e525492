//! Serializability of the list-append history (see `serializability` for the Elle-style check),
//! with each declared cut's restored lists added as one more committed transaction reading every
//! list. This file only translates what clients saw, and what a cut
//! restores, into that checker's terms.

use super::serializability::{self as elle, Op, TxnRecord};
use super::{Checker, Violation};
use crate::config::WorkloadKind;
use crate::history::{ClientRead, Outcome};
use crate::workloads::append::{list_index, list_key, parse_list, KEYS};
use crate::workloads::parse_i64;
use crate::world::World;
use waymark_core::cut::restore::Restored;
use waymark_core::{CutId, WriteOp};

pub const CHECKER: Checker = Checker {
    name: "serializability",
    property: "the list-append history is serializable, and stays so with each declared cut's restored lists \
               added as one more committed transaction reading every list",
};

pub fn check(w: &World) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Append {
        return vec![];
    }
    match elle::check(&records(w)) {
        Ok(_) => vec![],
        Err(anomaly) => vec![CHECKER.violation(anomaly.to_string())],
    }
}

/// The history plus a reader of every list as `cut` restored it at the list's primary: a
/// consistent cut is a state some serial order of the history passes through.
/// `reader(key)`: the vnode whose restore holds `key`'s partition at the cut (`cut_restore`).
pub fn check_restored(
    w: &World,
    cut: CutId,
    restored: &[Restored],
    reader: impl Fn(&waymark_core::Key) -> Option<usize>,
) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Append {
        return vec![];
    }
    let mut records = records(w);
    let ops = (0..KEYS)
        .map(|i| {
            let key = list_key(i);
            let list = reader(&key).and_then(|n| restored[n].store.get(&key).value);
            Op::Read { key: i as u64, list: parse_list(&list) }
        })
        .collect();
    let id = records.len() as u64;
    records.push(TxnRecord {
        id,
        client: u64::MAX,
        ops,
        outcome: elle::Outcome::Committed,
        invoked_at_us: 0,
        completed_at_us: 0,
    });
    match elle::check(&records) {
        Ok(_) => vec![],
        Err(anomaly) => {
            vec![CHECKER.violation(format!("{cut} restored (as transaction {id}, reading every list): {anomaly}"))]
        }
    }
}

fn records(w: &World) -> Vec<TxnRecord> {
    w.history.txns.iter().enumerate().map(|(i, t)| to_elle(i as u64, t)).collect()
}

fn to_elle(id: u64, t: &crate::history::ClientTxn) -> TxnRecord {
    let mut ops = vec![];
    for ClientRead { key, value, .. } in &t.reads {
        if let Some(k) = list_index(key) {
            ops.push(Op::Read { key: k, list: parse_list(value) });
        }
    }
    // A retried attempt's elements are appended again by a later attempt: each element has one
    // writer in the history.
    for w in t.writes.iter().filter(|_| !t.retried) {
        let Some(k) = list_index(&w.key) else { continue };
        match &w.op {
            WriteOp::Append(bytes) => {
                let elem = parse_i64(&Some(bytes.strip_suffix(b",").unwrap_or(bytes).to_vec())) as u64;
                ops.push(Op::Append { key: k, elem });
            }
            // An `APPEND` in `MULTI`: the client read the list and writes it whole; the elements
            // past what it read are the ones appended.
            WriteOp::Set(whole) => {
                let before = t.reads.iter().find(|r| r.key == w.key).map_or(0, |r| parse_list(&r.value).len());
                let appended = parse_list(&Some(whole.clone())).into_iter().skip(before);
                ops.extend(appended.map(|elem| Op::Append { key: k, elem }));
            }
            _ => {}
        }
    }
    let outcome = match t.outcome {
        Outcome::Committed => elle::Outcome::Committed,
        Outcome::Aborted => elle::Outcome::Aborted,
        Outcome::Unknown => elle::Outcome::Unknown,
    };
    TxnRecord {
        id,
        client: t.client as u64,
        ops,
        outcome,
        invoked_at_us: t.invoked_us,
        completed_at_us: t.completed_us,
    }
}
