//! What a batch reads and writes of collections (`crate::collection`): which elements it asks
//! for with each head, what it knows of them while it runs, and the element writes it becomes.
//!
//! Invariant (the layout's): every command that changes an element rewrites its collection's
//! head, so the transaction's read check on the head covers the elements it read.

use super::command::{DataCmd, ListCmd};
use super::evaluate::Overlay;
use crate::collection::{element_key, is_head, Head, Kind};
use crate::ids::{Key, Value};
use crate::io::{Member, Pick, ELEMENTS_PAGE_MAX};
use crate::store::{Write, WriteOp};
use crate::tally::ENTRY_OVERHEAD_BYTES;
use std::collections::{BTreeMap, BTreeSet};
use waymark_resp::Reply;

/// The elements a batch reads with a collection's head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Want {
    pub members: BTreeSet<Member>,
    /// Every element (`HGETALL`, …).
    pub whole: bool,
    /// The first `FIRST_PAGE` elements, when no member is named: a list's command reads its
    /// front with its head, which is the whole list when it is short and spares the round that
    /// reads the positions the head names (`Stop::NeedMembers`).
    pub first_page: bool,
}

/// Elements a list's command reads with its head (`Want::first_page`).
pub const FIRST_PAGE: u32 = 128;

impl Want {
    /// The first request's pick.
    pub fn pick(&self) -> Pick {
        match (self.whole, self.first_page && self.members.is_empty()) {
            (true, _) => Pick::Page { after: None, count: ELEMENTS_PAGE_MAX },
            (false, true) => Pick::Page { after: None, count: FIRST_PAGE },
            (false, false) => Pick::Members(self.members.iter().cloned().collect()),
        }
    }

    /// Whether the pick read every element: asked for all, or a first page that ended.
    pub fn read_whole(&self, next: Option<&Member>) -> bool {
        self.whole || (matches!(self.pick(), Pick::Page { .. }) && next.is_none())
    }
}

/// The elements each collection command of `cmds` reads, by key; `whole` adds keys read whole
/// (an earlier evaluation found it needed them: `Stop::NeedWhole`).
pub fn elements_to_read(
    cmds: &[DataCmd],
    whole: &BTreeSet<Key>,
    more: &BTreeMap<Key, BTreeSet<Member>>,
) -> BTreeMap<Key, Want> {
    let mut wants: BTreeMap<Key, Want> =
        whole.iter().map(|k| (k.clone(), Want { whole: true, ..Want::default() })).collect();
    let mut front = BTreeSet::new();
    let mut want = |key: &Key, members: Option<Vec<&Member>>| {
        let want = wants.entry(key.clone()).or_default();
        match members {
            Some(members) => want.members.extend(members.into_iter().cloned()),
            None => want.whole = true,
        }
    };
    for c in cmds {
        match c {
            DataCmd::Hash(key, hc) => want(key, hc.fields()),
            DataCmd::Members(key, sc) => want(key, sc.members()),
            DataCmd::SMove { from, to, member } => {
                want(from, Some(vec![member]));
                want(to, Some(vec![member]));
            }
            DataCmd::List(key, lc) => {
                want(key, (!lc.reads_whole()).then(Vec::new));
                if !matches!(lc, ListCmd::Push { .. } | ListCmd::Len) {
                    front.insert(key.clone());
                }
            }
            DataCmd::LMove { from, to, .. } => {
                want(from, Some(vec![]));
                want(to, Some(vec![]));
                front.insert(from.clone());
            }
            DataCmd::LMPop { keys, .. } => keys.iter().for_each(|k| {
                want(k, Some(vec![]));
                front.insert(k.clone());
            }),
            DataCmd::Algebra { keys, store, .. } => {
                keys.iter().for_each(|k| want(k, None));
                if let Some(store) = store {
                    want(store, Some(vec![]));
                }
            }
            _ => {}
        }
    }
    for (key, members) in more {
        want(key, Some(members.iter().collect()));
    }
    for key in front {
        wants.entry(key).or_default().first_page = true;
    }
    wants
}

/// What a batch knows of one collection's elements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// Elements by member, as the commands so far left them (`None`: absent).
    pub members: BTreeMap<Member, Option<Value>>,
    /// `members` holds every live element.
    pub whole: bool,
    /// The collection was dropped while not known whole: its other elements are still stored
    /// (the primary deletes them unless the key ends as a collection again).
    dropped_unknown: bool,
}

impl Known {
    /// Everything of a key that holds no collection: no element.
    pub fn none() -> Known {
        Known { whole: true, ..Known::default() }
    }

