//! Alteration stories: a root with one child, driven by hand.

use waymark_core::alter::{md5_of, AlterConfig, AlterInput, AlterMsg, AlterNode, AlterOutput, AlterRecord, Metadata};
use waymark_core::VnodeId;

fn cfg(id: &VnodeId, parents: Vec<VnodeId>, children: Vec<VnodeId>) -> AlterConfig {
    AlterConfig {
        id: id.clone(),
        parents,
        children,
        confirm_timeout_us: 10_000,
        propose_timeout_us: 50_000,
        retries_max: 2,
        retry_backoff_us: 1_000,
        heartbeat_interval_us: 20_000,
        heartbeat_timeout_us: 60_000,
        breaks: Default::default(),
        siblings: vec![],
        failover: false,
        secondary_of: None,
        reports: false,
    }
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
    n.step(0, AlterInput::Started { metadata: Metadata::default() });
    n
}

#[test]
fn the_root_confirms_to_the_initiator_only_after_its_child_read_back_applied_and_confirmed() {
    let (root_id, leaf_id) = ids();
    let mut root = started(cfg(&root_id, vec![], vec![leaf_id.clone()]));
    let mut leaf = started(cfg(&leaf_id, vec![root_id.clone()], vec![]));
    let record = AlterRecord::set("config/x", "1");

    let out = leaf.step(1, AlterInput::Propose { n: 0, record: record.clone() });
    let (to, propose) = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Propose { .. })).unwrap();
    assert_eq!(to, root_id, "proposals go up the parent chain");

    let out = root.step(2, AlterInput::Message { from: leaf_id.clone(), msg: propose });
    let bytes = record.encode(1);
    assert_eq!(out, vec![AlterOutput::Persist { seq: 1, bytes: bytes.clone() }], "the root orders it as seq 1");
    let out = root.step(3, AlterInput::Persisted { seq: 1, bytes: bytes.clone() });
    let alter = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Alter { .. })).unwrap().1;
    assert!(matches!(&alter, AlterMsg::Alter { seq: 1, record: r, md5, .. } if r == &record && *md5 == md5_of(&bytes)));
    root.step(4, AlterInput::Applied { seq: 1, ok: true });

    leaf.step(5, AlterInput::Message { from: root_id.clone(), msg: alter });
    let out = leaf.step(6, AlterInput::Persisted { seq: 1, bytes });
    assert!(out.contains(&AlterOutput::Apply { seq: 1, record: record.clone() }));
    let out = leaf.step(7, AlterInput::Applied { seq: 1, ok: true });
    let confirm = sends(&out).into_iter().find(|(_, m)| matches!(m, AlterMsg::Confirm { .. })).unwrap().1;
    assert_eq!(confirm, AlterMsg::Confirm { seq: 1, ok: true, applied: 1 });

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
    let bytes = record.encode(1);
    let id = waymark_core::alter::ProposalId { initiator: root_id.clone(), n: 0 };
    let alter = AlterMsg::Alter { seq: 1, id, record, md5: md5_of(&bytes) };
    leaf.step(1, AlterInput::Message { from: root_id.clone(), msg: alter });
    let mut damaged = bytes;
    *damaged.last_mut().unwrap() ^= 1;
    let out = leaf.step(2, AlterInput::Persisted { seq: 1, bytes: damaged });
    assert_eq!(sends(&out), vec![(root_id, AlterMsg::Confirm { seq: 1, ok: false, applied: 0 })]);
    assert_eq!(leaf.metadata().seq(), 0, "nothing applied");
}

#[test]
fn a_host_that_comes_alive_is_told_by_the_parent_which_vnodes_to_start() {
    let (root_id, leaf_id) = ids();
    let genesis = Metadata::genesis([
        (format!("vnode/{leaf_id}"), root_id.to_string().into_bytes()),
        ("vnode/store1@node001".to_string(), b"manager9@node009".to_vec()),
    ]);
    let mut root = AlterNode::new(cfg(&root_id, vec![], vec![leaf_id.clone()]));
    root.step(0, AlterInput::Started { metadata: genesis });
    let agent = VnodeId::new("agent", "node001");
    let out =
        root.step(1, AlterInput::Message { from: agent.clone(), msg: AlterMsg::HostAlive { host: "node001".into() } });
    assert_eq!(sends(&out), vec![(agent, AlterMsg::StartVnodes { vnodes: vec![leaf_id.to_string()] })]);
}

#[test]
fn a_message_to_a_child_behind_a_dead_link_is_relayed_by_a_sibling_that_hears_both() {
    let (parent, c1) = ids();
    let c2 = VnodeId::new("store0", "node002");
    let mut config = cfg(&parent, vec![], vec![c1.clone(), c2.clone()]);
    config.heartbeat_timeout_us = 1_000_000;
    let mut p = AlterNode::new(config);
    p.step(0, AlterInput::Started { metadata: Metadata::default() });
    // c2 hears the parent and c1; c1 reports hearing nobody: parent -> c1 is dead.
    let reach = |hears: Vec<VnodeId>| AlterMsg::Reach { hears };
    p.step(1, AlterInput::Message { from: c2.clone(), msg: reach(vec![parent.clone(), c1.clone()]) });
    p.step(2, AlterInput::Message { from: c1.clone(), msg: reach(vec![]) });

    let out = p.step(3, AlterInput::Propose { n: 0, record: AlterRecord::set("config/x", "1") });
    let bytes = AlterRecord::set("config/x", "1").encode(1);
    assert_eq!(out.iter().filter(|o| matches!(o, AlterOutput::Persist { .. })).count(), 1, "{out:?}");
    let out = p.step(4, AlterInput::Persisted { seq: 1, bytes });
    let relayed = sends(&out).into_iter().any(|(to, m)| {
        to == c2
            && matches!(&m, AlterMsg::Relay { to, msg, .. } if to == &c1 && matches!(**msg, AlterMsg::Alter { .. }))
    });
    assert!(relayed, "the Alter for c1 goes through c2 too: {out:?}");
    assert!(sends(&out).iter().any(|(to, m)| to == &c1 && matches!(m, AlterMsg::Alter { .. })), "and directly");
}
