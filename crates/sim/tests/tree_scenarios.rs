//! The cluster tree in scenarios placed by hand (seed 004's cases): the root dies, a split cuts the
//! root off with a minority, a primary parent returns during an alteration, a copy is damaged on
//! one vnode. Tree: 24 store vnodes, fan-out 4 — managers `manager1@node000{00,04,…,20}`,
//! `manager2@node00000` and `manager2@node00016`, root `manager3@node00001` (a host none of its children
//! runs on).

use waymark_core::alter::{AlterRecord, View};
use waymark_core::VnodeId;
use waymark_sim::tree::{Scripted, TreeConfig, TreeReport, TreeWorld};

fn v(name: &str) -> VnodeId {
    VnodeId::parse(name).expect("a vnode id")
}

fn set(key: &str) -> AlterRecord {
    AlterRecord::set(key, "1")
}

/// No random faults or proposals: only the scenario.
fn run(scenario: Vec<(u64, Scripted)>) -> TreeReport {
    let cfg = TreeConfig {
        faults: false,
        proposals: 0,
        cut_processes: 0,
        duration_us: 2_000_000,
        scenario,
        ..TreeConfig::new(7)
    };
    let r = TreeWorld::new(cfg).run();
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    r
}

fn outcome(r: &TreeReport, key: &str) -> (Option<bool>, u64) {
    let o = r.outcomes.iter().find(|o| o.record.key == key).expect("proposed");
    (o.ok, o.answered_us)
}

#[test]
fn the_root_dies_a_secondary_root_wins_a_term_and_the_primary_takes_over_when_it_returns() {
    let r = run(vec![
        (200_000, Scripted::Crash { vnode: v("manager3@node00001"), down_us: 600_000 }),
        (500_000, Scripted::Propose { vnode: v("store0@node00005"), record: set("config/while-down") }),
        (1_300_000, Scripted::Propose { vnode: v("store0@node00020"), record: set("config/after") }),
    ]);
    assert!(r.tree.secondary_root_terms >= 1, "no secondary root won a term");
    let (ok, at) = outcome(&r, "config/while-down");
    assert_eq!(ok, Some(true));
    assert!(at < 800_000, "applied while the primary root was down (answered at {at} us)");
    assert_eq!(outcome(&r, "config/after").0, Some(true));
    let root = r.root_metadata.get("root").map(|b| String::from_utf8_lossy(b).into_owned());
    assert!(root.as_deref().is_some_and(|s| s.starts_with("manager3@node00001 term")), "{root:?}");
    assert_eq!(r.root_metadata.get("config/while-down"), Some(&b"1"[..]));
    assert_eq!(r.tree.secondaries_started, r.tree.secondaries_stopped);
}

#[test]
fn a_root_cut_off_with_no_child_answers_nothing_ok_and_the_other_side_goes_on() {
    // The root alone on one side: its children elect a secondary root, which wins with both of
    // their promises; the old root cannot reach a majority.
    let r = run(vec![
        (200_000, Scripted::Split { side: vec![v("manager3@node00001")], heal_us: 500_000 }),
        (400_000, Scripted::Propose { vnode: v("manager3@node00001"), record: set("config/minority") }),
        (400_000, Scripted::Propose { vnode: v("store0@node00017"), record: set("config/majority") }),
    ]);
    assert!(r.tree.secondary_root_terms >= 1, "no secondary root won a term");
    let (ok, at) = outcome(&r, "config/majority");
    assert_eq!(ok, Some(true));
    assert!(at < 700_000, "answered during the split (at {at} us)");
    let (ok, at) = outcome(&r, "config/minority");
    assert!(ok != Some(true) || at >= 700_000, "the cut-off root answered ok at {at} us, inside the split");
    assert_eq!(r.tree.secondaries_started, r.tree.secondaries_stopped);
}

#[test]
fn a_primary_parent_that_returns_during_an_alteration_takes_its_children_back() {
    let r = run(vec![
        (200_000, Scripted::Crash { vnode: v("manager1@node00004"), down_us: 300_000 }),
        (499_000, Scripted::Propose { vnode: v("store0@node00005"), record: set("config/x") }),
        (501_000, Scripted::Propose { vnode: v("store0@node00006"), record: set("config/y") }),
    ]);
    assert!(r.tree.failovers >= 4 && r.tree.switch_backs == r.tree.failovers);
    assert_eq!(r.tree.boots_by_parent, 1, "manager1@node00004 is booted by its parent");
    assert_eq!(outcome(&r, "config/x").0, Some(true));
    assert_eq!(outcome(&r, "config/y").0, Some(true));
}

