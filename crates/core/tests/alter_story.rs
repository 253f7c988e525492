//! Alteration stories: a root with one child, driven by hand; a root's term, won and lost.

use waymark_core::alter::{
    md5_of, AlterConfig, AlterInput, AlterMsg, AlterNode, AlterOutput, AlterRecord, AlterSeq, AlterTimer, MetaVersion,
    Metadata, Term,
};
use waymark_core::VnodeId;

fn cfg(id: &VnodeId, parents: Vec<VnodeId>, children: Vec<VnodeId>) -> AlterConfig {
    AlterConfig::new(id.clone(), parents, children)
}

fn ids() -> (VnodeId, VnodeId) {
    (VnodeId::new("manager1", "node000"), VnodeId::new("store0", "node001"))
}

fn sends(out: &[AlterOutput]) -> Vec<(VnodeId, AlterMsg)> {
    out.iter()
        .filter_map(|o| if let AlterOutput::Send { to, msg } = o { Some((to.clone(), msg.clone())) } else { None })
        .collect()
}

fn started(c: AlterConfig) -> AlterNode {
    let mut n = AlterNode::new(c);
    n.step(0, AlterInput::Started { metadata: Metadata::default(), term: Term(0) });
    n
}

/// Delivers `out` of node `from` and everything it leads to among `nodes`, at time `now`: sends
/// to known vnodes, each `Persist` read back intact, each `Apply` acted on at once. Returns the
/// timers set, by node.
fn pump(nodes: &mut [&mut AlterNode], from: usize, out: Vec<AlterOutput>, now: u64) -> Vec<(usize, AlterTimer, u64)> {
    let mut queue: std::collections::VecDeque<(usize, AlterOutput)> = out.into_iter().map(|o| (from, o)).collect();
    let mut timers = vec![];
    while let Some((at, o)) = queue.pop_front() {
        let (to, input) = match o {
            AlterOutput::SetTimer { timer, at_us } => {
                timers.push((at, timer, at_us));
                continue;
            }
            AlterOutput::Send { to, msg } => match nodes.iter().position(|n| n.id() == &to) {
                Some(i) => (i, AlterInput::Message { from: nodes[at].id().clone(), msg }),
                None => continue,
            },
            AlterOutput::Persist { seq, bytes } => (at, AlterInput::Persisted { seq, bytes }),
            AlterOutput::Apply { seq, .. } => (at, AlterInput::Applied { seq, ok: true }),
            _ => continue,
        };
        queue.extend(nodes[to].step(now, input).into_iter().map(|o| (to, o)));
    }
    timers
}

/// A root and its one child, started; the root wins term 1 and orders its `root` record (seq 1).
fn elected(root_id: &VnodeId, leaf_id: &VnodeId) -> (AlterNode, AlterNode) {
    let mut leaf = started(cfg(leaf_id, vec![root_id.clone()], vec![]));
    let mut root = AlterNode::new(cfg(root_id, vec![], vec![leaf_id.clone()]));
    let out = root.step(0, AlterInput::Started { metadata: Metadata::default(), term: Term(0) });
    assert!(sends(&out).contains(&(leaf_id.clone(), AlterMsg::Claim { term: Term(1) })), "a root claims a term first");
    pump(&mut [&mut root, &mut leaf], 0, out, 0);
    assert_eq!(root.metadata().get("root"), Some(format!("{root_id} term 1").as_bytes()));
    assert_eq!(leaf.metadata(), root.metadata());
    (root, leaf)
}

