//! Redis's list commands over a list's head and its elements stored by position
//! (`crate::collection`: the head names the first position and the length), with Redis 7's
//! replies and errors.
//!
//! A push, a pop at either end, `LINDEX`, `LSET` and a short `LRANGE` touch only the positions
//! the head names: the batch reads the head, works out the positions, and reads those elements
//! (`Stop::NeedMembers`), so a pop off a list of a million elements reads and logs one. `LREM`,
//! `LINSERT` and `LPOS` read the list whole; `LREM` and `LINSERT` rewrite the positions after the
//! first change.

use super::command::{End, ListCmd};
use super::evaluate::Overlay;
use crate::collection::{list_member, Head, Kind, LIST_ORIGIN};
use crate::ids::{Key, Value};
use crate::io::ELEMENTS_PAGE_MAX;
use waymark_resp::Reply;

/// Evaluated again once the elements it needs are read (`Stop::NeedMembers`, `Stop::NeedWhole`):
/// the reply is never sent.
const AGAIN: Reply = Reply::Null;

/// Redis's error for an index past either end (`LSET`).
const OUT_OF_RANGE: &str = "ERR index out of range";

impl Overlay {
    pub(super) fn run_list(&mut self, k: &Key, c: &ListCmd) -> Reply {
        let head = match self.typed(k, Kind::List) {
            Ok(head) => head,
            Err(wrong_type) => return wrong_type,
        };
        match c {
            ListCmd::Push { end, values, only_existing } => match (head, only_existing) {
                (None, true) => Reply::Integer(0),
                _ => Reply::Integer(self.list_push(k, *end, values) as i64),
            },
            ListCmd::Len => Reply::Integer(head.map_or(0, |h| h.len as i64)),
            _ => match head {
                None => self.on_missing_list(c),
                Some(head) => self.run_on_list(k, head, c),
            },
        }
    }

    /// What a command answers on a key that holds nothing.
    fn on_missing_list(&self, c: &ListCmd) -> Reply {
        match c {
            ListCmd::Pop(_, Some(_)) => Reply::NullArray,
            ListCmd::Set(..) => Reply::error("ERR no such key"),
            ListCmd::Range(..) => Reply::Array(vec![]),
            ListCmd::Trim(..) => Reply::ok(),
            ListCmd::Rem(..) | ListCmd::Insert { .. } => Reply::Integer(0),
            ListCmd::Pos { count: Some(_), .. } => Reply::Array(vec![]),
            _ => Reply::Null,
        }
    }

    fn run_on_list(&mut self, k: &Key, head: Head, c: &ListCmd) -> Reply {
        match c {
            ListCmd::Push { .. } | ListCmd::Len => unreachable!("answered without the elements"),
            ListCmd::Pop(end, count) => match self.list_pop(k, head, *end, count.unwrap_or(1)) {
                None => AGAIN,
                Some(popped) if count.is_none() => popped.into_iter().next().map_or(Reply::Null, Reply::bulk),
                Some(popped) => Reply::Array(popped.into_iter().map(Reply::bulk).collect()),
            },
            ListCmd::Index(i) => match head.list_position(*i) {
                None => Reply::Null,
                Some(pos) => self.list_at(k, pos).map_or(AGAIN, Reply::bulk),
            },
            ListCmd::Set(i, v) => match head.list_position(*i) {
                None => Reply::error(OUT_OF_RANGE),
                Some(pos) => {
                    self.put_element(k, pos, Some(v.clone()));
                    self.put_list_head(k, head); // every element write rewrites its head
                    Reply::ok()
                }
            },
            ListCmd::Range(start, stop) => {
                let Some((from, to)) = range(head, *start, *stop) else { return Reply::Array(vec![]) };
                match self.list_span(k, from, to) {
                    None => AGAIN,
                    Some(values) => Reply::Array(values.into_iter().map(Reply::bulk).collect()),
                }
            }
            ListCmd::Trim(start, stop) => {
                self.trim(k, head, range(head, *start, *stop));
                Reply::ok()
            }
            ListCmd::Rem(count, v) => self.whole_list(k).map_or(AGAIN, |all| self.rem(k, head, all, *count, v)),
            ListCmd::Insert { before, pivot, value } => match self.whole_list(k) {
                None => AGAIN,
                Some(mut all) => match all.iter().position(|e| e == pivot) {
                    None => Reply::Integer(-1),
                    Some(at) => {
                        all.insert(if *before { at } else { at + 1 }, value.clone());
                        let len = all.len() as i64;
                        self.rewrite(k, head, all);
                        Reply::Integer(len)
                    }
                },
            },
            ListCmd::Pos { element, rank, count, maxlen } => match self.whole_list(k) {
                None => AGAIN,
                Some(all) => positions(&all, element, *rank, *count, *maxlen),
            },
        }
    }

