//! Where a vnode of the simulated world lives. Store vnodes and manager vnodes share one address
//! space — the network, partitions and the tree's bookkeeping see both — and this module is the
//! one place that tells them apart: slots `0..stores` are the store vnodes (`World::nodes`), the
//! slots after them the managers (`World::managers`, secondary parents appended as they start).
//!
//! A `Slot` hashes as the number it holds, so the trace hashes did not change when addresses
//! became typed.

use std::fmt;

/// A vnode's address in the simulated world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(usize);

/// What lives at a slot: a store vnode or a manager, by its index among its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resident {
    Store(usize),
    Manager(usize),
}

/// A direction between two slots: what the network delays, clogs and partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Direction {
    pub from: Slot,
    pub to: Slot,
}

impl Slot {
    /// Store vnode `i` (stores come first).
    pub const fn store(i: usize) -> Slot {
        Slot(i)
    }

    /// Manager `m` of a world with `stores` store vnodes.
    pub const fn manager(m: usize, stores: usize) -> Slot {
        Slot(stores + m)
    }

    /// A slot drawn uniformly from a world of `slots` vnodes in all.
    pub fn random(rng: &mut impl rand::Rng, slots: usize) -> Slot {
        Slot(rng.gen_range(0..slots))
    }

    /// Every slot of a world with `slots` vnodes in all.
    pub fn all(slots: usize) -> impl Iterator<Item = Slot> {
        (0..slots).map(Slot)
    }

    /// What lives here, in a world with `stores` store vnodes.
    pub const fn resident(self, stores: usize) -> Resident {
        match self.0.checked_sub(stores) {
            Some(m) => Resident::Manager(m),
            None => Resident::Store(self.0),
        }
    }

    /// The position of this slot in a per-slot vector.
    pub const fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_come_first_then_managers() {
        assert_eq!(Slot::store(2).resident(3), Resident::Store(2));
        assert_eq!(Slot::manager(1, 3).resident(3), Resident::Manager(1));
        assert_eq!(Slot::manager(0, 3), Slot::store(3));
    }
}
