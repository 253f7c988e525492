//! The committed list-append history is serializable: the graph of write-write, write-read and
//! read-write dependencies inferred from the lists read has no cycle, and no read observes a value
//! that was never appended, an aborted append, or a list that is not a prefix of the key's version
//! order.
//!
//! This is an Elle-style checker (Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from
//! Experimental Observations", 2020) specialised to list-append histories:
//!
//! 1. Which transactions count: every `Committed` one, plus every `Unknown` one whose append is
//!    observed by a read of a transaction that counts (computed as a fixpoint). `Unknown`
//!    transactions whose appends nobody saw are ignored, as are the reads of `Aborted` ones.
//! 2. Every element read must have been appended to that key by exactly one transaction, never by
//!    an aborted one (G1a), and must appear at most once in a read.
//! 3. Per key, the version order is the longest list read; every other read of that key must be
//!    a prefix of it.
//! 4. Dependencies: `ww` between consecutive versions' writers, `wr` from the writer of the last
//!    element of a read to the reader, `rw` from a reader of a list of length `n` to the writer of
//!    version `n` (the first version it did not see). Self-edges are ignored.
//! 5. Cycles are found with an iterative Tarjan SCC; the checker first looks for a cycle made of
//!    `ww` edges only (G0), then `ww`+`wr` (G1c), then any edges (G2), and reports a short cycle
//!    (BFS back to the smallest-index member of the first cyclic SCC found).
//!
//! Everything is deterministic: iteration is in history order or over sorted containers.

use crate::hash::FnvMap;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// A list-valued key.
pub type Key = u64;
/// An appended element; every appended element is unique across the whole history.
pub type Elem = u64;

/// One micro-operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Append `elem` to the list stored at `key`.
    Append { key: Key, elem: Elem },
    /// Read the whole list stored at `key`, observing `list`.
    Read { key: Key, list: Vec<Elem> },
}

/// How a transaction ended, as far as the client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    /// The client timed out: the transaction may or may not have committed.
    Unknown,
}

/// One transaction as recorded by the client.
#[derive(Clone, Debug)]
pub struct TxnRecord {
    pub id: u64,
    pub client: u64,
    pub ops: Vec<Op>,
    pub outcome: Outcome,
    pub invoked_at_us: u64,
    pub completed_at_us: u64,
}

/// The kind of a dependency edge between two transactions.
#[allow(clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// Write-write: the source installed the version just before the target's.
    WW,
    /// Write-read: the target read the version the source installed.
    WR,
    /// Read-write (anti-dependency): the source read a version that the target overwrote.
    RW,
}

/// Summary of a successful check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transactions taken into account (committed, plus unknown-but-observed).
    pub txns_checked: usize,
    /// Distinct (source, target) write-write edges.
    pub edges_ww: usize,
    /// Distinct (source, target) write-read edges.
    pub edges_wr: usize,
    /// Distinct (source, target) read-write edges.
    pub edges_rw: usize,
    /// Distinct keys touched by the checked transactions.
    pub keys: usize,
}

/// Why a history is not serializable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Two reads of `key` are not prefixes of one another: no single append order explains both.
    IncompatibleOrder { key: Key, a: Vec<Elem>, b: Vec<Elem> },
    /// Transaction `txn` read `elem` in `key`, but nobody appended `elem` to `key`.
    UnknownElem { txn: u64, key: Key, elem: Elem },
    /// G1a: `reader` observed `elem` in `key`, appended by the aborted transaction `writer`.
    AbortedRead { reader: u64, writer: u64, key: Key, elem: Elem },
    /// `elem` appears twice in one read of `key` by `txn` (or was appended twice; then `txn` is
    /// the second appender).
    DuplicateElem { txn: u64, key: Key, elem: Elem },
    /// A dependency cycle. `txns` lists the cycle's transactions in order; `edges[i]` goes from
    /// `txns[i]` to `txns[(i + 1) % len]`. `txn_ops` holds the operations of each transaction of
    /// the cycle (same order as `txns`) so that the report is self-contained.
    Cycle { txns: Vec<u64>, edges: Vec<Dependency>, txn_ops: Vec<TxnOps> },
}

