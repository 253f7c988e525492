//! The data a declared cut restores, against a serial replay of the transactions it includes:
//! their operations executed one after another from an empty store, in an order that follows each
//! key's versions and each validated read.
//!
//! The other cut checkers look at *which* transactions are included; this one looks at the data. A
//! restore that keeps a stale value, applies a write the cut leaves out, or an `INCRBY` evaluated
//! on a write the cut leaves out restores bytes no serial execution of the cut could produce. On
//! the way it checks that each included transaction's operations, replayed, give the values its
//! primaries resolved, and that each `WATCH`ed read sees what the transaction read.

use super::{names, Checker, LogFacts, Violation};
use crate::history::{ClientRead, ClientTxn};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use waymark_core::cut::restore::Restored;
use waymark_core::{CutId, Entry, Key, ResolvedWrite, Store, TxId, WriteOp};

pub const CHECKER: Checker = Checker {
    name: "cut-replay",
    property: "the state a declared cut restores on every replica equals the serial replay of exactly the \
               transactions the cut includes, key by key, value and version",
};

/// Checks one declared cut, given its restore on every vnode.
pub fn check_cut(w: &World, facts: &LogFacts, cut: CutId, restored: &[Restored]) -> Vec<Violation> {
    let included: BTreeSet<&TxId> = restored.iter().flat_map(|r| r.included.iter()).collect();
    let ops: BTreeMap<&TxId, &ClientTxn> = w
        .history
        .txns
        .iter()
        .filter_map(|t| Some((t.tx.as_ref()?, t)))
        .filter(|(tx, _)| included.contains(tx))
        .collect();
    let order = match serial_order(facts, &included, &ops) {
        Ok(order) => order,
        Err(stuck) => return vec![v(format!("{cut}: no serial order of the included transactions: {stuck}"))],
    };
    let mut replay = Store::default();
    let mut out = vec![];
    for tx in &order {
        let resolved = facts.committed_writes.get(*tx).map_or(&[][..], |w| w.as_slice());
        match ops.get(tx) {
            Some(t) => out.extend(execute(&mut replay, cut, tx, t, resolved)),
            // The client never learnt the id (it timed out): replay what the primaries resolved.
            None => resolved.iter().for_each(|r| replay_resolved(&mut replay, r)),
        }
        if out.len() > 3 {
            break; // the first few say enough
        }
    }
    out.extend(compare(w, facts, cut, &replay, restored));
    out
}

fn v(evidence: String) -> Violation {
    CHECKER.violation(evidence)
}

/// Transactions of a cut that wait on each other in a cycle, so no serial order of them exists.
#[derive(Debug)]
struct NoSerialOrder {
    waiting: usize,
    /// A few of them, to start the search from.
    among: Vec<String>,
}

impl std::fmt::Display for NoSerialOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} transactions wait on each other, among them {}", self.waiting, self.among.join(", "))
    }
}

/// A serial order of `included` in which every key's writers come in version order, and a
/// transaction that read a version comes after its writer and before the next version's (Kahn's
/// algorithm, smallest transaction id first among those ready); `Err` names the transactions left
/// in a cycle.
fn serial_order<'a>(
    facts: &'a LogFacts,
    included: &BTreeSet<&'a TxId>,
    ops: &BTreeMap<&'a TxId, &'a ClientTxn>,
) -> Result<Vec<&'a TxId>, NoSerialOrder> {
    let mut edges: BTreeSet<(&TxId, &TxId)> = BTreeSet::new();
    let mut per_key: BTreeMap<&Key, Vec<(u64, &TxId)>> = BTreeMap::new();
    for tx in included {
        for wr in facts.committed_writes.get(*tx).into_iter().flatten() {
            per_key.entry(&wr.key).or_default().push((wr.version, *tx));
        }
    }
    for writers in per_key.values_mut() {
        writers.sort();
        edges.extend(writers.windows(2).map(|pair| (pair[0].1, pair[1].1)));
    }
    for (tx, t) in ops {
        for ClientRead { key, version, .. } in &t.reads {
            let writer = |version: u64| facts.writer(key, version).filter(|w| included.contains(w));
            edges.extend(writer(*version).map(|w| (w, *tx)));
            edges.extend(writer(version + 1).map(|w| (*tx, w)));
        }
    }
    let mut waits: BTreeMap<&TxId, usize> = included.iter().map(|t| (*t, 0)).collect();
    let mut next: BTreeMap<&TxId, Vec<&TxId>> = BTreeMap::new();
    for (a, b) in edges.into_iter().filter(|(a, b)| a != b) {
        *waits.get_mut(b).expect("included") += 1;
        next.entry(a).or_default().push(b);
    }
    let mut ready: BTreeSet<&TxId> = waits.iter().filter(|(_, n)| **n == 0).map(|(t, _)| *t).collect();
    let mut order = Vec::with_capacity(included.len());
    while let Some(tx) = ready.pop_first() {
        order.push(tx);
        for b in next.get(tx).into_iter().flatten() {
            let n = waits.get_mut(b).expect("included");
            *n -= 1;
            if *n == 0 {
                ready.insert(b);
            }
        }
    }
    if order.len() < included.len() {
        let among: Vec<String> = waits.iter().filter(|(_, n)| **n > 0).take(4).map(|(t, _)| t.to_string()).collect();
        return Err(NoSerialOrder { waiting: included.len() - order.len(), among });
    }
    Ok(order)
}