    /// Pushes `values` one after the other onto `end` of `k` (a list or no key); the new length.
    pub(super) fn list_push(&mut self, k: &Key, end: End, values: &[Value]) -> u64 {
        let head = self.list_head(k);
        if head.is_none() {
            self.note_refill(k);
        }
        let mut head = head.unwrap_or(Head { kind: Kind::List, len: 0, first: LIST_ORIGIN });
        for v in values {
            let pos = match end {
                End::Left => {
                    head.first -= 1;
                    head.first
                }
                End::Right => head.first + head.len,
            };
            head.len += 1;
            self.put_element(k, pos, Some(v.clone()));
        }
        self.put_list_head(k, head);
        head.len
    }

    /// Pops up to `count` elements off `end` of `k`, in the order popped; `None` until they are
    /// read.
    pub(super) fn list_pop(&mut self, k: &Key, head: Head, end: End, count: u64) -> Option<Vec<Value>> {
        let n = count.min(head.len);
        if n == 0 {
            return Some(vec![]); // `LPOP key 0`: nothing taken, nothing written
        }
        let (from, to) = match end {
            End::Left => (head.first, head.first + n),
            End::Right => (head.first + head.len - n, head.first + head.len),
        };
        let mut popped = self.list_span(k, from, to)?;
        if end == End::Right {
            popped.reverse();
        }
        if !self.breaks.list_pop_leaves_element {
            (from..to).for_each(|pos| self.put_element(k, pos, None));
        }
        let first = if end == End::Left { head.first + n } else { head.first };
        self.put_list_head(k, Head { len: head.len - n, first, ..head });
        Some(popped)
    }

    /// `LMOVE`/`RPOPLPUSH`: the element moved, or nil when `from` holds nothing.
    pub(super) fn lmove(&mut self, from: &Key, to: &Key, from_end: End, to_end: End) -> Reply {
        let source = match self.typed(from, Kind::List) {
            Ok(head) => head,
            Err(wrong_type) => return wrong_type,
        };
        let Some(source) = source else { return Reply::Null };
        if let Err(wrong_type) = self.typed(to, Kind::List) {
            return wrong_type; // checked before the pop, as Redis does: nothing moves
        }
        match self.list_pop(from, source, from_end, 1) {
            None => AGAIN,
            Some(popped) => {
                let v = popped.into_iter().next().expect("a list holds at least one element");
                self.list_push(to, to_end, std::slice::from_ref(&v));
                Reply::bulk(v)
            }
        }
    }

    /// `LMPOP`: the first non-empty list's name and up to `count` elements popped off `end`
    /// (`None`: one, not in an array — `BLPOP`'s answer).
    pub(super) fn lmpop(&mut self, keys: &[Key], end: End, count: Option<u64>) -> Reply {
        for k in keys {
            match self.typed(k, Kind::List) {
                Err(wrong_type) => return wrong_type,
                Ok(None) => continue,
                Ok(Some(head)) => {
                    let Some(popped) = self.list_pop(k, head, end, count.unwrap_or(1)) else { return AGAIN };
                    let name = crate::database::db_of(k).user_key(k).unwrap_or(k).to_vec();
                    let popped = match count {
                        Some(_) => Reply::Array(popped.into_iter().map(Reply::bulk).collect()),
                        None => popped.into_iter().next().map_or(Reply::Null, Reply::bulk),
                    };
                    return Reply::Array(vec![Reply::bulk(name), popped]);
                }
            }
        }
        Reply::NullArray
    }

    /// `k`'s head, if it holds a list.
    fn list_head(&self, k: &Key) -> Option<Head> {
        self.typed(k, Kind::List).ok().flatten()
    }

    /// The element at `pos` (which the head names), or `None` until it is read: the evaluation
    /// then asks for it (`Stop::NeedMembers`).
    fn list_at(&mut self, k: &Key, pos: u64) -> Option<Value> {
        let m = list_member(pos);
        let known = self.colls.get(k).filter(|c| c.whole || c.members.contains_key(&m));
        match known {
            Some(c) => {
                let value = c.members.get(&m).cloned().flatten();
                debug_assert!(value.is_some(), "position {pos} of {k:?}, which its head names, holds nothing");
                value
            }
            None => {
                self.need_members.entry(k.clone()).or_default().insert(m);
                None
            }
        }
    }