#[test]
fn the_root_confirms_to_the_initiator_only_after_its_child_read_back_applied_and_confirmed() {
    let (root_id, leaf_id) = ids();
    let (mut root, mut leaf) = elected(&root_id, &leaf_id);
    let record = AlterRecord::set("config/x", "1");

    let out = leaf.step(1, AlterInput::Propose { n: 0, record: record.clone() });
    let (to, propose) = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Propose { .. })).unwrap();
    assert_eq!(to, root_id, "proposals go up the parent chain");

    let out = root.step(2, AlterInput::Message { from: leaf_id.clone(), msg: propose });
    // The root stamps the proposal on what it orders, so every copy can skip it if ordered again.
    let id = waymark_core::alter::ProposalId { initiator: leaf_id.clone(), n: 0 };
    let record = AlterRecord { origin: Some(id), ..record };
    let bytes = record.encode(MetaVersion::new(Term(1), AlterSeq(2)));
    assert_eq!(
        out,
        vec![AlterOutput::Persist { seq: AlterSeq(2), bytes: bytes.clone() }],
        "the root orders it as (1, 2)"
    );
    let out = root.step(3, AlterInput::Persisted { seq: AlterSeq(2), bytes: bytes.clone() });
    let alter = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Alter { .. })).unwrap().1;
    let sent = |r: &AlterRecord, md5: &[u8; 16]| r == &record && *md5 == md5_of(&bytes);
    assert!(
        matches!(&alter, AlterMsg::Alter { term: Term(1), prev_term: Term(1), seq: AlterSeq(2), record: r, md5, .. } if sent(r, md5))
    );
    root.step(4, AlterInput::Applied { seq: AlterSeq(2), ok: true });

    leaf.step(5, AlterInput::Message { from: root_id.clone(), msg: alter });
    let out = leaf.step(6, AlterInput::Persisted { seq: AlterSeq(2), bytes });
    assert!(out.contains(&AlterOutput::Apply { term: Term(1), seq: AlterSeq(2), record: record.clone() }));
    let out = leaf.step(7, AlterInput::Applied { seq: AlterSeq(2), ok: true });
    let confirm = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Confirm { .. })).unwrap().1;
    assert_eq!(confirm, AlterMsg::Confirm { term: Term(1), seq: AlterSeq(2), ok: true, applied: 1 });

    let out = root.step(8, AlterInput::Message { from: leaf_id.clone(), msg: confirm });
    let outcome = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Outcome { .. })).unwrap().1;
    let out = leaf.step(9, AlterInput::Message { from: root_id, msg: outcome });
    assert!(matches!(&out[..], [AlterOutput::Done { ok: true, attempts: 1, applied: 1, .. }]), "one leaf applied it");
    assert_eq!(leaf.metadata(), root.metadata());
    assert_eq!(leaf.metadata().get("config/x"), Some(&b"1"[..]));
}

#[test]
fn a_copy_read_back_with_a_wrong_md5_is_not_applied_and_fails_the_branch() {
    let (root_id, leaf_id) = ids();
    let mut leaf = started(cfg(&leaf_id, vec![root_id.clone()], vec![]));
    let record = AlterRecord::set("config/x", "1");
    let bytes = record.encode(MetaVersion::new(Term(1), AlterSeq(1)));
    let id = waymark_core::alter::ProposalId { initiator: root_id.clone(), n: 0 };
    let alter =
        AlterMsg::Alter { term: Term(1), prev_term: Term(0), seq: AlterSeq(1), id, record, md5: md5_of(&bytes) };
    leaf.step(1, AlterInput::Message { from: root_id.clone(), msg: alter });
    let mut damaged = bytes;
    *damaged.last_mut().unwrap() ^= 1;
    let out = leaf.step(2, AlterInput::Persisted { seq: AlterSeq(1), bytes: damaged });
    assert_eq!(
        sends(&out),
        vec![(root_id, AlterMsg::Confirm { term: Term(1), seq: AlterSeq(1), ok: false, applied: 0 })]
    );
    assert_eq!(leaf.metadata().seq(), AlterSeq::ZERO, "nothing applied");
}

#[test]
fn a_host_that_comes_alive_is_told_by_the_parent_which_vnodes_to_start() {
    let (root_id, leaf_id) = ids();
    let genesis = Metadata::genesis([
        (format!("vnode/{leaf_id}"), root_id.to_string().into_bytes()),
        ("vnode/store1@node001".to_string(), b"manager9@node009".to_vec()),
    ]);
    let mut root = AlterNode::new(cfg(&root_id, vec![], vec![leaf_id.clone()]));
    root.step(0, AlterInput::Started { metadata: genesis, term: Term(0) });
    let agent = VnodeId::new("agent", "node001");
    let out =
        root.step(1, AlterInput::Message { from: agent.clone(), msg: AlterMsg::HostAlive { host: "node001".into() } });
    assert_eq!(sends(&out), vec![(agent, AlterMsg::StartVnodes { vnodes: vec![leaf_id.clone()] })]);
}

