//! The topology matrix (issue 11): some broken builds are caught only with 1 or 3 replicas,
//! other vnode counts, or an even number of voters for the root. `--matrix` spreads a run's seeds
//! over these shapes (seed `s` takes shape `s mod shapes`), so one sweep covers all of them; the
//! `topology` tests run each shape for a few seeds.

use crate::config::SimConfig;
use crate::tree::TreeConfig;

/// One shape of cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Copies of each partition (store clusters; the tree runs keep the default).
    pub replicas: usize,
    /// Children per manager vnode (tree runs).
    pub fanout: usize,
    /// Store vnodes: hosts of the store cluster, leaves of the tree.
    pub vnodes: usize,
}

/// Replicas × store vnodes, for the cut process run by a coordinator vnode.
const STORE: [(usize, &[usize]); 3] = [(1, &[2, 3, 5, 8, 12]), (2, &[2, 3, 6, 9, 12]), (3, &[3, 4, 7, 10, 12])];
/// Fan-out × store vnodes, for the cut process on the tree: fan-outs 2 and 4 give even voter
/// counts under the root in some shapes, 3 and 5 odd ones.
const TREE: [(usize, &[usize]); 4] = [(2, &[3, 6, 12]), (3, &[4, 9]), (4, &[4, 8, 12]), (5, &[5, 10])];
/// Fan-out × leaves for the tree alone (`--tree-only`, no transactions, so larger trees).
const TREE_ONLY: [(usize, &[usize]); 4] = [(2, &[6, 12, 24]), (3, &[9, 24]), (4, &[8, 24]), (5, &[10, 25])];

fn flatten(rows: &[(usize, &[usize])], shape: impl Fn(usize, usize) -> Shape) -> Vec<Shape> {
    rows.iter().flat_map(|(k, counts)| counts.iter().map(|&n| shape(*k, n))).collect()
}

pub fn store_shapes() -> Vec<Shape> {
    flatten(&STORE, |replicas, vnodes| Shape { replicas, fanout: 2, vnodes })
}

pub fn tree_shapes() -> Vec<Shape> {
    flatten(&TREE, |fanout, vnodes| Shape { replicas: 2, fanout, vnodes })
}

pub fn tree_only_shapes() -> Vec<Shape> {
    flatten(&TREE_ONLY, |fanout, vnodes| Shape { replicas: 2, fanout, vnodes })
}

/// The shape seed `seed` runs in when seeds are spread over `shapes`.
pub fn of_seed(shapes: &[Shape], seed: u64) -> Shape {
    assert!(!shapes.is_empty(), "a matrix has shapes");
    shapes[(seed % shapes.len() as u64) as usize]
}

impl Shape {
    /// `cfg` in this shape (a store cluster, or the store vnodes under a tree).
    pub fn apply(self, cfg: &mut SimConfig) {
        assert!(self.replicas <= self.vnodes, "{self:?}: more replicas than vnodes");
        (cfg.replicas, cfg.vnodes) = (self.replicas, self.vnodes);
        if cfg.tree {
            cfg.fanout = self.fanout;
        }
    }

    /// `cfg` (the tree alone) in this shape.
    pub fn apply_to_tree(self, cfg: &mut TreeConfig) {
        (cfg.fanout, cfg.leaves) = (self.fanout, self.vnodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_covers_one_to_three_replicas_and_even_and_odd_fan_outs() {
        let store = store_shapes();
        assert_eq!(store.iter().map(|s| s.replicas).max(), Some(3));
        assert_eq!(store.iter().map(|s| s.replicas).min(), Some(1));
        assert!(store.iter().all(|s| s.replicas <= s.vnodes));
        let fanouts: Vec<usize> = tree_shapes().iter().map(|s| s.fanout).collect();
        assert!(fanouts.contains(&2) && fanouts.contains(&3));
        assert_eq!(of_seed(&store, store.len() as u64), store[0], "consecutive seeds take consecutive shapes");
    }
}
