//! Property: the list-append history is serializable (see `serializability` for the Elle-style
//! check). This file only translates what clients saw into that checker's terms.

use super::serializability::{self as elle, Op, TxnRecord};
use super::Violation;
use crate::config::WorkloadKind;
use crate::history::Outcome;
use crate::workloads::append::{list_index, parse_list};
use crate::workloads::parse_i64;
use crate::world::World;
use waymark_core::WriteOp;

pub fn check(w: &World) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Append {
        return vec![];
    }
    let records: Vec<TxnRecord> = w.history.txns.iter().enumerate().map(|(i, t)| to_elle(i as u64, t)).collect();
    match elle::check(&records) {
        Ok(_) => vec![],
        Err(v) => vec![Violation { checker: "serializability", message: v.to_string() }],
    }
}

fn to_elle(id: u64, t: &crate::history::ClientTxn) -> TxnRecord {
    let mut ops = vec![];
    for (key, value, _) in &t.reads {
        if let Some(k) = list_index(key) {
            ops.push(Op::Read { key: k, list: parse_list(value) });
        }
    }
    for w in &t.writes {
        if let (Some(k), WriteOp::Append(bytes)) = (list_index(&w.key), &w.op) {
            let elem = parse_i64(&Some(bytes.strip_suffix(b",").unwrap_or(bytes).to_vec())) as u64;
            ops.push(Op::Append { key: k, elem });
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
