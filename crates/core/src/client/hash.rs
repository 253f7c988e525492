//! Redis's hash commands over a hash's head and field records (`crate::collection`), with Redis
//! 7's replies and errors.

use super::command::HashCmd;
use super::evaluate::{add_float, add_integer, Overlay};
use crate::collection::Kind;
use crate::ids::Key;
use crate::io::Member;
use rand_core::RngCore;
use waymark_resp::{glob::Glob, Reply};

impl Overlay {
    pub(super) fn run_hash(&mut self, k: &Key, c: &HashCmd, value_max_bytes: usize) -> Reply {
        let head = match self.typed(k, Kind::Hash) {
            Ok(head) => head,
            Err(wrong_type) => return wrong_type,
        };
        let field = |o: &Overlay, f: &Member| o.member(k, f).cloned();
        match c {
            HashCmd::Set { pairs, ok } => {
                if let Some(e) = too_large(pairs.iter().map(|(_, v)| v.len()), value_max_bytes) {
                    return e;
                }
                let mut added = 0;
                for (f, v) in pairs {
                    added += i64::from(self.member(k, f).is_none());
                    self.set_member(k, Kind::Hash, f, Some(v.clone()));
                }
                if *ok {
                    Reply::ok()
                } else {
                    Reply::Integer(added)
                }
            }
            HashCmd::SetNx(f, v) => {
                if let Some(e) = too_large([v.len()].into_iter(), value_max_bytes) {
                    return e;
                }
                if self.member(k, f).is_some() {
                    return Reply::Integer(0);
                }
                self.set_member(k, Kind::Hash, f, Some(v.clone()));
                Reply::Integer(1)
            }
            HashCmd::Get(f) => field(self, f).map_or(Reply::Null, Reply::bulk),
            HashCmd::MGet(fs) => {
                Reply::Array(fs.iter().map(|f| field(self, f).map_or(Reply::Null, Reply::bulk)).collect())
            }
            HashCmd::Del(fs) => {
                let mut deleted = 0;
                for f in fs {
                    if self.member(k, f).is_some() {
                        self.set_member(k, Kind::Hash, f, None);
                        deleted += 1;
                    }
                }
                Reply::Integer(deleted)
            }
            HashCmd::Len => Reply::Integer(head.map_or(0, |h| h.len as i64)),
            HashCmd::Exists(f) => Reply::Integer(i64::from(self.member(k, f).is_some())),
            HashCmd::StrLen(f) => Reply::Integer(self.member(k, f).map_or(0, |v| v.len() as i64)),
            HashCmd::IncrBy(f, by) => self.hash_incr_by(k, f, *by),
            HashCmd::IncrByFloat(f, by) => self.hash_incr_by_float(k, f, *by),
            HashCmd::Keys | HashCmd::Vals | HashCmd::GetAll | HashCmd::Scan { .. } | HashCmd::RandField { .. }
                if !self.whole(k) =>
            {
                Reply::Null // evaluated again once the hash is read whole (`Stop::NeedWhole`)
            }
            HashCmd::Keys => Reply::Array(self.elements(k).into_iter().map(|(f, _)| Reply::bulk(f.clone())).collect()),
            HashCmd::Vals => Reply::Array(self.elements(k).into_iter().map(|(_, v)| Reply::bulk(v.clone())).collect()),
            HashCmd::GetAll => {
                let all = self.elements(k).into_iter();
                Reply::Map(all.map(|(f, v)| (Reply::bulk(f.clone()), Reply::bulk(v.clone()))).collect())
            }
            HashCmd::Scan { cursor: 1.., .. } => Reply::Array(vec![Reply::bulk(b"0".to_vec()), Reply::Array(vec![])]),
            HashCmd::Scan { cursor: 0, pattern, no_values } => {
                let glob = pattern.as_deref().filter(|p| *p != b"*").map(|p| Glob::new(p, false));
                let matching = self.elements(k).into_iter().filter(|(f, _)| match &glob {
                    None => true,
                    Some(None) => false, // a pattern past the glob's limit matches nothing
                    Some(Some(g)) => g.matches(f),
                });
                Reply::Array(vec![Reply::bulk(b"0".to_vec()), Reply::Array(pairs(matching, !no_values))])
            }
            HashCmd::RandField { count, with_values } => self.rand_field(k, *count, *with_values),
        }
    }

    fn hash_incr_by(&mut self, k: &Key, f: &Member, by: i64) -> Reply {
        match add_integer(self.member(k, f), by, "ERR hash value is not an integer") {
            Ok(new) => {
                self.set_member(k, Kind::Hash, f, Some(new.to_string().into_bytes()));
                Reply::Integer(new)
            }
            Err(e) => e,
        }
    }

    fn hash_incr_by_float(&mut self, k: &Key, f: &Member, by: f64) -> Reply {
        match add_float(self.member(k, f), by, "ERR hash value is not a float") {
            Ok(text) => {
                self.set_member(k, Kind::Hash, f, Some(text.clone()));
                Reply::bulk(text)
            }
            Err(e) => e,
        }
    }

    /// `HRANDFIELD`: one field (or nil), `count` distinct fields in random order, or — a negative
    /// count — that many drawn with repetition.
    fn rand_field(&mut self, k: &Key, count: Option<i64>, with_values: bool) -> Reply {
        let all: Vec<(Member, Member)> = self.elements(k).into_iter().map(|(f, v)| (f.clone(), v.clone())).collect();
        let len = all.len() as u64;
        let Some(count) = count else {
            if len == 0 {
                return Reply::Null;
            }
            return Reply::bulk(all[(self.rng.next_u64() % len) as usize].0.clone());
        };
        if len == 0 || count == 0 {
            return Reply::Array(vec![]);
        }
        let chosen: Vec<&(Member, Member)> = match count {
            c if c < 0 => (0..c.unsigned_abs()).map(|_| &all[(self.rng.next_u64() % len) as usize]).collect(),
            c => {
                let mut order: Vec<&(Member, Member)> = all.iter().collect();
                // Fisher–Yates over the whole hash, kept to the first `count`.
                for i in (1..order.len()).rev() {
                    order.swap(i, (self.rng.next_u64() % (i as u64 + 1)) as usize);
                }
                order.truncate(c.unsigned_abs().min(len) as usize);
                order
            }
        };
        match with_values {
            true => Reply::Pairs(
                chosen.into_iter().map(|(f, v)| (Reply::bulk(f.clone()), Reply::bulk(v.clone()))).collect(),
            ),
            false => Reply::Array(chosen.into_iter().map(|(f, _)| Reply::bulk(f.clone())).collect()),
        }
    }
}

/// Fields (and their values, if `with_values`) as one flat array, as `HGETALL` answers in RESP2.
fn pairs<'a>(elements: impl Iterator<Item = (&'a Member, &'a Member)>, with_values: bool) -> Vec<Reply> {
    let mut out = vec![];
    for (f, v) in elements {
        out.push(Reply::bulk(f.clone()));
        if with_values {
            out.push(Reply::bulk(v.clone()));
        }
    }
    out
}

/// Redis's error for a value past `limits.value_max_bytes`, if one of `lens` is.
fn too_large(mut lens: impl Iterator<Item = usize>, value_max_bytes: usize) -> Option<Reply> {
    lens.any(|l| l > value_max_bytes)
        .then(|| Reply::error(format!("ERR string exceeds maximum allowed size ({value_max_bytes} bytes)")))
}
