//! The append workload's checks, by the simulator's own checker
//! (`waymark_sim::checkers::serializability`, Elle's list-append check): every transaction
//! answered ok, every one whose outcome is unknown (counted when an append of it was read), the
//! final lists read through every host and the lists of the restored snapshot, as read-only
//! transactions, form a serializable history; and every append answered ok is in the final list
//! of its key.

use super::workload::{list_key, parse_list, Micro, Op, OpKind, Outcome, LIST_KEYS};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use waymark_sim::checkers::serializability::{self as elle, TxnRecord};

/// How long the final read through a host may be refused (`TRYAGAIN` while it catches up).
const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Every list, as read in one transaction.
pub type Lists = BTreeMap<u64, Vec<u64>>;

/// A check's verdict: its name, whether it held, and what it found.
pub struct Verdict {
    pub name: &'static str,
    pub ok: bool,
    pub said: Vec<String>,
}

/// Every list read in one MGET through `addr`, retried while the host refuses.
pub fn read_lists(addr: SocketAddr) -> Result<Lists, String> {
    let keys: Vec<String> = (0..LIST_KEYS).map(list_key).collect();
    let deadline = Instant::now() + FINAL_READ_TIMEOUT;
    let mut last = String::new();
    while Instant::now() < deadline {
        let read = crate::cmd::bank::connect(addr)
            .and_then(|mut con| redis::cmd("MGET").arg(&keys).query::<Vec<Option<String>>>(&mut con));
        match read {
            Ok(values) => {
                let lists: Result<Vec<Vec<u64>>, String> = values.iter().map(|v| parse_list(v.as_deref())).collect();
                return Ok((0..LIST_KEYS).zip(lists?).collect());
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("no answer within {FINAL_READ_TIMEOUT:?}: {last}"))
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
    vec![serializable, final_lists(history, finals)]
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
    said.insert(
        0,
        format!(
            "{} hosts serve {appended} elements in {} lists; {lost} acknowledged appends missing",
            read.len(),
            LIST_KEYS
        ),
    );
    Verdict { name: "final lists", ok: agree && lost == 0, said }
}