/// Executes one transaction on the replay: its reads must see what it read, and its operations must
/// give what its primaries resolved when it committed.
fn execute(replay: &mut Store, cut: CutId, tx: &TxId, t: &ClientTxn, resolved: &[ResolvedWrite]) -> Vec<Violation> {
    let mut out = vec![];
    for ClientRead { key, value, version } in &t.reads {
        let seen = Entry { value: value.clone(), version: *version, deadline_ms: None };
        // Deadlines aside: a read answers a value and a version (`expiry` is judged elsewhere).
        let now = Entry { deadline_ms: None, ..replay.get(key) };
        if now != seen {
            out.push(v(format!(
                "{cut}: {tx} read {} as {} but in the serial replay of the cut it is {} when {tx} runs",
                show_key(key),
                show(&seen),
                show(&now)
            )));
        }
    }
    let mut mine: Vec<ResolvedWrite> = vec![];
    let before: BTreeMap<&Key, Option<Vec<u8>>> = t.writes.iter().map(|w| (&w.key, replay.get(&w.key).value)).collect();
    for w in &t.writes {
        // No value expires in the replay (its clock stays at 0): the primaries' expiries are
        // transactions of their own, replayed from the logs as writes of unknown operations.
        // A deadline the write carries (`RENAME`, `KEEPTTL`: the one read) may have passed by
        // the primary's clock when it evaluated the write, which then deleted the key: the replay
        // takes the primary's word for that (the `expiry` checker judges deadlines).
        let expired =
            matches!(w.op, WriteOp::SetExpiring(..)) && resolved.iter().any(|r| r.key == w.key && r.value.is_none());
        let outcome = match expired {
            true => replay.resolve(&w.key, &WriteOp::Del, 0),
            false => replay.resolve(&w.key, &w.op, 0),
        };
        match outcome {
            Ok(r) => {
                replay.apply(&r);
                mine.retain(|m| m.key != r.key);
                mine.push(r);
            }
            Err(e) => out.push(v(format!("{cut}: replaying {tx}: {e} at {}", show_key(&w.key)))),
        }
    }
    // A collection the transaction dropped takes its elements with it, as its primary does.
    for (key, before) in before {
        let after = mine.iter().find(|m| &m.key == key).and_then(|m| m.value.as_deref());
        if waymark_core::collection::drops(before.as_deref(), after) {
            let written: BTreeSet<&Key> = mine.iter().map(|m| &m.key).collect();
            let dropped = replay.drop_elements(key, &written);
            for d in &dropped {
                replay.apply(d);
            }
            mine.extend(dropped);
        }
    }
    // Deadlines aside: `In(ms)` resolves by the primary's clock at its commit, which the replay
    // does not know (the `expiry` checker judges deadlines).
    let same = |m: &ResolvedWrite, r: &ResolvedWrite| (&m.key, &m.value, m.version) == (&r.key, &r.value, r.version);
    for r in resolved {
        if !mine.iter().any(|m| same(m, r)) {
            let got = mine.iter().find(|m| m.key == r.key).map(|m| Entry {
                value: m.value.clone(),
                version: m.version,
                deadline_ms: None,
            });
            out.push(v(format!(
                "{cut}: {tx} committed {} = {} but replaying the cut's transactions in order gives {}",
                show_key(&r.key),
                show(&Entry { value: r.value.clone(), version: r.version, deadline_ms: None }),
                got.as_ref().map_or("no write".to_string(), show)
            )));
        }
    }
    out
}

/// A write whose operation the history does not know: its value, at the next version.
fn replay_resolved(replay: &mut Store, r: &ResolvedWrite) {
    let version = replay.version(&r.key) + 1;
    replay.apply(&ResolvedWrite { key: r.key.clone(), value: r.value.clone(), version, deadline_ms: None });
}

/// Every replica's restored keys against the replay, both ways.
fn compare(w: &World, facts: &LogFacts, cut: CutId, replay: &Store, restored: &[Restored]) -> Vec<Violation> {
    let mut out = vec![];
    // A vnode's restore holds only what it held at the cut (`held`): under `versions`, not a
    // partition it was a copy of by an older chain than another's (seed 43 of the versions
    // catch-up matrix: its parent down, it logged the map before the learner's switch reached it).
    let at_cut = super::cut_restore::holders_at(w, cut);
    for (node, r) in restored.iter().enumerate() {
        let rejoined = &facts.rejoined[node];
        let holds = |k: &Key| {
            let p = w.placement.partition_of(k);
            super::holds_from_start(w, rejoined, node, p) && at_cut[node].contains(&p.0)
        };
        let keys: BTreeSet<&Key> = r.store.iter().map(|(k, _)| k).chain(replay.iter().map(|(k, _)| k)).collect();
        // Values and versions: deadlines resolved by a primary's clock are not replayed.
        let differs = |k: &&Key| {
            let (a, b) = (r.store.get(k), replay.get(k));
            (a.value, a.version) != (b.value, b.version)
        };
        let Some(key) = keys.into_iter().filter(|k| holds(k)).find(differs) else {
            continue;
        };
        let (got, want) = (r.store.get(key), replay.get(key));
        let by = |e: &Entry| facts.writer(key, e.version).map_or("nobody".into(), |t| t.to_string());
        out.push(v(format!(
            "{cut} on {}: {} restored as {} (version by {}) but the serial replay of the cut gives {} (by {})",
            names(w, [node]),
            show_key(key),
            show(&got),
            by(&got),
            show(&want),
            by(&want)
        )));
    }
    out
}

fn show_key(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn show(e: &Entry) -> String {
    let value = e.value.as_ref().map_or("nil".to_string(), |b| format!("{:?}", String::from_utf8_lossy(b)));
    format!("{value}@{}", e.version)
}
