//! Checkpoints against the log: a restart from a checkpoint and the rest of the log rebuilds
//! exactly what a restart from the whole log would.

use super::{Checker, Violation};
use crate::world::World;

pub const CHECKER: Checker = Checker {
    name: "checkpoints",
    property: "a checkpoint taken from a running vnode's memory (`Vnode::image`) equals the replay of every \
               record the vnode had appended when it was taken",
};

pub fn check(w: &World) -> Vec<Violation> {
    w.checkpoint_mismatches.iter().map(|m| CHECKER.violation(format!("checkpoint of {m}"))).collect()
}