    /// The elements a read returned, all of the collection's if `whole`.
    pub fn read(members: BTreeMap<Member, Option<Value>>, whole: bool) -> Known {
        Known { members, whole, dropped_unknown: false }
    }
}

/// A collection's kind and elements on their way to another key (`None`: the key held a string).
pub(super) type Moved = Option<(Kind, Vec<(Member, Value)>)>;

/// The evaluation must read these elements too (a list's, at positions its head names), then run
/// again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedMembers(pub BTreeMap<Key, BTreeSet<Member>>);

/// The evaluation must read these collections whole, then run again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedWhole(pub BTreeSet<Key>);

impl Overlay {
    /// `k`'s head if it holds a collection of `kind` (`Ok(None)`: no key), or Redis's
    /// `WRONGTYPE` if it holds anything else.
    pub(super) fn typed(&self, k: &Key, kind: Kind) -> Result<Option<Head>, Reply> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match Head::decode(v) {
                Some(h) if h.kind == kind => Ok(Some(h)),
                _ => Err(Reply::error(super::answer::WRONG_TYPE)),
            },
        }
    }

    /// Whether `k` holds a collection, as far as the batch knows: a key a blind write (`SET`)
    /// replaces unread is not known to, and needs not be — its primary drops what it held.
    pub(super) fn holds_collection(&self, k: &Key) -> bool {
        self.values.get(k).and_then(Option::as_ref).is_some_and(|v| is_head(v))
    }

    pub(super) fn known_mut(&mut self, k: &Key) -> &mut Known {
        let none = !self.holds_collection(k);
        self.colls.entry(k.clone()).or_insert_with(|| if none { Known::none() } else { Known::default() })
    }

    /// Whether every element of `k` is known; if not, the evaluation asks for them all.
    pub(super) fn whole(&mut self, k: &Key) -> bool {
        let whole = self.known_mut(k).whole;
        if !whole {
            self.need_whole.insert(k.clone());
        }
        whole
    }

    /// The value of member `m` of collection `k` (read with it: `elements_to_read`).
    pub(super) fn member(&self, k: &Key, m: &[u8]) -> Option<&Value> {
        let known = self.colls.get(k);
        let value = known.and_then(|c| c.members.get(m));
        debug_assert!(
            value.is_some() || known.is_none_or(|c| c.whole) || !self.holds_collection(k),
            "member {m:?} of {k:?} was not read"
        );
        value.and_then(Option::as_ref)
    }

    /// Every live element of `k` in member order (`whole(k)` said they are known).
    pub(super) fn elements(&self, k: &Key) -> Vec<(&Member, &Value)> {
        let Some(known) = self.colls.get(k) else { return vec![] };
        known.members.iter().filter_map(|(m, v)| Some((m, v.as_ref()?))).collect()
    }

    /// Sets member `m` of `k`, a collection of `kind` (or no key), to `v`, and rewrites the head:
    /// its length, or the key deleted when no element is left, or created by its first.
    pub(super) fn set_member(&mut self, k: &Key, kind: Kind, m: &[u8], v: Option<Value>) {
        let len = self.typed(k, kind).ok().flatten().map_or(0, |h| h.len);
        let known = self.known_mut(k);
        let was = known.members.insert(m.to_vec(), v.clone()).flatten().is_some();
        let refill = len == 0 && known.dropped_unknown;
        let len = len + u64::from(v.is_some()) - u64::from(was);
        self.changed.insert((k.clone(), kind, m.to_vec()), v);
        if refill {
            self.need_whole.insert(k.clone());
        }
        match len {
            0 => self.put(k, None),
            len => {
                self.values.insert(k.clone(), Some(Head::of(kind, len).encode()));
                self.written.insert(k.clone());
            }
        }
    }

    /// A collection is created at `k`, which holds none now: if the batch dropped one there
    /// without knowing its every element, the evaluation must read it whole — the primary drops
    /// only what a transaction leaves without a collection, and the new one would inherit them.
    pub(super) fn note_refill(&mut self, k: &Key) {
        if self.colls.get(k).is_some_and(|c| c.dropped_unknown) {
            self.need_whole.insert(k.clone());
        }
    }

    /// `k`'s collection is deleted or replaced: its elements go with it.
    pub(super) fn drop_collection(&mut self, k: &Key) {
        let Some(kind) = self.get(k).and_then(|v| Head::decode(v)).map(|h| h.kind) else { return };
        let known = self.known_mut(k);
        let live: Vec<Member> = known.members.iter().filter(|(_, v)| v.is_some()).map(|(m, _)| m.clone()).collect();
        known.dropped_unknown |= !known.whole;
        known.whole = true;
        for m in &live {
            known.members.insert(m.clone(), None);
        }
        for m in live {
            self.changed.insert((k.clone(), kind, m), None);
        }
    }

    /// The elements of `from` that `RENAME`, `COPY` or `MOVE` to `to` carry (none for a string),
    /// or `None` when the evaluation must first read `from` — and `to`, which they replace —
    /// whole.
    pub(super) fn elements_to_move(&mut self, from: &Key, to: &Key) -> Option<Moved> {
        let Some(kind) = self.get(from).and_then(|v| Head::decode(v)).map(|h| h.kind) else { return Some(None) };
        let (from_whole, to_whole) = (self.whole(from), !self.holds_collection(to) || self.whole(to));
        if !from_whole || !to_whole {
            return None;
        }
        Some(Some((kind, self.elements(from).into_iter().map(|(m, v)| (m.clone(), v.clone())).collect())))
    }

    /// Gives `to`, whose head was just written, the `elements` `elements_to_move` took.
    pub(super) fn fill(&mut self, to: &Key, elements: Moved) {
        let Some((kind, elements)) = elements else { return };
        let known = self.known_mut(to);
        known.whole = true;
        for (m, v) in &elements {
            known.members.insert(m.clone(), Some(v.clone()));
        }
        for (m, v) in elements {
            self.changed.insert((to.clone(), kind, m), Some(v));
        }
    }

    /// `MEMORY USAGE`: the key's record and its elements', each with its overhead.
    pub(super) fn memory_usage(&mut self, k: &Key) -> Reply {
        let record = |key: usize, value: usize| (key + value) as u64 + ENTRY_OVERHEAD_BYTES;
        let Some(value) = self.get(k) else { return Reply::Null };
        let mut bytes = record(k.len(), value.len());
        if let Some(head) = Head::decode(value) {
            if !self.whole(k) {
                return Reply::Null; // evaluated again once read whole
            }
            let prefix = crate::collection::element_prefix(k, head.kind).len();
            bytes += self.elements(k).into_iter().map(|(m, v)| record(prefix + m.len(), v.len())).sum::<u64>();
        }
        Reply::Integer(i64::try_from(bytes).unwrap_or(i64::MAX))
    }

    /// Redis's error for a command that would give a collection of more than `DROP_INLINE_MAX`
    /// elements a deadline, or grow one with a deadline past it: its expiry could not drop it
    /// (`collection::DROP_INLINE_MAX`). Counts every member named as new, which errs only near
    /// the bound.
    pub(super) fn past_drop_bound(&self, c: &DataCmd) -> Option<Reply> {
        use super::command::{HashCmd, SetCmd};
        let len = |k: &Key| self.get(k).and_then(|v| Head::decode(v)).map_or(0, |h| h.len);
        let expiring = |k: &Key| self.ttl.get(k).copied().flatten().is_some();
        let (key, len_after) = match c {
            DataCmd::Expire(k, ..) => (k, len(k)),
            DataCmd::Hash(k, HashCmd::Set { pairs, .. }) if expiring(k) => (k, len(k) + pairs.len() as u64),
            DataCmd::Hash(k, HashCmd::SetNx(..) | HashCmd::IncrBy(..) | HashCmd::IncrByFloat(..)) if expiring(k) => {
                (k, len(k) + 1)
            }
            DataCmd::Members(k, SetCmd::Add(ms)) if expiring(k) => (k, len(k) + ms.len() as u64),
            DataCmd::SMove { to, .. } if expiring(to) => (to, len(to) + 1),
            DataCmd::List(k, ListCmd::Push { values, .. }) if expiring(k) => (k, len(k) + values.len() as u64),
            DataCmd::LMove { to, .. } if expiring(to) => (to, len(to) + 1),
            _ => return None,
        };
        let max = crate::collection::DROP_INLINE_MAX;
        (len_after > max).then(|| {
            Reply::error(format!(
                "ERR '{}' would be a collection of more than {max} elements with a deadline, which its expiry could \
                 not drop in one transaction",
                String::from_utf8_lossy(key)
            ))
        })
    }

    /// The element writes the commands made, in key order.
    pub(super) fn element_writes(&self) -> Vec<Write> {
        let write = |((k, kind, m), v): (&(Key, Kind, Member), &Option<Value>)| Write {
            key: element_key(k, *kind, m),
            op: v.clone().map_or(WriteOp::Del, WriteOp::Set),
        };
        self.changed.iter().map(write).collect()
    }
}
