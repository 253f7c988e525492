//! Seed 000's consistent cut, section by section, as stories on the core's harness: given this
//! cluster, on these deliveries, exactly this outcome. Section numbers are the seed's.

mod harness;
use harness::{prepare_to, Cluster};
use waymark_core::{Body, Breaks, CutFinish, CutId, CutMsg, CutStrategy, Envelope, Record, Timer, TxId, TxnMsg};

fn consistent() -> Cluster {
    Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default())
}

fn start_to(host: &'static str) -> impl Fn(&Envelope) -> bool {
    move |e| e.to.host == host && matches!(e.body, Body::Cut(CutMsg::Start { .. }))
}

fn cut_starts(c: &Cluster, i: usize) -> usize {
    c.logs[i].iter().filter(|r| matches!(r, Record::CutStart { .. })).count()
}

fn cut_finish(c: &Cluster, i: usize) -> Option<&CutFinish> {
    c.logs[i].iter().find_map(|r| if let Record::CutFinish(f) = r { Some(f) } else { None })
}

/// §3–§4.1: a cut reaches a vnode by whichever comes first, the process's START or a coloured
/// transaction message; the second is skipped.
#[test]
fn section_4_a_vnode_that_hears_of_a_cut_twice_starts_it_once() {
    let mut c = consistent();
    c.begin_cut();
    assert!(c.deliver(start_to("node000")));
    let key = c.key_with_chain(&[1, 2]);
    c.client_set(0, &key);
    let prepare = c.inflight.iter().find(|e| prepare_to(&c.ids[1])(e)).expect("a prepare to node001");
    assert_eq!(prepare.cut, Some(CutId(1)), "§5.1: node000 colours what it sends while the cut runs");
    assert!(c.deliver(prepare_to(&c.ids[1].clone())));
    assert_eq!(cut_starts(&c, 1), 1, "the coloured prepare started the cut at node001");
    assert!(c.deliver(start_to("node001")));
    assert_eq!(cut_starts(&c, 1), 1, "START for a cut already started is skipped");
    c.deliver_all();
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!((cut_starts(&c, 0), cut_starts(&c, 1), cut_starts(&c, 2)), (1, 1, 1));
}

/// A two-partition transaction from node000 (chains node001 → node002 and node002 → node000),
/// prepared everywhere, its acknowledgements to the near held. Returns the cluster and the id.
fn prepared_everywhere() -> (Cluster, TxId) {
    let mut c = consistent();
    let (a, b) = (c.key_with_chain(&[1, 2]), c.key_with_chain(&[2, 0]));
    let tx = c.client_writes(0, &[&a, &b]);
    let to_near = |e: &Envelope| e.to.host == "node000" && matches!(e.body, Body::Txn(TxnMsg::PrepareAck { .. }));
    c.deliver_all_but(to_near);
    assert_eq!(c.vnode(1).prepared_count(), 1);
    (c, tx)
}

/// §7.2 and §8.1: the local cut listens to every transaction active when it starts and writes
/// `CutFinish` only once each finished; one whose first committer stamped it with the cut is
/// *after*, one committed without the stamp is *before*.
#[test]
fn section_8_the_local_cut_finishes_only_after_the_transactions_it_listens_to_and_sorts_them() {
    let (mut c, tx) = prepared_everywhere();
    c.begin_cut();
    let to_near = |e: &Envelope| e.to.host == "node000" && matches!(e.body, Body::Txn(TxnMsg::PrepareAck { .. }));
    c.deliver_all_but(to_near);
    assert!(cut_finish(&c, 1).is_none(), "node001 waits for the prepared transaction");
    assert_eq!(c.cut_outcome(), None);
    c.deliver_all();
    let finish = cut_finish(&c, 1).expect("node001 finished its local cut");
    assert!(finish.after.contains(&tx), "node000, the first committer in 2PC, committed it inside the cut: {finish:?}");
    assert!(!finish.before.contains(&tx));
    assert_eq!(c.cut_outcome(), Some(true));
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(false), "an after transaction is not restored");
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false));
}

/// §7.1: a transaction the local cut listens to that finishes by recovery — its vnode crashed
/// with it prepared and learnt the outcome only by asking — fails the cut: which side it is on
/// cannot be known.
#[test]
fn section_7_a_transaction_finished_by_recovery_fails_the_cut() {
    let (mut c, tx) = prepared_everywhere();
    c.drop_where(|e| e.to.host == "node000" && e.from.host == "node001");
    c.crash_and_restart(1);
    c.begin_cut();
    let to_node001_from_near = |e: &Envelope| e.to.host == "node001" && matches!(e.body, Body::Txn(_));
    c.deliver_all_but(to_node001_from_near);
    assert!(c.fire(1, |t| matches!(t, Timer::InDoubt(_))), "node001 is in doubt about its recovered branch");
    c.fire(0, |t| matches!(t, Timer::PrepareTimeout(_)));
    c.deliver_all();
    assert!(c.logs[1].iter().any(|r| matches!(r, Record::TxRolledBack { tx: t, .. } if *t == tx)));
    assert_eq!(c.cut_outcome(), Some(false), "the cut fails rather than guess the recovered transaction's side");
}

/// §5.2 across a restart (`--cuts` seed 7544): a first committer that crashes after its local cut
/// finished but before END hears no END again (it is not logged), yet it must go on stamping what
/// it commits with the cut: here a transaction prepared at its primary before the cut reaches it
/// only after the restart. Stamped `None` it would be *before* at the primary, which listens to
/// it, and *after* at the first committer, whose `CutFinish` came first: half a transaction.
#[test]
fn section_5_a_first_committer_restarted_before_the_end_still_stamps_with_the_cut() {
    let mut c = consistent();
    let key = c.key_with_chain(&[1, 2]);
    let tx = c.client_set(0, &key);
    let first_committer = c.ids[2].clone();
    assert!(c.deliver(prepare_to(&c.ids[1].clone())), "node001, the primary, prepares before the cut");
    c.begin_cut();
    let late = |e: &Envelope| prepare_to(&first_committer)(e);
    let end = |e: &Envelope| matches!(e.body, Body::Cut(CutMsg::End { .. }));
    c.deliver_all_but(|e| late(e) || end(e));
    assert!(cut_finish(&c, 2).is_some(), "node002 had nothing to wait for: its local cut is over");
    assert!(cut_finish(&c, 1).is_none(), "node001 listens to the transaction");
    let held: Vec<Envelope> = c.inflight.iter().filter(|e| late(e)).cloned().collect();
    c.crash_and_restart(2);
    c.inflight.extend(held); // the late prepare was on the wire, not at node002
    c.deliver_all();
    assert_eq!(c.cut_outcome(), Some(true));
    assert!(c.committed_on(1, &tx) && c.committed_on(2, &tx));
    assert_eq!(c.restored_with(2, CutId(1), &tx), Some(false), "committed after node002's CutFinish");
    assert_eq!(c.restored_with(1, CutId(1), &tx), Some(false), "so after the cut at the primary too");
}
