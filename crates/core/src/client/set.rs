//! Redis's set commands over a set's head and member records (`crate::collection`), with Redis
//! 7's replies and errors. A member's record holds no value.

use super::command::{SetCmd, SetOp};
use super::evaluate::Overlay;
use crate::collection::Kind;
use crate::ids::Key;
use crate::io::Member;
use rand_core::RngCore;
use std::collections::BTreeSet;
use waymark_resp::{glob::Glob, Reply};

/// Evaluated again once read whole (`Stop::NeedWhole`): the reply is never sent.
const AGAIN: Reply = Reply::Null;

fn members_reply(members: impl IntoIterator<Item = Member>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::bulk).collect())
}

impl Overlay {
    pub(super) fn run_set(&mut self, k: &Key, c: &SetCmd) -> Reply {
        let head = match self.typed(k, Kind::Set) {
            Ok(head) => head,
            Err(wrong_type) => return wrong_type,
        };
        match c {
            SetCmd::Add(ms) => {
                let mut added = 0;
                for m in ms {
                    if self.member(k, m).is_none() {
                        self.set_member(k, Kind::Set, m, Some(vec![]));
                        added += 1;
                    }
                }
                Reply::Integer(added)
            }
            SetCmd::Rem(ms) => {
                let mut removed = 0;
                for m in ms {
                    if self.member(k, m).is_some() {
                        self.set_member(k, Kind::Set, m, None);
                        removed += 1;
                    }
                }
                Reply::Integer(removed)
            }
            SetCmd::IsMember(m) => Reply::Integer(i64::from(self.member(k, m).is_some())),
            SetCmd::MIsMember(ms) => {
                Reply::Array(ms.iter().map(|m| Reply::Integer(i64::from(self.member(k, m).is_some()))).collect())
            }
            SetCmd::Card => Reply::Integer(head.map_or(0, |h| h.len as i64)),
            _ if !self.whole(k) => AGAIN,
            SetCmd::Members => members_reply(self.set_members(k)),
            SetCmd::Scan { cursor: 1.., .. } => Reply::Array(vec![Reply::bulk(b"0".to_vec()), Reply::Array(vec![])]),
            SetCmd::Scan { cursor: 0, pattern } => {
                let glob = pattern.as_deref().filter(|p| *p != b"*").map(|p| Glob::new(p, false));
                let matching = self.set_members(k).into_iter().filter(|m| match &glob {
                    None => true,
                    Some(None) => false,
                    Some(Some(g)) => g.matches(m),
                });
                Reply::Array(vec![Reply::bulk(b"0".to_vec()), Reply::Array(matching.map(Reply::bulk).collect())])
            }
            SetCmd::Pop(count) => self.pop(k, *count),
            SetCmd::RandMember(count) => self.rand_member(k, *count),
        }
    }

    /// The members of set `k` (known whole), in order.
    fn set_members(&self, k: &Key) -> Vec<Member> {
        self.elements(k).into_iter().map(|(m, _)| m.clone()).collect()
    }

    /// `count` distinct members of `k` drawn at random (all of them if it has fewer).
    fn draw_distinct(&mut self, k: &Key, count: u64) -> Vec<Member> {
        let mut all = self.set_members(k);
        // Fisher–Yates over the whole set, kept to the first `count`.
        for i in (1..all.len()).rev() {
            all.swap(i, (self.rng.next_u64() % (i as u64 + 1)) as usize);
        }
        all.truncate(count.min(all.len() as u64) as usize);
        all
    }

    fn pop(&mut self, k: &Key, count: Option<u64>) -> Reply {
        let drawn = self.draw_distinct(k, count.unwrap_or(1));
        for m in &drawn {
            self.set_member(k, Kind::Set, m, None);
        }
        match count {
            None => drawn.into_iter().next().map_or(Reply::Null, Reply::bulk),
            Some(_) => members_reply(drawn),
        }
    }

    fn rand_member(&mut self, k: &Key, count: Option<i64>) -> Reply {
        let all = self.set_members(k);
        match count {
            None if all.is_empty() => Reply::Null,
            None => Reply::bulk(all[(self.rng.next_u64() % all.len() as u64) as usize].clone()),
            Some(0) => Reply::Array(vec![]),
            Some(_) if all.is_empty() => Reply::Array(vec![]),
            Some(c) if c < 0 => {
                let n = all.len() as u64;
                let drawn = (0..c.unsigned_abs()).map(|_| all[(self.rng.next_u64() % n) as usize].clone());
                Reply::Array(drawn.map(Reply::bulk).collect())
            }
            Some(c) => Reply::Array(self.draw_distinct(k, c.unsigned_abs()).into_iter().map(Reply::bulk).collect()),
        }
    }

    /// `SMOVE from to member`.
    pub(super) fn smove(&mut self, from: &Key, to: &Key, m: &Member) -> Reply {
        if let Err(wrong_type) = self.typed(from, Kind::Set).and(self.typed(to, Kind::Set)) {
            return wrong_type;
        }
        if self.member(from, m).is_none() {
            return Reply::Integer(0);
        }
        if from != to {
            self.set_member(from, Kind::Set, m, None);
            if self.member(to, m).is_none() {
                self.set_member(to, Kind::Set, m, Some(vec![]));
            }
        }
        Reply::Integer(1)
    }

    /// `SINTER`/`SUNION`/`SDIFF`, their `STORE` forms and `SINTERCARD`.
    pub(super) fn algebra(&mut self, op: SetOp, keys: &[Key], store: Option<&Key>, card: Option<u64>) -> Reply {
        for k in keys {
            if let Err(wrong_type) = self.typed(k, Kind::Set) {
                return wrong_type;
            }
        }
        // Every key asked for at once (not the first missing one): one more read covers them all.
        let mut whole = true;
        for k in keys {
            whole &= self.whole(k);
        }
        if !whole {
            return AGAIN;
        }
        let sets: Vec<BTreeSet<Member>> = keys.iter().map(|k| self.set_members(k).into_iter().collect()).collect();
        let mut result = match op {
            SetOp::Inter => {
                let mut it = sets.iter();
                let first = it.next().cloned().unwrap_or_default();
                it.fold(first, |acc, s| acc.intersection(s).cloned().collect())
            }
            SetOp::Union => sets.iter().flatten().cloned().collect(),
            SetOp::Diff => {
                let mut it = sets.iter();
                let first = it.next().cloned().unwrap_or_default();
                it.fold(first, |acc, s| acc.difference(s).cloned().collect())
            }
        };
        if let Some(limit) = card {
            let n = result.len() as u64;
            return Reply::Integer(if limit == 0 { n } else { n.min(limit) } as i64);
        }
        let Some(dest) = store else { return members_reply(result) };
        let stored = result.len() as i64;
        self.put(dest, None);
        for m in std::mem::take(&mut result) {
            self.set_member(dest, Kind::Set, &m, Some(vec![]));
        }
        Reply::Integer(stored)
    }
}