#[test]
fn a_copy_damaged_on_one_vnode_fails_that_attempt_and_the_retry_applies_it_everywhere() {
    let r = run(vec![
        (300_000, Scripted::Corrupt { vnode: v("manager2@node00016") }),
        (310_000, Scripted::Propose { vnode: v("store0@node00001"), record: set("config/z") }),
    ]);
    assert_eq!(r.tree.md5_corruptions, 1);
    assert!(r.tree.retried >= 1, "the damaged attempt is retried");
    assert_eq!(outcome(&r, "config/z").0, Some(true));
    assert_eq!(r.root_metadata.view(), View::Full);
    assert_eq!(r.root_metadata.get("config/z"), Some(&b"1"[..]));
}

/// Regression (issue 11): the root was built on the host of its first child, so a crash of that
/// host took two of the root's three voters and no alteration could be answered until it came
/// back. The root now runs on a host none of its children runs on.
#[test]
fn a_crash_of_a_whole_host_leaves_the_root_a_majority_and_alterations_go_on() {
    let r = run(vec![
        (200_000, Scripted::CrashHost { host: "node00000".into(), down_us: 1_000_000 }),
        (400_000, Scripted::Propose { vnode: v("store0@node00017"), record: set("config/during") }),
    ]);
    let (ok, at) = outcome(&r, "config/during");
    assert_eq!(ok, Some(true));
    assert!(at < 1_200_000, "answered while the host was down (at {at} us)");
}

/// Issue 30: with three hosts of one store vnode each (`cluster init --hosts 3`), every host runs
/// one of the root's children and the root must share a host. It shared node1 with
/// `store0@node1`: 4 voters, and a crash of node1 left 2, no majority, so no alteration (no cut,
/// no failover) until node1 came back. The voters are now one per host, so the crash of any one
/// host — the root's included — leaves a majority, and an alteration proposed meanwhile is answered ok.
#[test]
fn with_three_hosts_the_crash_of_any_one_host_leaves_the_root_a_majority() {
    for host in ["node00000", "node00001", "node00002"] {
        let survivor = if host == "node00000" { "store0@node00001" } else { "store0@node00000" };
        let cfg = TreeConfig {
            leaves: 3,
            fanout: 16,
            faults: false,
            proposals: 0,
            cut_processes: 0,
            duration_us: 2_000_000,
            scenario: vec![
                (200_000, Scripted::CrashHost { host: host.into(), down_us: 1_500_000 }),
                (400_000, Scripted::Propose { vnode: v(survivor), record: set("config/during") }),
            ],
            ..TreeConfig::new(7)
        };
        let r = TreeWorld::new(cfg).run();
        assert!(r.violations.is_empty(), "{host}: {:?}", r.violations);
        let (ok, at) = outcome(&r, "config/during");
        assert_eq!(ok, Some(true), "{host} down: the alteration was not answered ok");
        assert!(at < 1_700_000, "{host} down: answered only once it was back (at {at} us)");
    }
}

/// Boot loading by a secondary parent: the root is cut off, and a child of the root crashes and
/// comes back meanwhile. Its host asks every parent that may stand in for the root; the secondary
/// root's host answers, the child starts, and with it the secondary root has the majority it
/// needs. Asking the primary parent alone left the child down, and the cluster without a root,
/// until the root's side healed (the simulator's `--seed 145 --workload append --tree --fanout 2
/// --failover --clients 12`: a manager down for 0.4 s after its host was back).
#[test]
fn a_child_of_a_cut_off_root_is_booted_by_a_secondary_root_and_gives_it_its_majority() {
    let r = run(vec![
        (200_000, Scripted::Split { side: vec![v("manager3@node00001")], heal_us: 1_500_000 }),
        (300_000, Scripted::Crash { vnode: v("manager2@node00000"), down_us: 150_000 }),
        (1_000_000, Scripted::Propose { vnode: v("store0@node00005"), record: set("config/while-cut-off") }),
    ]);
    assert!(r.tree.boots_by_parent >= 1, "the child was not booted by a parent");
    let (ok, at) = outcome(&r, "config/while-cut-off");
    assert_eq!(ok, Some(true));
    assert!(at < 1_700_000, "answered only once the root's side healed (at {at} us)");
}
