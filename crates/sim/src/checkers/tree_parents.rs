//! Parents after a switch of parents has settled.

use super::{Checker, Violation};
use waymark_core::alter::AlterNode;
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-parents",
    property: "after the switch settles, every vnode follows its primary parent again (secondary parents are \
               given up), and exactly one parent counts it as a working child",
};

pub fn check(nodes: &[&AlterNode]) -> Vec<Violation> {
    let mut out = vec![];
    for n in nodes {
        if !n.follows_primary_parent() {
            out.push(CHECKER.violation(format!("{} still follows {:?}, not its primary parent", n.id(), n.parent())));
        }
        let Some(_) = n.parent() else { continue };
        let parents = nodes.iter().filter(|p| p.working_children().contains(n.id())).count();
        if parents != 1 {
            out.push(CHECKER.violation(format!("{} is a working child of {parents} parents", n.id())));
        }
    }
    out
}

/// Secondary parents still running at the end (every primary is back by then).
pub fn secondaries_given_up(running: &[VnodeId]) -> Vec<Violation> {
    running.iter().map(|s| CHECKER.violation(format!("secondary parent {s} still runs at the end"))).collect()
}
