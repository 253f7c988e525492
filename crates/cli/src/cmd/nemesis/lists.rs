//! The append workload's checks, by the simulator's own checker
//! (`waymark_sim::checkers::serializability`, Elle's list-append check): every transaction
//! answered ok, every one whose outcome is unknown (counted when an append of it was read), the
//! final lists read through every host and the lists of the restored snapshot, as read-only
//! transactions, form a serializable history; every append answered ok is in the final list of
//! its key; and reads respect real time — a read sees every append answered ok, and every list
//! read, before it was invoked (no stale read: what a failover's leases are for).

use super::workload::{list_key, parse_list, Micro, Op, OpKind, Outcome};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use waymark_sim::checkers::serializability::{self as elle, TxnRecord};

/// Every list, as read in one transaction.
pub type Lists = BTreeMap<u64, Vec<u64>>;

/// A check's verdict: its name, whether it held, and what it found.
pub struct Verdict {
    pub name: &'static str,
    pub ok: bool,
    pub said: Vec<String>,
}

/// Lists `0..count` read in one MGET through `addr`, retried while the host refuses.
pub fn read_lists(addr: SocketAddr, count: u64) -> Result<Lists, String> {
    let keys: Vec<String> = (0..count).map(list_key).collect();
    let values = super::check::mget_once_answered::<Option<String>>(addr, &keys)?;
    let lists: Vec<Vec<u64>> = values.iter().map(|v| parse_list(v.as_deref())).collect::<Result<_, _>>()?;
    Ok((0..count).zip(lists).collect())
}

/// The two checks: serializability (with the final and restored reads) and the final lists.
pub fn check(history: &[Op], finals: &[(String, Result<Lists, String>)], restored: Option<&Lists>) -> Vec<Verdict> {
    let appends = history.iter().filter(|o| o.kind == OpKind::Append);
    let mut records: Vec<TxnRecord> = appends.enumerate().map(|(i, o)| record(i as u64, o)).collect();
    let end_us = records.iter().map(|r| r.completed_at_us).max().unwrap_or(0) + 1;
    let reads = finals.iter().filter_map(|(_, r)| r.as_ref().ok()).chain(restored);
    for (i, lists) in reads.enumerate() {
        let ops = lists.iter().map(|(key, list)| elle::Op::Read { key: *key, list: list.clone() }).collect();
        let (invoked_at_us, completed_at_us) = (end_us, end_us + 1);
        let (id, client) = (records.len() as u64, u64::MAX - i as u64);
        records.push(TxnRecord { id, client, ops, outcome: elle::Outcome::Committed, invoked_at_us, completed_at_us });
    }
    let serializable = match elle::check(&records) {
        Ok(stats) => Verdict {
            name: "serializable",
            ok: true,
            said: vec![format!(
                "{} transactions (with the final and restored reads) over {} lists: {} ww, {} wr, {} rw \
                 dependencies, no cycle",
                stats.txns_checked, stats.keys, stats.edges_ww, stats.edges_wr, stats.edges_rw
            )],
        },
        // The checker's account of the anomaly: the cycle's transactions and their steps, each
        // line cut to a terminal's width (a read may hold thousands of elements).
        Err(anomaly) => Verdict {
            name: "serializable",
            ok: false,
            said: format!("{}: {anomaly}", anomaly.anomaly()).lines().map(cut_line).collect(),
        },
    };
    let order = finals.iter().find_map(|(_, r)| r.as_ref().ok());
    vec![serializable, final_lists(history, finals), real_time(history, order), read_monotonic(history)]
}