#[test]
fn a_message_to_a_child_behind_a_dead_link_is_relayed_by_a_sibling_that_hears_both() {
    let (parent, c1) = ids();
    let c2 = VnodeId::new("store0", "node002");
    let mut config = cfg(&parent, vec![], vec![c1.clone(), c2.clone()]);
    config.heartbeat_timeout_us = 1_000_000;
    let mut p = AlterNode::new(config);
    p.step(0, AlterInput::Started { metadata: Metadata::default(), term: Term(0) });
    // c2 hears the parent and c1; c1 reports hearing nobody: parent -> c1 is dead.
    let reach = |hears: Vec<VnodeId>| AlterMsg::Reach { hears };
    p.step(1, AlterInput::Message { from: c2.clone(), msg: reach(vec![parent.clone(), c1.clone()]) });
    p.step(2, AlterInput::Message { from: c1.clone(), msg: reach(vec![]) });

    // c2's promise makes a majority (the root and c2 of three voters): the root orders its record.
    let promise = AlterMsg::Promise { term: Term(1), granted: true, metadata: Some(Metadata::default()) };
    let out = p.step(3, AlterInput::Message { from: c2.clone(), msg: promise });
    let persists: Vec<_> = out
        .iter()
        .filter_map(|o| if let AlterOutput::Persist { bytes, .. } = o { Some(bytes) } else { None })
        .collect();
    assert_eq!(persists.len(), 1, "{out:?}");
    let bytes = persists[0].clone();
    let out = p.step(4, AlterInput::Persisted { seq: AlterSeq(1), bytes });
    let relayed = sends(&out).into_iter().any(|(to, m)| {
        to == c2
            && matches!(&m, AlterMsg::Relay { to, msg, .. } if to == &c1 && matches!(msg.open(), Some(AlterMsg::Alter { .. })))
    });
    assert!(relayed, "the Alter for c1 goes through c2 too: {out:?}");
    assert!(sends(&out).iter().any(|(to, m)| to == &c1 && matches!(m, AlterMsg::Alter { .. })), "and directly");
}

#[test]
fn a_child_promises_one_root_per_term_prefers_its_primary_and_tells_an_old_root_the_term() {
    let (root_id, child_id) = ids();
    let secondary = VnodeId::new("manager1-secondary", "node002");
    let mut child = started(cfg(&child_id, vec![root_id.clone()], vec![]));
    let claim = |term| AlterMsg::Claim { term: Term(term) };
    let msg = |from: &VnodeId, msg| AlterInput::Message { from: from.clone(), msg };

    let out = child.step(1, msg(&root_id, claim(1)));
    assert_eq!(out[0], AlterOutput::PersistTerm { term: Term(1) }, "the promise is durable before it is sent");
    assert!(
        matches!(&sends(&out)[..], [(to, AlterMsg::Promise { term: Term(1), granted: true, .. })] if to == &root_id)
    );

    // The primary root is heard: a secondary's claim is refused, with the term promised.
    let out = child.step(2, msg(&secondary, claim(2)));
    assert_eq!(
        sends(&out),
        vec![(secondary.clone(), AlterMsg::Promise { term: Term(1), granted: false, metadata: None })]
    );

    // The primary is silent past the heartbeat timeout: the secondary wins the child.
    let out = child.step(100_000, msg(&secondary, claim(2)));
    assert!(matches!(&sends(&out)[..], [(_, AlterMsg::Promise { term: Term(2), granted: true, .. })]), "{out:?}");
    assert_eq!(child.parent(), Some(&secondary));

    // The old root returns with term 1: told term 2. An alteration of term 1 is refused.
    let md5 = Metadata::default().md5();
    let heartbeat = AlterMsg::Heartbeat {
        term: Term(0),
        seq: AlterSeq(0),
        md5,
        leaf_md5: md5,
        lead: Some(Term(1)),
        committed: Default::default(),
        fresh: true,
        sent_us: 100_001,
        echo_us: None,
    };
    let out = child.step(100_001, msg(&root_id, heartbeat));
    assert!(
        sends(&out).contains(&(root_id.clone(), AlterMsg::Promise { term: Term(2), granted: false, metadata: None }))
    );
    assert_eq!(child.parent(), Some(&secondary), "no switch back to a root of an older term");

    // It claims term 3: the child switches back to its primary.
    let out = child.step(100_002, msg(&root_id, claim(3)));
    assert!(sends(&out).contains(&(
        root_id.clone(),
        AlterMsg::Promise { term: Term(3), granted: true, metadata: Some(Metadata::default()) }
    )));
    assert!(child.follows_primary_parent());
}

