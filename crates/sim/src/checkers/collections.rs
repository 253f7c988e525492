//! Collections as records (issue 35, `waymark_core::collection`): a head counts its elements, and
//! no element outlives its collection.
//!
//! Judged once the run has settled, on every partition a running store vnode holds as a copy by
//! the final placement (a learner still copying may hold a page of elements before their head).

use super::{Checker, Violation};
use crate::world::World;
use std::collections::BTreeMap;
use waymark_core::collection::{is_element, split_element, Head, Kind};
use waymark_core::{Key, PartitionId};

pub const CHECKER: Checker = Checker {
    name: "collections",
    property: "on every copy of every partition, each collection's head counts exactly its live elements, a list's \
               are at exactly the positions its head names, and no live element belongs to a key that is not a \
               collection of its kind",
};

pub fn check(w: &World) -> Vec<Violation> {
    let mut out = vec![];
    for p in (0..w.placement.partitions()).map(PartitionId) {
        for v in w.placement.copies(p) {
            let Some(vnode) = &w.nodes[w.store_index(v)].vnode else { continue };
            let store = vnode.store().filtered(|k| w.placement.partition_of(k) == p);
            let mut heads: BTreeMap<&[u8], Head> = BTreeMap::new();
            let mut counted: BTreeMap<(Key, Kind), u64> = BTreeMap::new();
            let mut positions: BTreeMap<Key, Vec<u64>> = BTreeMap::new();
            for (k, e) in store.iter() {
                let Some(value) = &e.value else { continue };
                if let Some((collection, kind, member)) = split_element(k) {
                    *counted.entry((collection.to_vec(), kind)).or_default() += 1;
                    if kind == Kind::List {
                        let pos = <[u8; 8]>::try_from(member).map_or(u64::MAX, u64::from_be_bytes);
                        positions.entry(collection.to_vec()).or_default().push(pos);
                    }
                } else if let Some(head) = Head::decode(value).filter(|_| !is_element(k)) {
                    heads.insert(k, head);
                }
            }
            for ((collection, kind), n) in &counted {
                let show = String::from_utf8_lossy(collection);
                match heads.get(collection.as_slice()) {
                    Some(h) if h.kind == *kind && h.len == *n => {}
                    Some(h) => out.push(CHECKER.violation(format!(
                        "{v}: {show} has {n} live {kind:?} elements, its head says {:?} of {}",
                        h.kind, h.len
                    ))),
                    None => out
                        .push(CHECKER.violation(format!(
                            "{v}: {n} live {kind:?} elements of {show}, which holds no collection"
                        ))),
                }
            }
            for (collection, at) in &positions {
                let Some(h) = heads.get(collection.as_slice()).filter(|h| h.kind == Kind::List) else { continue };
                if !at.iter().all(|p| (h.first..h.first + h.len).contains(p)) {
                    let show = String::from_utf8_lossy(collection);
                    let (first, end) = (h.first, h.first + h.len);
                    out.push(CHECKER.violation(format!(
                        "{v}: {show} has elements at positions {at:?}, its head names {first}..{end}"
                    )));
                }
            }
            for (collection, h) in &heads {
                if !counted.contains_key(&(collection.to_vec(), h.kind)) {
                    let show = String::from_utf8_lossy(collection);
                    out.push(
                        CHECKER.violation(format!("{v}: {show}'s head counts {} elements, none is stored", h.len)),
                    );
                }
            }
        }
    }
    out
}