/// A dependency of a reported cycle: transaction `from` precedes `to` because of `kind` on `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dependency {
    pub from: u64,
    pub kind: EdgeKind,
    pub to: u64,
    pub key: Key,
}

/// A transaction of a reported cycle, with its operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOps {
    pub txn: u64,
    pub ops: Vec<Op>,
}

impl Anomaly {
    /// Short anomaly name: `G0`, `G1c`, `G2` for cycles, `G1a` for aborted reads, and a
    /// descriptive name for the other (non-cycle) inconsistencies.
    pub fn anomaly(&self) -> &'static str {
        match self {
            Anomaly::IncompatibleOrder { .. } => "incompatible-order",
            Anomaly::UnknownElem { .. } => "garbage-read",
            Anomaly::AbortedRead { .. } => "G1a",
            Anomaly::DuplicateElem { .. } => "duplicate-elements",
            Anomaly::Cycle { edges, .. } => cycle_anomaly(edges),
        }
    }
}

fn cycle_anomaly(edges: &[Dependency]) -> &'static str {
    if edges.iter().any(|e| e.kind == EdgeKind::RW) {
        "G2"
    } else if edges.iter().any(|e| e.kind == EdgeKind::WR) {
        "G1c"
    } else {
        "G0"
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::WW => "ww",
            EdgeKind::WR => "wr",
            EdgeKind::RW => "rw",
        })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Append { key, elem } => write!(f, "append(key {key}, {elem})"),
            Op::Read { key, list } => write!(f, "read(key {key}) = {list:?}"),
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::IncompatibleOrder { key, a, b } => write!(
                f,
                "incompatible version order for key {key}: one read saw {a:?} and another saw \
                 {b:?}; neither is a prefix of the other, so no single order of appends explains \
                 both"
            ),
            Anomaly::UnknownElem { txn, key, elem } => write!(
                f,
                "garbage read: T{txn} read element {elem} in key {key}, but no transaction \
                 appended {elem} to key {key}"
            ),
            Anomaly::AbortedRead { reader, writer, key, elem } => write!(
                f,
                "G1a (aborted read): T{reader} read element {elem} in key {key}, which was \
                 appended by T{writer}, an aborted transaction"
            ),
            Anomaly::DuplicateElem { txn, key, elem } => write!(
                f,
                "duplicate element: element {elem} of key {key} occurs more than once (in T{txn}); \
                 every append must be unique and appear at most once in a list"
            ),
            Anomaly::Cycle { txns, edges, txn_ops } => {
                let anomaly = cycle_anomaly(edges);
                let rw = edges.iter().filter(|e| e.kind == EdgeKind::RW).count();
                let what = match anomaly {
                    "G0" => "write cycle: every edge is a write-write dependency".to_string(),
                    "G1c" => "circular information flow: a cycle of write-write and write-read \
                         dependencies"
                        .to_string(),
                    _ if rw == 1 => "anti-dependency cycle with exactly one read-write edge \
                                     (G-single, e.g. read skew / lost update)"
                        .to_string(),
                    _ => format!("anti-dependency cycle with {rw} read-write edges"),
                };
                writeln!(f, "{anomaly} ({what}) among {} transactions:", txns.len())?;
                for Dependency { from, kind, to, key } in edges {
                    let meaning = match kind {
                        EdgeKind::WW => "appended the version just before the one appended by",
                        EdgeKind::WR => "appended the last element read by",
                        EdgeKind::RW => "read a version later overwritten by",
                    };
                    writeln!(f, "  T{from} --{kind} on key {key}--> T{to}   (T{from} {meaning} T{to})")?;
                }
                write!(f, "transactions:")?;
                for TxnOps { txn: id, ops } in txn_ops {
                    write!(f, "\n  T{id}:")?;
                    for op in ops {
                        write!(f, " {op};")?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Anomaly {}

/// A dependency edge between transaction indices. Fields in this order: sorting the edges sorts
/// each node's out-edges by target, then kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: usize,
    to: usize,
    kind: EdgeKind,
    key: Key,
}

/// One dependency edge in adjacency form (its source is the node whose list holds it).
#[derive(Clone, Copy, Debug)]
struct Adj {
    to: usize,
    kind: EdgeKind,
    key: Key,
}

/// Dependency graph over transaction indices, in compressed sparse row form; each node's
/// out-edges are sorted by (target, kind) and deduplicated.
struct Graph {
    start: Vec<usize>,
    adj: Vec<Adj>,
}

impl Graph {
    fn out(&self, v: usize) -> &[Adj] {
        &self.adj[self.start[v]..self.start[v + 1]]
    }

    fn nodes(&self) -> usize {
        self.start.len() - 1
    }

    /// Iterative Tarjan over edges whose kind is `<= max_kind`; returns the first strongly
    /// connected component with more than one node, if any.
    fn first_cyclic_scc(&self, max_kind: EdgeKind) -> Option<Vec<usize>> {
        const UNVISITED: usize = usize::MAX;
        let n = self.nodes();
        let mut index = vec![UNVISITED; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut call: Vec<(usize, usize)> = Vec::new();
        let mut counter = 0usize;
        for root in 0..n {
            if index[root] != UNVISITED || self.out(root).is_empty() {
                continue;
            }
            index[root] = counter;
            low[root] = counter;
            counter += 1;
            stack.push(root);
            on_stack[root] = true;
            call.push((root, self.start[root]));
            while let Some(frame) = call.last_mut() {
                let v = frame.0;
                if frame.1 < self.start[v + 1] {
                    let Adj { to: w, kind, .. } = self.adj[frame.1];
                    frame.1 += 1;
                    if kind > max_kind {
                        continue;
                    }
                    if index[w] == UNVISITED {
                        index[w] = counter;
                        low[w] = counter;
                        counter += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        call.push((w, self.start[w]));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                } else {
                    call.pop();
                    if let Some(&(parent, _)) = call.last() {
                        low[parent] = low[parent].min(low[v]);
                    }
                    if low[v] == index[v] {
                        let mut scc = Vec::new();
                        while let Some(w) = stack.pop() {
                            on_stack[w] = false;
                            scc.push(w);
                            if w == v {
                                break;
                            }
                        }
                        if scc.len() > 1 {
                            return Some(scc);
                        }
                    }
                }
            }
        }
        None
    }

    /// Shortest cycle through the smallest node of `scc`, using only edges of kind `<= max_kind`
    /// that stay inside `scc`. Returns the edges in cycle order.
    fn short_cycle(&self, scc: &[usize], max_kind: EdgeKind) -> Vec<Edge> {
        let n = self.nodes();
        let mut in_scc = vec![false; n];
        for &v in scc {
            in_scc[v] = true;
        }
        let s = scc.iter().copied().min().unwrap_or(0);
        // The edge each visited node was reached by.
        let mut parent: Vec<Option<Edge>> = vec![None; n];
        let mut visited = vec![false; n];
        visited[s] = true;
        let mut queue = VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &Adj { to: w, kind, key } in self.out(v) {
                if kind > max_kind || !in_scc[w] {
                    continue;
                }
                if w == s {
                    let mut path = vec![Edge { from: v, to: s, kind, key }];
                    let mut cur = v;
                    while cur != s {
                        let edge = parent[cur].expect("BFS parent of visited node");
                        path.push(edge);
                        cur = edge.from;
                    }
                    path.reverse();
                    return path;
                }
                if !visited[w] {
                    visited[w] = true;
                    parent[w] = Some(Edge { from: v, to: w, kind, key });
                    queue.push_back(w);
                }
            }
        }
        unreachable!("every node of a non-trivial SCC lies on a cycle")
    }
}

/// Checks that the committed part of a list-append `history` is serializable (see the module
/// documentation). Returns statistics about the inferred dependency graph, or the first
/// violation found (validity errors before cycles; cycles preferring G0, then G1c, then G2).
pub fn check(history: &[TxnRecord]) -> Result<Stats, Anomaly> {
    let n = history.len();

    // Index every append of the whole history (including aborted / unknown transactions).
    // `appends[d] = (txn index, key)`; `elem_index[elem] = d`.
    let mut elem_index: FnvMap<Elem, usize> = FnvMap::default();
    let mut appends: Vec<(usize, Key)> = Vec::new();
    for (t, txn) in history.iter().enumerate() {
        for op in &txn.ops {
            if let Op::Append { key, elem } = *op {
                match elem_index.entry(elem) {
                    Entry::Occupied(_) => {
                        return Err(Anomaly::DuplicateElem { txn: txn.id, key, elem });
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(appends.len());
                        appends.push((t, key));
                    }
                }
            }
        }
    }

    // Which transactions count: committed ones, plus unknown ones observed by a counted read.
    let mut included = vec![false; n];
    let mut work: Vec<usize> = Vec::new();
    for (t, txn) in history.iter().enumerate() {
        if txn.outcome == Outcome::Committed {
            included[t] = true;
            work.push(t);
        }
    }
    while let Some(t) = work.pop() {
        for op in &history[t].ops {
            if let Op::Read { key, list } = op {
                for elem in list {
                    if let Some(&d) = elem_index.get(elem) {
                        let (w, wkey) = appends[d];
                        if wkey == *key && !included[w] && history[w].outcome == Outcome::Unknown {
                            included[w] = true;
                            work.push(w);
                        }
                    }
                }
            }
        }
    }
    let checked: Vec<usize> = (0..n).filter(|&t| included[t]).collect();

    // Every element read must be known, appended to that key, not aborted, and not repeated.
    let mut seen_in_read = vec![0usize; appends.len()];
    let mut stamp = 0usize;
    for &t in &checked {
        for op in &history[t].ops {
            let Op::Read { key, list } = op else { continue };
            stamp += 1;
            for &elem in list {
                let unknown = Anomaly::UnknownElem { txn: history[t].id, key: *key, elem };
                let Some(&d) = elem_index.get(&elem) else {
                    return Err(unknown);
                };
                let (w, wkey) = appends[d];
                if wkey != *key {
                    return Err(unknown);
                }
                if history[w].outcome == Outcome::Aborted {
                    return Err(Anomaly::AbortedRead { reader: history[t].id, writer: history[w].id, key: *key, elem });
                }
                if seen_in_read[d] == stamp {
                    return Err(Anomaly::DuplicateElem { txn: history[t].id, key: *key, elem });
                }
                seen_in_read[d] = stamp;
            }
        }
    }

    // Version order per key: the longest read, of which every read must be a prefix.
    let mut orders: BTreeMap<Key, &[Elem]> = BTreeMap::new();
    for &t in &checked {
        for op in &history[t].ops {
            match op {
                Op::Append { key, .. } => {
                    orders.entry(*key).or_insert(&[]);
                }
                Op::Read { key, list } => {
                    let cur = orders.entry(*key).or_insert(&[]);
                    let compatible = if list.len() > cur.len() { list.starts_with(cur) } else { cur.starts_with(list) };
                    if !compatible {
                        return Err(Anomaly::IncompatibleOrder { key: *key, a: cur.to_vec(), b: list.clone() });
                    }
                    if list.len() > cur.len() {
                        *cur = list;
                    }
                }
            }
        }
    }

    // Dependency edges (all elements below are known and written by checked transactions).
    let writer = |elem: &Elem| appends[elem_index[elem]].0;
    let mut edges: Vec<Edge> = Vec::new();
    for (&key, order) in &orders {
        for pair in order.windows(2) {
            let (a, b) = (writer(&pair[0]), writer(&pair[1]));
            if a != b {
                edges.push(Edge { from: a, to: b, kind: EdgeKind::WW, key });
            }
        }
    }
    for &t in &checked {
        for op in &history[t].ops {
            let Op::Read { key, list } = op else { continue };
            if let Some(last) = list.last() {
                let w = writer(last);
                if w != t {
                    edges.push(Edge { from: w, to: t, kind: EdgeKind::WR, key: *key });
                }
            }
            if let Some(next) = orders[key].get(list.len()) {
                let w = writer(next);
                if w != t {
                    edges.push(Edge { from: t, to: w, kind: EdgeKind::RW, key: *key });
                }
            }
        }
    }
    edges.sort_unstable();
    edges.dedup_by(|later, earlier| (later.from, later.to, later.kind) == (earlier.from, earlier.to, earlier.kind));

    let mut stats = Stats { txns_checked: checked.len(), keys: orders.len(), ..Stats::default() };
    for e in &edges {
        match e.kind {
            EdgeKind::WW => stats.edges_ww += 1,
            EdgeKind::WR => stats.edges_wr += 1,
            EdgeKind::RW => stats.edges_rw += 1,
        }
    }

    let mut start = vec![0usize; n + 1];
    for e in &edges {
        start[e.from + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let graph = Graph { start, adj: edges.iter().map(|e| Adj { to: e.to, kind: e.kind, key: e.key }).collect() };

    if graph.first_cyclic_scc(EdgeKind::RW).is_none() {
        return Ok(stats);
    }
    for max_kind in [EdgeKind::WW, EdgeKind::WR, EdgeKind::RW] {
        if let Some(scc) = graph.first_cyclic_scc(max_kind) {
            let cycle = graph.short_cycle(&scc, max_kind);
            let id = |t: usize| history[t].id;
            return Err(Anomaly::Cycle {
                txns: cycle.iter().map(|e| id(e.from)).collect(),
                edges: cycle
                    .iter()
                    .map(|e| Dependency { from: id(e.from), kind: e.kind, to: id(e.to), key: e.key })
                    .collect(),
                txn_ops: cycle.iter().map(|e| TxnOps { txn: id(e.from), ops: history[e.from].ops.clone() }).collect(),
            });
        }
    }
    unreachable!("a cyclic SCC over all edges was found above")
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Key = 0;
    const Y: Key = 1;

    fn txn(id: u64, outcome: Outcome, ops: Vec<Op>) -> TxnRecord {
        TxnRecord { id, client: id % 4, ops, outcome, invoked_at_us: id * 10, completed_at_us: id * 10 + 5 }
    }

    fn ok(id: u64, ops: Vec<Op>) -> TxnRecord {
        txn(id, Outcome::Committed, ops)
    }

    fn r(key: Key, list: &[Elem]) -> Op {
        Op::Read { key, list: list.to_vec() }
    }

    fn a(key: Key, elem: Elem) -> Op {
        Op::Append { key, elem }
    }

    /// Asserts `v` is a well-formed cycle and returns its edge kinds.
    fn cycle_kinds(v: &Anomaly) -> Vec<EdgeKind> {
        let Anomaly::Cycle { txns, edges, txn_ops } = v else {
            panic!("expected a cycle, got {v}");
        };
        assert!(txns.len() >= 2);
        assert_eq!(txns.len(), edges.len());
        assert_eq!(txn_ops.len(), txns.len());
        for (i, e) in edges.iter().enumerate() {
            assert_eq!(e.from, txns[i]);
            assert_eq!(e.to, txns[(i + 1) % txns.len()]);
            assert_eq!(txn_ops[i].txn, txns[i]);
        }
        edges.iter().map(|e| e.kind).collect()
    }

    #[test]
    fn serial_history_is_ok() {
        let h = vec![
            ok(0, vec![r(Y, &[])]),
            ok(1, vec![r(X, &[]), a(X, 1)]),
            ok(2, vec![r(X, &[1]), a(X, 2)]),
            ok(3, vec![r(X, &[1, 2]), a(Y, 3)]),
            ok(4, vec![r(Y, &[3]), r(X, &[1, 2])]),
        ];
        let s = check(&h).unwrap();
        assert_eq!(s, Stats { txns_checked: 5, edges_ww: 1, edges_wr: 4, edges_rw: 1, keys: 2 });
    }

    #[test]
    fn empty_history_is_ok() {
        assert_eq!(check(&[]).unwrap(), Stats::default());
    }

    #[test]
    fn concurrent_valid_history_is_ok() {
        // T1 and T2 append concurrently; T3 saw only T1's append; T4 saw both.
        let h = vec![
            ok(1, vec![a(X, 1), a(Y, 10)]),
            ok(2, vec![a(X, 2)]),
            ok(3, vec![r(X, &[1]), r(Y, &[10]), a(Y, 11)]),
            ok(4, vec![r(X, &[1, 2]), r(Y, &[10, 11])]),
            ok(5, vec![r(Y, &[])]),
        ];
        let s = check(&h).unwrap();
        assert_eq!(s.txns_checked, 5);
        assert!(s.edges_rw >= 2);
    }

    #[test]
    fn own_append_read_back_adds_no_self_edges() {
        let h = vec![
            ok(1, vec![a(X, 1), r(X, &[1]), a(X, 2), r(X, &[1, 2])]),
            ok(2, vec![r(X, &[1, 2]), a(X, 3), r(X, &[1, 2, 3])]),
        ];
        let s = check(&h).unwrap();
        assert_eq!((s.edges_ww, s.edges_wr, s.edges_rw), (1, 1, 1));
    }

    #[test]
    fn g0_write_cycle() {
        let h = vec![
            ok(1, vec![a(X, 1), a(Y, 2)]),
            ok(2, vec![a(X, 3), a(Y, 4)]),
            ok(3, vec![r(X, &[1, 3]), r(Y, &[4, 2])]),
        ];
        let v = check(&h).unwrap_err();
        assert_eq!(cycle_kinds(&v), vec![EdgeKind::WW, EdgeKind::WW]);
        assert_eq!(v.anomaly(), "G0");
        let Anomaly::Cycle { txns, .. } = &v else { unreachable!() };
        assert_eq!(txns, &vec![1, 2]);
        let text = v.to_string();
        assert!(text.starts_with("G0"), "{text}");
        assert!(text.contains("T1 --ww on key 0--> T2"), "{text}");
        assert!(text.contains("append(key 1, 2)"), "{text}");
    }

    #[test]
    fn g1c_ww_wr_cycle() {
        // T2 read T1's append to x, but T2's append to y precedes T1's.
        let h = vec![
            ok(1, vec![a(X, 1), a(Y, 3)]),
            ok(2, vec![r(X, &[1]), a(Y, 2)]),
            ok(3, vec![r(Y, &[2, 3]), r(X, &[1])]),
        ];
        let v = check(&h).unwrap_err();
        let mut kinds = cycle_kinds(&v);
        kinds.sort();
        assert_eq!(kinds, vec![EdgeKind::WW, EdgeKind::WR]);
        assert_eq!(v.anomaly(), "G1c");
        assert!(v.to_string().starts_with("G1c"));
    }

    #[test]
    fn g2_write_skew() {
        let h =
            vec![ok(1, vec![r(X, &[]), a(Y, 1)]), ok(2, vec![r(Y, &[]), a(X, 2)]), ok(3, vec![r(X, &[2]), r(Y, &[1])])];
        let v = check(&h).unwrap_err();
        assert_eq!(cycle_kinds(&v), vec![EdgeKind::RW, EdgeKind::RW]);
        assert_eq!(
            v,
            Anomaly::Cycle {
                txns: vec![1, 2],
                edges: vec![
                    Dependency { from: 1, kind: EdgeKind::RW, to: 2, key: X },
                    Dependency { from: 2, kind: EdgeKind::RW, to: 1, key: Y }
                ],
                txn_ops: vec![TxnOps { txn: 1, ops: h[0].ops.clone() }, TxnOps { txn: 2, ops: h[1].ops.clone() }],
            }
        );
        assert_eq!(v.anomaly(), "G2");
        let text = v.to_string();
        assert!(text.contains("T1 --rw on key 0--> T2"), "{text}");
        assert!(text.contains("read(key 0) = []"), "{text}");
    }

    #[test]
    fn lost_update() {
        // T1 and T2 both read [1] and append; the final list shows both appends.
        let h = vec![
            ok(0, vec![a(X, 1)]),
            ok(1, vec![r(X, &[1]), a(X, 2)]),
            ok(2, vec![r(X, &[1]), a(X, 3)]),
            ok(3, vec![r(X, &[1, 2, 3])]),
        ];
        let v = check(&h).unwrap_err();
        let mut kinds = cycle_kinds(&v);
        kinds.sort();
        assert_eq!(kinds, vec![EdgeKind::WW, EdgeKind::RW]);
        let Anomaly::Cycle { txns, .. } = &v else { unreachable!() };
        assert_eq!(txns, &vec![1, 2]);
        assert!(v.to_string().contains("G-single"));
    }

    #[test]
    fn aborted_read_is_g1a() {
        let h = vec![txn(1, Outcome::Aborted, vec![a(X, 1)]), ok(2, vec![r(X, &[1])])];
        let v = check(&h).unwrap_err();
        assert_eq!(v, Anomaly::AbortedRead { reader: 2, writer: 1, key: X, elem: 1 });
        assert_eq!(v.anomaly(), "G1a");
        assert!(v.to_string().contains("G1a"));
    }

    #[test]
    fn reads_inside_aborted_txns_are_ignored() {
        let h = vec![txn(1, Outcome::Aborted, vec![r(X, &[42, 42]), a(X, 1)]), ok(2, vec![r(X, &[])])];
        assert_eq!(check(&h).unwrap().txns_checked, 1);
    }

    #[test]
    fn incompatible_order() {
        let h = vec![
            ok(1, vec![a(X, 1)]),
            ok(2, vec![a(X, 2)]),
            ok(3, vec![a(X, 3)]),
            ok(4, vec![r(X, &[1, 2])]),
            ok(5, vec![r(X, &[1, 3])]),
        ];
        assert_eq!(check(&h).unwrap_err(), Anomaly::IncompatibleOrder { key: X, a: vec![1, 2], b: vec![1, 3] });
    }

    #[test]
    fn shorter_read_must_be_prefix_too() {
        let h = vec![ok(1, vec![a(X, 1), a(X, 2)]), ok(2, vec![r(X, &[1, 2])]), ok(3, vec![r(X, &[2])])];
        assert!(matches!(check(&h), Err(Anomaly::IncompatibleOrder { key: X, .. })));
    }

    #[test]
    fn unknown_elem() {
        let h = vec![ok(1, vec![a(X, 1)]), ok(2, vec![r(X, &[1, 99])])];
        let v = check(&h).unwrap_err();
        assert_eq!(v, Anomaly::UnknownElem { txn: 2, key: X, elem: 99 });
        // An element appended to a different key is also garbage for this one.
        let h = vec![ok(1, vec![a(Y, 1)]), ok(2, vec![r(X, &[1])])];
        assert!(matches!(check(&h), Err(Anomaly::UnknownElem { elem: 1, .. })));
    }

    #[test]
    fn duplicate_elem_in_read() {
        let h = vec![ok(1, vec![a(X, 1)]), ok(2, vec![r(X, &[1, 1])])];
        assert_eq!(check(&h).unwrap_err(), Anomaly::DuplicateElem { txn: 2, key: X, elem: 1 });
    }

    #[test]
    fn unknown_txn_with_observed_append_participates() {
        // Write skew where T1 timed out but its append to y was observed.
        let h = vec![
            txn(1, Outcome::Unknown, vec![r(X, &[]), a(Y, 1)]),
            ok(2, vec![r(Y, &[]), a(X, 2)]),
            ok(3, vec![r(X, &[2]), r(Y, &[1])]),
        ];
        let v = check(&h).unwrap_err();
        assert_eq!(cycle_kinds(&v), vec![EdgeKind::RW, EdgeKind::RW]);
        let Anomaly::Cycle { txns, .. } = &v else { unreachable!() };
        assert!(txns.contains(&1));

        // Unobserved, the unknown transaction is ignored and the rest is serializable.
        let h2 = vec![h[0].clone(), h[1].clone(), ok(3, vec![r(X, &[2]), r(Y, &[])])];
        assert_eq!(check(&h2).unwrap().txns_checked, 2);
    }

    #[test]
    fn unknown_txns_observed_transitively_are_checked() {
        // T1 (unknown) is only observed by T2 (unknown), which is observed by committed T3;
        // T1's own read is then a garbage read that must be reported.
        let h = vec![
            txn(1, Outcome::Unknown, vec![r(Y, &[77]), a(X, 1)]),
            txn(2, Outcome::Unknown, vec![r(X, &[1]), a(Y, 2)]),
            ok(3, vec![r(Y, &[2])]),
        ];
        assert_eq!(check(&h).unwrap_err(), Anomaly::UnknownElem { txn: 1, key: Y, elem: 77 });
    }

    #[test]
    fn prefers_g0_over_g2_in_same_component() {
        // A G0 cycle between T1 and T2, plus T3 linked to them only via rw edges.
        let h = vec![
            ok(1, vec![a(X, 1), a(Y, 2)]),
            ok(2, vec![a(X, 3), a(Y, 4)]),
            ok(3, vec![r(X, &[1]), r(Y, &[4])]),
            ok(4, vec![r(X, &[1, 3]), r(Y, &[4, 2])]),
        ];
        let v = check(&h).unwrap_err();
        assert_eq!(v.anomaly(), "G0");
    }

    /// Tiny 64-bit LCG (Knuth's MMIX constants).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    /// A truly serial execution: each transaction runs alone against the current state, reads
    /// see the state plus the transaction's own earlier appends, and effects are applied if it
    /// committed (and, for unknown outcomes, on a coin flip).
    fn serial_history(seed: u64, txns: u64, keys: u64) -> Vec<TxnRecord> {
        let mut rng = Lcg(seed);
        let mut state: BTreeMap<Key, Vec<Elem>> = BTreeMap::new();
        let mut next_elem: Elem = 1;
        let mut out = Vec::new();
        for id in 0..txns {
            let outcome = match rng.below(10) {
                0 => Outcome::Aborted,
                1 => Outcome::Unknown,
                _ => Outcome::Committed,
            };
            let mut ops = Vec::new();
            let mut mine: Vec<(Key, Elem)> = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let key = rng.below(keys);
                if rng.below(2) == 0 {
                    let mut list = state.get(&key).cloned().unwrap_or_default();
                    list.extend(mine.iter().filter(|m| m.0 == key).map(|m| m.1));
                    ops.push(Op::Read { key, list });
                } else {
                    mine.push((key, next_elem));
                    ops.push(Op::Append { key, elem: next_elem });
                    next_elem += 1;
                }
            }
            let applied = match outcome {
                Outcome::Committed => true,
                Outcome::Aborted => false,
                Outcome::Unknown => rng.below(2) == 0,
            };
            if applied {
                for (key, elem) in mine {
                    state.entry(key).or_default().push(elem);
                }
            }
            out.push(txn(id, outcome, ops));
        }
        out
    }

    #[test]
    fn randomized_serial_history_is_ok_and_corruption_is_caught() {
        for seed in 0..20 {
            let mut h = serial_history(seed, 200, 5);
            let stats = check(&h).unwrap_or_else(|v| panic!("seed {seed}: {v}"));
            assert!(stats.txns_checked >= 150);
            assert!(stats.edges_ww > 0 && stats.edges_wr > 0 && stats.edges_rw > 0);

            // Corrupt a committed read of length >= 2 of a key that another committed txn also
            // read non-empty: after the swap the two reads start with different elements.
            let mut target = None;
            'find: for (t, txn) in h.iter().enumerate() {
                if txn.outcome != Outcome::Committed {
                    continue;
                }
                for (o, op) in txn.ops.iter().enumerate() {
                    let Op::Read { key, list } = op else { continue };
                    if list.len() < 2 {
                        continue;
                    }
                    let other = h.iter().enumerate().any(|(u, other)| {
                        u != t
                            && other.outcome == Outcome::Committed
                            && other
                                .ops
                                .iter()
                                .any(|op| matches!(op, Op::Read { key: k, list: l } if k == key && !l.is_empty()))
                    });
                    if other {
                        target = Some((t, o));
                        break 'find;
                    }
                }
            }
            let (t, o) = target.expect("a corruptible read");
            let Op::Read { list, .. } = &mut h[t].ops[o] else { unreachable!() };
            list.swap(0, 1);
            assert!(check(&h).is_err(), "seed {seed}: corruption not detected");
        }
    }

    #[test]
    fn large_serial_history() {
        let h = serial_history(7, 50_000, 2_000);
        let started = std::time::Instant::now();
        let stats = check(&h).unwrap();
        eprintln!("50k txns checked in {:?}: {stats:?}", started.elapsed());
        assert!(stats.txns_checked > 40_000);
    }
}
