//! Liveness floors.
//!
//! The floor counts cuts *begun*, not asked for: the operator runs one cut at a time and lets
//! the asks made while one runs go, so a slow cut that succeeds is progress (a 12-vnode tree of
//! fan-out 2 settling after a whole-host crash took 950 ms for one: `--tree` seed 1074). A cut
//! that never ends is still caught: none begins after it.
//!
//! Every other checker passes a run in which nothing succeeds. The floors are far below what a
//! healthy build reaches (see `figures`), so a run under one is a protocol that stopped making
//! progress — a lost phase message never resent, a process stuck on a crashed member — not bad
//! luck. Every fault the simulator draws heals by the end of the workload (`faults::heal_all`).
//!
//! No floor is put on the cuts begun while faults are active: a cut needs every store vnode, so a
//! seed whose vnodes are down or recovering in doubt most of the workload rightly has none (seen:
//! `--tree` seed 59, 0 of 9). `figures` reports them for sweeps to watch.

use super::{Checker, Violation};
use crate::history::DeclaredCut;
use crate::world::World;
use waymark_core::CutId;

pub const CHECKER: Checker = Checker {
    name: "liveness",
    property: "in a seed whose faults all heal, a cut begun after healing succeeds, and so do at least half of \
               those begun; and (with `--tree`) at least half the alterations the operator proposed over the run \
               are answered ok",
};

/// Cuts asked after healing: at least this share succeed.
pub const AFTER_HEAL_FLOOR: f64 = 0.5;
/// Alterations proposed by the operator (`--tree`): at least this share answered ok.
pub const ALTERATIONS_FLOOR: f64 = 0.5;

/// What a run achieved, against what the floors ask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Cuts begun before healing.
    pub during: CutsBegun,
    /// Cuts begun after healing.
    pub after_heal: CutsBegun,
    pub alterations: AlterationsProposed,
}

/// Cuts begun in a part of the run, and how many of them succeeded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutsBegun {
    pub begun: usize,
    pub succeeded: usize,
}

/// Alterations the operator proposed, and how many of them were answered ok.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlterationsProposed {
    pub proposed: u64,
    pub answered_ok: u64,
}

pub fn figures(w: &World) -> Figures {
    let declared = w.declared_cuts();
    let ok = |cut: &CutId| declared.contains(&DeclaredCut { cut: *cut, ok: true });
    let healed = w.healed_us.unwrap_or(u64::MAX);
    let mut f = Figures::default();
    for (cut, window) in &w.history.cut_windows {
        let slot = if window.begun_us >= healed { &mut f.after_heal } else { &mut f.during };
        slot.begun += 1;
        slot.succeeded += ok(cut) as usize;
    }
    let answered = w.tree_stats.operator_alterations;
    let proposed = answered.answered_ok + answered.answered_failed;
    f.alterations = AlterationsProposed { proposed, answered_ok: answered.answered_ok };
    f
}

pub fn check(w: &World) -> Vec<Violation> {
    if !w.cfg.cuts || w.healed_us.is_none() {
        return vec![];
    }
    let f = figures(w);
    let mut out = vec![];
    let asked = w.after_heal_asks;
    let CutsBegun { begun, succeeded } = f.after_heal;
    if succeeded == 0 || (succeeded as f64) < AFTER_HEAL_FLOOR * begun as f64 {
        out.push(v(format!(
            "after every fault healed, {succeeded} of {begun} cuts begun succeeded ({asked} asked for); \
             the floor is one, and {AFTER_HEAL_FLOOR} of those begun"
        )));
    }
    let AlterationsProposed { proposed, answered_ok } = f.alterations;
    if w.cfg.tree && (answered_ok as f64) < ALTERATIONS_FLOOR * proposed as f64 {
        out.push(v(format!(
            "{answered_ok} of {proposed} alterations were answered ok; the floor is {ALTERATIONS_FLOOR}"
        )));
    }
    out
}

fn v(evidence: String) -> Violation {
    CHECKER.violation(evidence)
}