#[test]
fn a_parent_records_a_silent_child_down_and_its_host_dead_when_nothing_else_works_there() {
    use waymark_core::alter::cluster::{self, VnodeEntry};
    let root_id = VnodeId::new("manager1", "node000");
    let (c1, c2) = (VnodeId::new("store0", "node001"), VnodeId::new("store0", "node002"));
    let mut config = cfg(&root_id, vec![], vec![c1.clone(), c2.clone()]);
    config.reports = true;
    let entries = [(&root_id, vec![]), (&c1, vec![root_id.clone()]), (&c2, vec![root_id.clone()])];
    let vnodes = entries.iter().map(|(id, parents)| VnodeEntry { id, parents: parents.clone() });
    let genesis = cluster::genesis(&[], vnodes, None);
    let start = |n: &mut AlterNode| n.step(0, AlterInput::Started { metadata: genesis.clone(), term: Term(0) });
    let (mut root, mut child2) = (AlterNode::new(config), AlterNode::new(cfg(&c2, vec![root_id.clone()], vec![])));
    let out = start(&mut child2);
    let mut timers = pump(&mut [&mut root, &mut child2], 1, out, 0);
    let out = start(&mut root);
    timers.extend(pump(&mut [&mut root, &mut child2], 0, out, 0));
    assert_eq!(root.metadata().get("host/node001"), Some(cluster::ALIVE));

    // c1 never answers; c2 does. Past the heartbeat timeout the root reports c1, then its host.
    for now in (1_000..=200_000u64).step_by(1_000) {
        let due: Vec<_> = timers.iter().filter(|(_, _, at)| *at <= now).cloned().collect();
        timers.retain(|(_, _, at)| *at > now);
        for (node, timer, _) in due {
            let out = [&mut root, &mut child2][node].step(now, AlterInput::Timer(timer));
            timers.extend(pump(&mut [&mut root, &mut child2], node, out, now));
        }
    }
    assert_eq!(root.metadata().get(&format!("state/{c1}")), Some(cluster::DOWN));
    assert_eq!(root.metadata().get("host/node001"), Some(cluster::DEAD));
    assert_eq!(root.metadata().get(&format!("state/{c2}")), Some(cluster::WORKING));
    assert_eq!(root.metadata().get("host/node002"), Some(cluster::ALIVE));
    assert_eq!(child2.metadata(), root.metadata());
}

#[test]
fn the_metadata_records_each_vnodes_parent_queue_in_election_order() {
    use waymark_core::alter::cluster::{self, VnodeEntry};
    let manager = VnodeId::new("manager1", "node000");
    let siblings: Vec<VnodeId> = ["node000", "node001", "node002"].iter().map(|h| VnodeId::new("store0", *h)).collect();
    let mut config = cfg(&siblings[1], vec![manager.clone()], vec![]);
    config.siblings = siblings.clone();
    let queue = config.parent_queue();
    let secondary = |h: &str| VnodeId::new("manager1-secondary", h);
    assert_eq!(queue, vec![manager.clone(), secondary("node000"), secondary("node001"), secondary("node002")]);

    let genesis = cluster::genesis(&[], [VnodeEntry::of(&config)], None);
    assert_eq!(cluster::parent_queue(&genesis, &siblings[1]), queue);
    assert_eq!(genesis.vnodes_on("node001", &manager), vec![siblings[1].clone()]);
    assert!(genesis.vnodes_on("node001", &secondary("node000")).is_empty(), "boot by the primary");
}

#[test]
fn a_root_with_a_full_queue_refuses_a_proposal_at_once() {
    let (root_id, leaf_id) = ids();
    // No child ever promises: the root holds no term and orders nothing, so proposals queue up.
    let mut root = AlterNode::new(cfg(&root_id, vec![], vec![leaf_id.clone()]));
    root.step(0, AlterInput::Started { metadata: Metadata::default(), term: Term(0) });
    let propose = |n: u64| AlterMsg::Propose {
        id: waymark_core::alter::ProposalId { initiator: leaf_id.clone(), n },
        record: AlterRecord::set("config/x", n.to_string()),
    };
    for n in 0..waymark_core::alter::node::QUEUE_MAX as u64 {
        let out = root.step(1, AlterInput::Message { from: leaf_id.clone(), msg: propose(n) });
        assert!(sends(&out).is_empty(), "queued, not answered");
    }
    let out = root.step(2, AlterInput::Message { from: leaf_id.clone(), msg: propose(9_999) });
    assert!(matches!(&sends(&out)[..], [(to, AlterMsg::Outcome { ok: false, .. })] if to == &leaf_id), "{out:?}");
}

