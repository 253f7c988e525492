//! Which parent each tree vnode followed at its last step, for both drivers of the tree: a vnode
//! that leaves its primary parent for a secondary one fails over, one that comes back switches
//! back. Counted on the change, not on every step that follows a secondary parent.

use super::stats::TreeStats;

/// By the world's own numbering of its tree vnodes (a slot, an index).
#[derive(Clone, Debug)]
pub struct FollowedParents {
    /// Invariant: one entry per tree vnode the world holds, secondary parents included.
    primary: Vec<bool>,
}

impl FollowedParents {
    /// `vnodes` tree vnodes, each following its primary parent (as the genesis has it).
    pub fn new(vnodes: usize) -> Self {
        FollowedParents { primary: vec![true; vnodes] }
    }

    /// A secondary parent was added to the world, after every vnode it held before.
    pub fn add(&mut self) {
        self.primary.push(true);
    }

    /// Vnode `i` stepped and now follows its primary parent, or not.
    pub fn note(&mut self, i: usize, primary: bool, stats: &mut TreeStats) {
        match (std::mem::replace(&mut self.primary[i], primary), primary) {
            (true, false) => stats.failovers += 1,
            (false, true) => stats.switch_backs += 1,
            _ => {}
        }
    }
}
