//! Property: a checkpoint taken from a running vnode's memory (`Vnode::image`) equals the replay
//! of every record the vnode had appended when it was taken — so a restart from a checkpoint and
//! the rest of the log rebuilds exactly what a restart from the whole log would.

use super::Violation;
use crate::world::World;

pub fn check(w: &World) -> Vec<Violation> {
    w.checkpoint_mismatches
        .iter()
        .map(|m| Violation { checker: "checkpoints", message: format!("checkpoint of {m}") })
        .collect()
}