/// The record a root orders first after winning a term, with a child's proposal heard during its
/// campaign (`alter/root.rs`, `maybe_win`).
fn first_ordered_in_term(breaks: waymark_core::Breaks) -> AlterRecord {
    let (root_id, leaf_id) = ids();
    let mut leaf = started(cfg(&leaf_id, vec![root_id.clone()], vec![]));
    let mut root_cfg = cfg(&root_id, vec![], vec![leaf_id.clone()]);
    root_cfg.breaks = breaks;
    let mut root = AlterNode::new(root_cfg);
    let claim = root.step(0, AlterInput::Started { metadata: Metadata::default(), term: Term(0) });
    // The child's proposal reaches the root while it campaigns: it is queued, not ordered.
    let proposed = leaf.step(1, AlterInput::Propose { n: 0, record: AlterRecord::set("config/x", "1") });
    let (_, propose) = sends(&proposed).into_iter().find(|(_, m)| matches!(m, AlterMsg::Propose { .. })).unwrap();
    let out = root.step(2, AlterInput::Message { from: leaf_id.clone(), msg: propose });
    assert!(!out.iter().any(|o| matches!(o, AlterOutput::Persist { .. })), "nothing is ordered in a campaign");
    // The claim is granted: the root wins term 1 and orders.
    let (_, claim) = sends(&claim).into_iter().find(|(_, m)| matches!(m, AlterMsg::Claim { .. })).unwrap();
    let promised = leaf.step(3, AlterInput::Message { from: root_id.clone(), msg: claim });
    let (_, promise) = sends(&promised).into_iter().find(|(_, m)| matches!(m, AlterMsg::Promise { .. })).unwrap();
    let out = root.step(4, AlterInput::Message { from: leaf_id, msg: promise });
    let bytes = out.iter().find_map(|o| if let AlterOutput::Persist { bytes, .. } = o { Some(bytes) } else { None });
    let ordered = AlterRecord::decode(bytes.expect("the winner orders a record")).expect("a record");
    assert_eq!(ordered.at, MetaVersion::new(Term(1), AlterSeq(1)));
    ordered.record
}

/// Regression (`--tree` seed 8958, 2026-12-02): queued behind proposals heard during its
/// campaign, a stale root's `root` record came seqs late in its lost term and looked like a term
/// won on a copy missing alterations answered ok. The root record is the first of every term.
#[test]
fn a_root_orders_its_root_record_first_even_with_proposals_queued_during_its_campaign() {
    assert_eq!(first_ordered_in_term(waymark_core::Breaks::default()).key, "root");
    let mut breaks = waymark_core::Breaks::default();
    assert!(breaks.enable("root-record-queued"));
    assert_eq!(first_ordered_in_term(breaks).key, "config/x", "break root-record-queued orders the proposal first");
}

/// Fires both nodes' heartbeat timers every interval up to `until_us`, delivering at once.
fn beat_until(root: &mut AlterNode, leaf: &mut AlterNode, from_us: u64, until_us: u64) {
    let interval = root.config().heartbeat_interval_us;
    let mut at = from_us;
    while at <= until_us {
        for i in 0..2 {
            let out = [&mut *root, &mut *leaf][i].step(at, AlterInput::Timer(AlterTimer::Heartbeat));
            pump(&mut [&mut *root, &mut *leaf], i, out, at);
        }
        at += interval;
    }
}

#[test]
fn a_child_is_synced_while_its_parent_answers_and_not_past_its_lease_when_it_stops() {
    let (root_id, leaf_id) = ids();
    let (mut root, mut leaf) = elected(&root_id, &leaf_id);
    beat_until(&mut root, &mut leaf, 20_000, 200_000);
    assert!(root.fresh(), "a root that hears its one voter answer is fresh");
    assert!(leaf.synced(), "a child that hears a fresh parent is synced");
    let lease = leaf.config().heartbeat_timeout_us / 2;
    leaf.step(200_000 + lease + 1, AlterInput::Timer(AlterTimer::Election));
    assert!(!leaf.synced(), "a lease's time after the last heartbeat, the child stops");
}

/// Seed 54 (append, 16 clients, failover): a heartbeat held by the network renewed the lease of
/// a vnode cut off meanwhile, which then served a stale GET. The lease is dated by the stamp the
/// parent echoes — when the child last spoke to it — not by when the heartbeat arrived.
#[test]
fn a_heartbeat_held_by_the_network_does_not_renew_the_lease_of_a_child_cut_off_meanwhile() {
    let (root_id, leaf_id) = ids();
    let (mut root, mut leaf) = elected(&root_id, &leaf_id);
    beat_until(&mut root, &mut leaf, 20_000, 100_000);
    let out = root.step(120_000, AlterInput::Timer(AlterTimer::Heartbeat));
    let held: Vec<AlterMsg> = sends(&out).into_iter().filter(|(to, _)| *to == leaf_id).map(|(_, m)| m).collect();
    assert!(held.iter().any(|m| matches!(m, AlterMsg::Heartbeat { fresh: true, .. })), "{held:?}");
    let lease = leaf.config().heartbeat_timeout_us / 2;
    let late = 120_000 + 2 * lease;
    for msg in held {
        leaf.step(late, AlterInput::Message { from: root_id.clone(), msg });
    }
    assert!(!leaf.synced(), "the held heartbeat echoes a stamp older than the lease");
}