/// Per client and list, no read answered ok is shorter than the client's read of that list
/// before it (a client that moved to another host after a failure must not go back in time).
fn read_monotonic(history: &[Op]) -> Verdict {
    let mut last: BTreeMap<(usize, u64), (u64, usize)> = BTreeMap::new();
    let mut back = vec![];
    let mut ops: Vec<&Op> = history.iter().filter(|o| o.outcome == Outcome::Ok).collect();
    ops.sort_by_key(|o| (o.client, o.invoke_ms, o.complete_ms));
    for op in ops {
        for m in &op.micro {
            let Micro::Read { key, list: Some(list) } = m else { continue };
            let seen = last.entry((op.client, *key)).or_insert((op.invoke_ms, 0));
            if list.len() < seen.1 {
                back.push(format!(
                    "client {} read list{key} at {} ms: {} elements after {} at {} ms",
                    op.client,
                    op.invoke_ms,
                    list.len(),
                    seen.1,
                    seen.0
                ));
            }
            *seen = (op.invoke_ms, list.len().max(seen.1));
        }
    }
    let n = back.len();
    let mut said = vec![format!("{n} reads went back on what their client had read")];
    said.extend(back.into_iter().take(3));
    Verdict { name: "read monotonic", ok: n == 0, said }
}

/// Every read of a list is at least as long as what was known of that list, answered, before it
/// was invoked: each append answered ok (its place in the list's final order, plus one) and each
/// list read. Times in whole milliseconds, compared strictly, so that no two operations that may
/// overlap are ordered.
fn real_time(history: &[Op], order: Option<&Lists>) -> Verdict {
    let Some(order) = order else {
        return Verdict { name: "real time", ok: false, said: vec!["no final lists were read".into()] };
    };
    let place: BTreeMap<(u64, u64), usize> =
        order.iter().flat_map(|(k, list)| list.iter().enumerate().map(move |(i, e)| ((*k, *e), i + 1))).collect();
    // Per key, (completed ms, length known by then), sorted, then made a running maximum.
    let mut known: BTreeMap<u64, Vec<(u64, usize)>> = BTreeMap::new();
    let mut reads = vec![];
    for op in history.iter().filter(|o| o.outcome == Outcome::Ok) {
        for m in &op.micro {
            let (key, len) = match m {
                Micro::Append { key, elem } => (*key, place.get(&(*key, *elem)).copied().unwrap_or(0)),
                Micro::Read { key, list: Some(list) } => {
                    reads.push((op, *key, list.len()));
                    (*key, list.len())
                }
                Micro::Read { list: None, .. } => continue,
            };
            known.entry(key).or_default().push((op.complete_ms, len));
        }
    }
    for events in known.values_mut() {
        events.sort_unstable();
        let mut most = 0;
        for e in events.iter_mut() {
            most = most.max(e.1);
            e.1 = most;
        }
    }
    let mut stale = vec![];
    for (op, key, len) in reads {
        let events = &known[&key];
        let before = events.partition_point(|(done, _)| *done < op.invoke_ms);
        let needed = if before == 0 { 0 } else { events[before - 1].1 };
        if len < needed {
            stale.push(format!(
                "client {} read list{key} at {} ms: {len} elements, but {needed} were known before (a stale read)",
                op.client, op.invoke_ms
            ));
        }
    }
    let n = stale.len();
    let mut said = vec![format!("{n} reads saw less than was answered before they began")];
    said.extend(stale.into_iter().take(3));
    Verdict { name: "real time", ok: n == 0, said }
}