    /// The elements at positions `from..to`, or `None` until they are read: up to a page of them
    /// by position, more by reading the list whole.
    fn list_span(&mut self, k: &Key, from: u64, to: u64) -> Option<Vec<Value>> {
        if to - from > ELEMENTS_PAGE_MAX as u64 && !self.whole(k) {
            return None;
        }
        let values: Vec<Option<Value>> = (from..to).map(|pos| self.list_at(k, pos)).collect();
        values.into_iter().collect()
    }

    /// Every element of `k` in order, or `None` until the list is read whole.
    fn whole_list(&mut self, k: &Key) -> Option<Vec<Value>> {
        if !self.whole(k) {
            return None;
        }
        Some(self.elements(k).into_iter().map(|(_, v)| v.clone()).collect())
    }

    /// Sets the element at `pos` (`None`: removes it), as the batch knows it and as it writes it.
    fn put_element(&mut self, k: &Key, pos: u64, v: Option<Value>) {
        let m = list_member(pos);
        self.known_mut(k).members.insert(m.clone(), v.clone());
        self.changed.insert((k.clone(), Kind::List, m), v);
    }

    /// Writes `k`'s head; an empty list is deleted, its elements already removed one by one.
    fn put_list_head(&mut self, k: &Key, head: Head) {
        match head.len {
            0 => {
                self.values.insert(k.clone(), None);
                self.ttl.remove(k);
            }
            _ => {
                self.values.insert(k.clone(), Some(head.encode()));
            }
        }
        self.written.insert(k.clone());
    }

    /// Keeps positions `kept` (`None`: nothing) of `k`, removing the others: no element is read.
    fn trim(&mut self, k: &Key, head: Head, kept: Option<(u64, u64)>) {
        let (from, to) = kept.unwrap_or((head.first, head.first));
        let end = head.first + head.len;
        for pos in (head.first..from).chain(to..end) {
            self.put_element(k, pos, None);
        }
        self.put_list_head(k, Head { len: to - from, first: from, ..head });
    }

    fn rem(&mut self, k: &Key, head: Head, all: Vec<Value>, count: i64, v: &Value) -> Reply {
        let limit = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
        let mut removed = 0;
        let mut keep = |e: &Value| {
            let gone = e == v && removed < limit;
            removed += usize::from(gone);
            !gone
        };
        let kept: Vec<Value> = match count {
            c if c < 0 => {
                let mut kept: Vec<Value> = all.into_iter().rev().filter(|e| keep(e)).collect();
                kept.reverse();
                kept
            }
            _ => all.into_iter().filter(|e| keep(e)).collect(),
        };
        if removed > 0 {
            self.rewrite(k, head, kept);
        }
        Reply::Integer(removed as i64)
    }

    /// Gives `k` (read whole) the elements `all`, from its first position on: only the positions
    /// whose element changes are written.
    fn rewrite(&mut self, k: &Key, head: Head, all: Vec<Value>) {
        let len = all.len() as u64;
        let old_end = head.first + head.len;
        for (pos, v) in (head.first..).zip(all) {
            let same = pos < old_end && self.list_at(k, pos).is_some_and(|old| old == v);
            if !same {
                self.put_element(k, pos, Some(v));
            }
        }
        for pos in head.first + len..old_end {
            self.put_element(k, pos, None);
        }
        self.put_list_head(k, Head { len, ..head });
    }
}

/// The positions `LRANGE`/`LTRIM` `start stop` name, as a half-open span, if any: Redis's indexes
/// from either end, clamped to the list.
fn range(head: Head, start: i64, stop: i64) -> Option<(u64, u64)> {
    let len = i64::try_from(head.len).unwrap_or(i64::MAX);
    let from_end = |i: i64| if i < 0 { len.saturating_add(i) } else { i };
    let (start, stop) = (from_end(start).max(0), from_end(stop).min(len - 1));
    (start <= stop && start < len).then(|| (head.first + start as u64, head.first + stop as u64 + 1))
}

/// `LPOS`'s answer over the whole list.
fn positions(all: &[Value], element: &Value, rank: i64, count: Option<u64>, maxlen: u64) -> Reply {
    let scanned = if maxlen == 0 { all.len() } else { all.len().min(maxlen as usize) };
    let indexes: Box<dyn Iterator<Item = usize>> = match rank > 0 {
        true => Box::new(0..scanned),
        false => Box::new((all.len() - scanned..all.len()).rev()),
    };
    let skip = (rank.unsigned_abs() - 1) as usize;
    let wanted = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => n as usize,
    };
    let found: Vec<Reply> =
        indexes.filter(|i| &all[*i] == element).skip(skip).take(wanted).map(|i| Reply::Integer(i as i64)).collect();
    match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Null),
    }
}
