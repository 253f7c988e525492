//! The counts and digests a vnode keeps as writes apply, against its data.

use super::{Checker, Violation};
use crate::world::World;

pub const CHECKER: Checker = Checker {
    name: "tallies",
    property: "every running store vnode's kept tallies (keys, live keys, bytes, digest per partition) equal those counted anew from its store",
};

pub fn check(w: &World) -> Vec<Violation> {
    let mut out = vec![];
    for node in &w.nodes {
        let Some(vnode) = &node.vnode else { continue };
        if !vnode.tallies_agree() {
            let fresh = waymark_core::tally::Tallies::of(vnode.store(), vnode.placement()).total();
            out.push(CHECKER.violation(format!(
                "{} keeps {:?} in all, its store counts {:?}",
                vnode.id(),
                vnode.tallies().total(),
                fresh
            )));
        }
    }
    out
}
