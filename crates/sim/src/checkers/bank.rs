//! The bank workload's invariant: money is neither made nor lost.

use super::{Checker, Violation};
use crate::config::WorkloadKind;
use crate::history::Outcome;
use crate::workloads::bank::{is_account, total, ACCOUNTS};
use crate::workloads::parse_i64;
use crate::world::World;
use waymark_core::{Key, Store};

pub const CHECKER: Checker = Checker {
    name: "bank",
    property: "every committed audit (a transaction that read every account) sums to the total and sees no \
               negative balance, and so does the final state",
};

pub fn check(w: &World) -> Vec<Violation> {
    if w.cfg.workload != WorkloadKind::Bank {
        return vec![];
    }
    let mut out = vec![];
    for t in w.history.txns.iter().filter(|t| t.kind == "audit" && t.outcome == Outcome::Committed) {
        let balances: Vec<i64> = t.reads.iter().map(|r| parse_i64(&r.value)).collect();
        if let Some(msg) = judge(&balances) {
            let tx = t.tx.as_ref().map(|t| t.to_string()).unwrap_or_default();
            out.push(CHECKER.violation(format!("audit {tx} at {}us: {msg}", t.completed_us)));
        }
    }
    let balances = final_balances(w);
    if let Some(msg) = judge(&balances) {
        out.push(CHECKER.violation(format!("final state: {msg}")));
    }
    out
}

/// `None` if the balances are right, else what is wrong.
pub fn judge(balances: &[i64]) -> Option<String> {
    let sum: i64 = balances.iter().sum();
    if balances.len() == ACCOUNTS && sum != total() {
        return Some(format!("balances {balances:?} sum to {sum}, not {}", total()));
    }
    balances.iter().any(|b| *b < 0).then(|| format!("negative balance in {balances:?}"))
}

fn final_balances(w: &World) -> Vec<i64> {
    let stores: Vec<&Store> = w.nodes.iter().filter_map(|n| n.vnode.as_ref().map(|v| v.store())).collect();
    if stores.len() != w.nodes.len() {
        return vec![];
    }
    balances_from(w, |node, key| stores[node].get(key).value)
}

/// Reads every account from its partition's primary through `read(node, key)`.
pub fn balances_from(w: &World, read: impl Fn(usize, &Key) -> Option<Vec<u8>>) -> Vec<i64> {
    balances_of(|k| read(w.store_index(w.placement.primary_of(k)), k))
}

/// Every account's balance as `read` gives it.
pub fn balances_of(read: impl Fn(&Key) -> Option<Vec<u8>>) -> Vec<i64> {
    (0..ACCOUNTS).map(crate::workloads::bank::account).filter(|k| is_account(k)).map(|k| parse_i64(&read(&k))).collect()
}