fn cut_line(line: &str) -> String {
    const MAX_CHARS: usize = 200;
    match line.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// One operation as the checker reads it: reads only when answered; appends always (an aborted
/// one read by anybody is G1a, an unknown one counts once read).
fn record(id: u64, op: &Op) -> TxnRecord {
    let ops = op
        .micro
        .iter()
        .filter_map(|m| match m {
            Micro::Append { key, elem } => Some(elle::Op::Append { key: *key, elem: *elem }),
            Micro::Read { key, list: Some(list) } => Some(elle::Op::Read { key: *key, list: list.clone() }),
            Micro::Read { list: None, .. } => None,
        })
        .collect();
    let outcome = match op.outcome {
        Outcome::Ok => elle::Outcome::Committed,
        Outcome::Aborted | Outcome::Refused => elle::Outcome::Aborted,
        Outcome::Unknown => elle::Outcome::Unknown,
    };
    TxnRecord {
        id,
        client: op.client as u64,
        ops,
        outcome,
        invoked_at_us: op.invoke_ms * 1000,
        completed_at_us: op.complete_ms * 1000,
    }
}

/// Every host serves the same lists, holding every append answered ok.
fn final_lists(history: &[Op], finals: &[(String, Result<Lists, String>)]) -> Verdict {
    let mut said = vec![];
    let read: Vec<&Lists> = finals.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
    for (host, r) in finals {
        if let Err(e) = r {
            said.push(format!("{host}: {e}"));
        }
    }
    let agree = read.len() == finals.len() && read.windows(2).all(|w| w[0] == w[1]);
    if !agree && said.is_empty() {
        said.push("the hosts serve different lists".into());
    }
    let mut lost = 0;
    if let Some(first) = read.first() {
        for op in history.iter().filter(|o| o.outcome == Outcome::Ok) {
            for m in &op.micro {
                if let Micro::Append { key, elem } = m {
                    if !first.get(key).is_some_and(|l| l.contains(elem)) {
                        lost += 1;
                        if lost <= 3 {
                            said.push(format!(
                                "lost: {elem} appended to list{key} at {} ms, answered ok",
                                op.invoke_ms
                            ));
                        }
                    }
                }
            }
        }
    }
    let appended: usize = read.first().map_or(0, |l| l.values().map(Vec::len).sum());
    let lists = read.first().map_or(0, |l| l.values().filter(|l| !l.is_empty()).count());
    let n = read.len();
    said.insert(
        0,
        format!("{n} hosts serve {appended} elements in {lists} lists; {lost} acknowledged appends missing"),
    );
    Verdict { name: "final lists", ok: agree && lost == 0, said }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, invoke_ms: u64, complete_ms: u64, micro: Vec<Micro>) -> Op {
        let (kind, outcome, sum, error, host) = (OpKind::Append, Outcome::Ok, None, None, 0);
        Op { client, host, kind, invoke_ms, complete_ms, outcome, sum, error, micro }
    }

    fn read(key: u64, list: &[u64]) -> Micro {
        Micro::Read { key, list: Some(list.to_vec()) }
    }

    fn finals(list: &[u64]) -> Vec<(String, Result<Lists, String>)> {
        vec![("node1".into(), Ok([(0, list.to_vec())].into_iter().collect()))]
    }

    #[test]
    fn a_read_that_misses_an_append_answered_before_it_began_is_stale() {
        let history = [op(1, 0, 10, vec![Micro::Append { key: 0, elem: 7 }]), op(2, 20, 25, vec![read(0, &[])])];
        let v = check(&history, &finals(&[7]), None);
        let real_time = v.iter().find(|v| v.name == "real time").unwrap();
        assert!(!real_time.ok, "{:?}", real_time.said);
        assert!(v.iter().filter(|v| v.name != "real time").all(|v| v.ok), "serializable all the same");
    }

    #[test]
    fn reads_that_overlap_an_append_or_follow_it_seeing_it_are_in_real_time() {
        let history = [
            op(1, 0, 10, vec![Micro::Append { key: 0, elem: 7 }]),
            op(2, 5, 12, vec![read(0, &[])]),
            op(3, 20, 25, vec![read(0, &[7])]),
        ];
        assert!(check(&history, &finals(&[7]), None).iter().all(|v| v.ok));
    }

    #[test]
    fn a_client_whose_read_goes_back_breaks_read_monotonicity() {
        let history = [op(1, 0, 10, vec![read(0, &[7, 8])]), op(1, 5, 12, vec![read(0, &[7])])];
        let v = check(&history, &finals(&[7, 8]), None);
        assert!(!v.iter().find(|v| v.name == "read monotonic").unwrap().ok);
    }

    #[test]
    fn a_read_shorter_than_one_answered_before_it_is_stale() {
        let history = [
            op(1, 0, 10, vec![Micro::Append { key: 0, elem: 7 }, Micro::Append { key: 0, elem: 8 }]),
            op(2, 20, 25, vec![read(0, &[7, 8])]),
            op(3, 30, 35, vec![read(0, &[7])]),
        ];
        let v = check(&history, &finals(&[7, 8]), None);
        assert!(!v.iter().find(|v| v.name == "real time").unwrap().ok);
    }
}
