//! How Redis data commands become one Waymark transaction (DESIGN §3): the keys whose current
//! value a reply depends on are read first; the commands are then evaluated in order against
//! those values, giving each command's reply and the transaction's writes; the transaction carries
//! a read check for every key read, so it commits only if those values are still current — and
//! then every reply is exactly what running the commands at the commit point gives.
//!
//! Pure: no IO. The client's run (`run.rs`) does the reads and submits the transaction.

use super::collections::{Known, NeedMembers, NeedWhole};
use super::command::{DataCmd, Existing, ExpireIf, Expiry, SetTtl, TtlAsked};
use crate::collection::{is_head, Head, Kind};
use crate::ids::{Key, Value};
use crate::io::Member;
use crate::store::{Write, WriteOp};
use rand_core::SeedableRng;
use std::collections::{BTreeMap, BTreeSet};
use waymark_resp::Reply;

/// The keys whose current values the commands' replies or writes depend on. `SET` and `MSET`
/// depend on nothing: they are blind writes.
pub fn keys_to_read(cmds: &[DataCmd]) -> BTreeSet<Key> {
    let mut keys = BTreeSet::new();
    for c in cmds {
        match c {
            DataCmd::Set(..) | DataCmd::MSet(..) | DataCmd::SetEx(..) => {}
            _ => keys.extend(c.keys().into_iter().cloned()),
        }
    }
    keys
}

/// The commands of a batch the primaries evaluate under their locks, with no read first
/// (`at_primary[i]`), and the writes they become: every `SET`, `MSET`, `INCRBY`/`DECRBY` and
/// `APPEND` whose keys no other command of the batch names, nor the command twice (a second
/// command on a key would need the first one's result). The other commands are evaluated here,
/// over the keys they read (`evaluate`).
///
/// Why it is the same transaction: such a command, evaluated at its primary under its lock, in a
/// transaction whose read checks are the `WATCH`ed versions and the versions of every key read
/// here, gives the value and the reply that reading the key and evaluating here would, at the
/// same commit point — one read fewer, and no read check to conflict on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtPrimaries {
    pub at_primary: Vec<bool>,
    pub writes: Vec<Write>,
}

pub fn at_primaries(cmds: &[DataCmd]) -> AtPrimaries {
    let mut named: BTreeMap<&Key, usize> = BTreeMap::new();
    for key in cmds.iter().flat_map(DataCmd::keys) {
        *named.entry(key).or_default() += 1;
    }
    let alone = |c: &DataCmd| c.keys().iter().all(|k| named.get(k) == Some(&1));
    let mut writes = vec![];
    let at_primary = cmds
        .iter()
        .map(|c| {
            let Some(mine) = writes_of(c).filter(|_| alone(c)) else { return false };
            writes.extend(mine);
            true
        })
        .collect();
    AtPrimaries { at_primary, writes }
}

/// A command as writes a primary can evaluate, if it is one.
fn writes_of(c: &DataCmd) -> Option<Vec<Write>> {
    let write = |key: &Key, op: WriteOp| Write { key: key.clone(), op };
    match c {
        DataCmd::Set(k, v) => Some(vec![write(k, WriteOp::Set(v.clone()))]),
        DataCmd::SetEx(k, v, expiry) => Some(vec![write(k, WriteOp::SetExpiring(v.clone(), *expiry))]),
        DataCmd::MSet(pairs) => Some(pairs.iter().map(|(k, v)| write(k, WriteOp::Set(v.clone()))).collect()),
        DataCmd::IncrBy(k, by) => Some(vec![write(k, WriteOp::IncrBy(*by))]),
        DataCmd::Append(k, v) => Some(vec![write(k, WriteOp::Append(v.clone()))]),
        _ => None,
    }
}

/// The reply of a command `at_primaries` sent to its primary, from the values the commit
/// resolved (`resolved(key)`: a key's value after the transaction).
pub fn reply_at_primary(c: &DataCmd, resolved: impl Fn(&Key) -> Option<Value>) -> Reply {
    let integer = |v: Option<Value>| v.and_then(|v| String::from_utf8(v).ok()?.parse::<i64>().ok());
    match c {
        DataCmd::IncrBy(k, _) => {
            integer(resolved(k)).map_or_else(|| Reply::error("ERR value is not an integer"), Reply::Integer)
        }
        DataCmd::Append(k, _) => Reply::Integer(resolved(k).map_or(0, |v| v.len() as i64)),
        _ => Reply::ok(),
    }
}

/// A string may not become what a collection's head is (`crate::collection::HEAD_MAGIC`).
pub const FORGED_HEAD: &str =
    "ERR string values may not start with the bytes Waymark marks collections with (\\xff\\xfbwaymark:)";

/// The replies would be larger than the client may be sent (`limits.reply_max_bytes`).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERR the reply would exceed limits.reply_max_bytes ({max} bytes): closing the connection")]
pub struct ReplyTooLarge {
    pub max: usize,
}

/// Why a batch's evaluation gave no transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    TooLarge(ReplyTooLarge),
    /// Read these collections whole and evaluate again.
    NeedWhole(NeedWhole),
    /// Read these elements too and evaluate again.
    NeedMembers(NeedMembers),
}

/// What a batch read: the current value of every key `keys_to_read` named (`None` if the key does
/// not exist), what is known of the collections among them, their deadlines, and a seed for the
/// commands that answer at random (`HRANDFIELD`).
#[derive(Clone, Debug, Default)]
pub struct Reads {
    /// The breaks the evaluation carries out (`client::list`'s).
    pub breaks: crate::breaks::Breaks,
    pub values: BTreeMap<Key, Option<Value>>,
    pub elements: BTreeMap<Key, Known>,
    pub deadlines: Deadlines,
    pub seed: u64,
}

/// The commands run in order over the values read.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    pub replies: Vec<Reply>,
    /// The final value of every key written (`Del` for a key deleted).
    pub writes: Vec<Write>,
}

/// The deadlines of the keys read (those that have one), and the clock of the primaries that
/// answered the reads (the latest), in Unix milliseconds: what `TTL` and `EXPIRE … GT` compare.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deadlines {
    pub of: BTreeMap<Key, u64>,
    pub now_ms: u64,
}

/// Runs `cmds` over what was `read`. A command that fails (`INCR` on text, a value grown past the
/// limit, a string command on a collection) answers with its error and writes nothing, as in
/// Redis; the others go on.
///
/// The values the replies carry are counted before each reply is built: past `reply_max_bytes`
/// nothing more is copied and the whole batch is refused (`Stop::TooLarge`). A command that needs
/// a collection's every element when they were not read stops the evaluation (`Stop::NeedWhole`).
pub fn evaluate(
    cmds: &[DataCmd],
    read: &Reads,
    value_max_bytes: usize,
    reply_max_bytes: usize,
) -> Result<Evaluated, Stop> {
    let ttl = read.deadlines.of.iter().map(|(k, at)| (k.clone(), Some(Expiry::At(*at)))).collect();
    let mut state = Overlay {
        values: read.values.clone(),
        ttl,
        now_ms: read.deadlines.now_ms,
        written: BTreeSet::new(),
        colls: read.elements.clone(),
        changed: BTreeMap::new(),
        need_whole: BTreeSet::new(),
        need_members: BTreeMap::new(),
        breaks: read.breaks,
        rng: rand_xoshiro::SplitMix64::seed_from_u64(read.seed),
    };
    let mut reply_bytes = 0usize;
    let mut replies = Vec::with_capacity(cmds.len());
    for c in cmds {
        reply_bytes = reply_bytes.saturating_add(state.reply_bytes(c));
        if reply_bytes > reply_max_bytes {
            return Err(Stop::TooLarge(ReplyTooLarge { max: reply_max_bytes }));
        }
        replies.push(state.run(c, value_max_bytes));
    }
    if !state.need_whole.is_empty() {
        return Err(Stop::NeedWhole(NeedWhole(state.need_whole)));
    }
    if !state.need_members.is_empty() {
        return Err(Stop::NeedMembers(NeedMembers(state.need_members)));
    }
    let mut writes: Vec<Write> = state.written.iter().map(|k| state.write_of(k)).collect();
    writes.extend(state.element_writes());
    Ok(Evaluated { replies, writes })
}

pub(super) struct Overlay {
    pub(super) values: BTreeMap<Key, Option<Value>>,
    /// Each key's deadline as the commands left it (absent: none).
    pub(super) ttl: BTreeMap<Key, Option<Expiry>>,
    now_ms: u64,
    pub(super) written: BTreeSet<Key>,
    /// What the commands know of each collection's elements (`collections`).
    pub(super) colls: BTreeMap<Key, Known>,
    /// The elements changed, by collection, kind and member: their new values.
    pub(super) changed: BTreeMap<(Key, Kind, Member), Option<Value>>,
    /// Collections a command needed whole that were not read whole.
    pub(super) need_whole: BTreeSet<Key>,
    /// Elements a command needed that were not read (a list's, by position).
    pub(super) need_members: BTreeMap<Key, BTreeSet<Member>>,
    pub(super) breaks: crate::breaks::Breaks,
    pub(super) rng: rand_xoshiro::SplitMix64,
}

impl Overlay {
    pub(super) fn get(&self, k: &Key) -> Option<&Value> {
        debug_assert!(self.values.contains_key(k), "key {k:?} was neither read nor written");
        self.values.get(k).and_then(|v| v.as_ref())
    }

    /// Gives `k` the value `v`, keeping its deadline (`APPEND`, `INCR`, …); a deleted key has none.
    /// A collection replaced or deleted takes its elements with it.
    pub(super) fn put(&mut self, k: &Key, v: Option<Value>) {
        if self.holds_collection(k) {
            self.drop_collection(k);
        }
        if v.is_none() {
            self.ttl.remove(k);
        }
        self.values.insert(k.clone(), v);
        self.written.insert(k.clone());
    }

    /// Gives `k` the value `v` and no deadline (`SET` and the commands that replace a value).
    fn replace(&mut self, k: &Key, v: Value) {
        self.ttl.remove(k);
        self.put(k, Some(v));
    }

    fn deadline(&self, k: &Key) -> Option<Expiry> {
        self.ttl.get(k).copied().flatten()
    }

    /// Sets `k`'s deadline (the key exists); one already passed deletes the key, as in Redis.
    fn set_deadline(&mut self, k: &Key, at: Option<Expiry>) {
        if at.is_some_and(|e| e.deadline_ms(self.now_ms) <= self.now_ms) {
            return self.put(k, None);
        }
        self.ttl.insert(k.clone(), at);
        self.written.insert(k.clone());
    }

    /// The write a key the commands changed becomes.
    fn write_of(&self, k: &Key) -> Write {
        let op = match (self.values.get(k).cloned().flatten(), self.deadline(k)) {
            (Some(v), None) => WriteOp::Set(v),
            (Some(v), Some(at)) => WriteOp::SetExpiring(v, at),
            (None, _) => WriteOp::Del,
        };
        Write { key: k.clone(), op }
    }

    /// About how many bytes `c`'s reply takes on the wire, from the values it would carry (each
    /// with a 16-byte header), without building it.
    fn reply_bytes(&self, c: &DataCmd) -> usize {
        let value = |k: &Key| self.get(k).map_or(0, |v| v.len()) + 16;
        match c {
            DataCmd::Get(k)
            | DataCmd::GetSet(k, _)
            | DataCmd::GetDel(k)
            | DataCmd::GetRange(k, ..)
            | DataCmd::GetEx(k, _) => value(k),
            DataCmd::SetIf { key, get: true, .. } => value(key),
            DataCmd::Lcs { a, b, .. } => value(a).saturating_add(value(b)).saturating_mul(2),
            DataCmd::MGet(ks) => ks.iter().map(value).fold(16, usize::saturating_add),
            DataCmd::Hash(k, hc) => self.hash_reply_bytes(k, hc),
            DataCmd::Members(k, sc) => self.set_reply_bytes(k, sc),
            DataCmd::List(k, _) | DataCmd::LMove { from: k, .. } => self.list_reply_bytes(k),
            DataCmd::LMPop { keys, .. } => {
                keys.iter().map(|k| self.list_reply_bytes(k)).fold(16, usize::saturating_add)
            }
            DataCmd::Algebra { keys, store: None, .. } => keys
                .iter()
                .map(|k| self.set_reply_bytes(k, &super::command::SetCmd::Members))
                .fold(16, usize::saturating_add),
            _ => 16,
        }
    }

    /// `reply_bytes` of a hash command: the fields and values it answers with.
    fn hash_reply_bytes(&self, k: &Key, hc: &super::command::HashCmd) -> usize {
        use super::command::HashCmd;
        let element = |(m, v): (&Member, &Value)| m.len() + v.len() + 32;
        let all = || self.elements(k).into_iter().map(element).fold(16, usize::saturating_add);
        match hc {
            HashCmd::MGet(fs) => fs.iter().map(|f| self.member(k, f).map_or(16, |v| v.len() + 16)).sum(),
            HashCmd::Get(f) => self.member(k, f).map_or(16, |v| v.len() + 16),
            HashCmd::Keys | HashCmd::Vals | HashCmd::GetAll | HashCmd::Scan { .. } => all(),
            HashCmd::RandField { count: Some(c), .. } if *c < 0 => {
                let largest = self.elements(k).into_iter().map(element).max().unwrap_or(0);
                largest.saturating_mul(c.unsigned_abs() as usize)
            }
            HashCmd::RandField { .. } => all(),
            _ => 16,
        }
    }

    /// `reply_bytes` of a list command: at most the elements read of the list.
    fn list_reply_bytes(&self, k: &Key) -> usize {
        self.elements(k).into_iter().map(|(_, v)| v.len() + 16).fold(16, usize::saturating_add)
    }

    /// `reply_bytes` of a set command: the members it answers with.
    fn set_reply_bytes(&self, k: &Key, sc: &super::command::SetCmd) -> usize {
        use super::command::SetCmd;
        let all = || self.elements(k).into_iter().map(|(m, _)| m.len() + 16).fold(16, usize::saturating_add);
        match sc {
            SetCmd::RandMember(Some(c)) if *c < 0 => {
                let largest = self.elements(k).into_iter().map(|(m, _)| m.len() + 16).max().unwrap_or(0);
                largest.saturating_mul(c.unsigned_abs() as usize)
            }
            SetCmd::Members | SetCmd::Scan { .. } | SetCmd::Pop(_) | SetCmd::RandMember(_) => all(),
            _ => 16,
        }
    }

    fn run(&mut self, c: &DataCmd, value_max_bytes: usize) -> Reply {
        if c.reads_strings() && c.keys().into_iter().any(|k| self.holds_collection(k)) {
            return Reply::error(super::answer::WRONG_TYPE);
        }
        if let Some(refused) = self.past_drop_bound(c) {
            return refused;
        }
        match c {
            DataCmd::Hash(k, hc) => self.run_hash(k, hc, value_max_bytes),
            DataCmd::MemoryUsage(k) => self.memory_usage(k),
            DataCmd::Members(k, sc) => self.run_set(k, sc),
            DataCmd::List(k, lc) => self.run_list(k, lc),
            DataCmd::LMove { from, to, from_end, to_end } => self.lmove(from, to, *from_end, *to_end),
            DataCmd::LMPop { keys, end, count } => self.lmpop(keys, *end, *count),
            DataCmd::SMove { from, to, member } => self.smove(from, to, member),
            DataCmd::Algebra { op, keys, store, card } => self.algebra(*op, keys, store.as_ref(), *card),
            DataCmd::Get(k) => self.bulk_of(k),
            DataCmd::Set(k, v) => {
                self.replace(k, v.clone());
                Reply::ok()
            }
            DataCmd::SetEx(k, v, at) => {
                self.replace(k, v.clone());
                self.set_deadline(k, Some(*at));
                Reply::ok()
            }
            DataCmd::MSet(pairs) => {
                pairs.iter().for_each(|(k, v)| self.replace(k, v.clone()));
                Reply::ok()
            }
            DataCmd::Del(ks) => {
                let mut deleted = 0;
                for k in ks {
                    if self.get(k).is_some() {
                        self.put(k, None);
                        deleted += 1;
                    }
                }
                Reply::Integer(deleted)
            }
            DataCmd::Exists(ks) => Reply::Integer(ks.iter().filter(|k| self.get(k).is_some()).count() as i64),
            DataCmd::MGet(ks) => {
                let string = |k: &Key| if self.holds_collection(k) { Reply::Null } else { self.bulk_of(k) };
                Reply::Array(ks.iter().map(string).collect())
            }
            DataCmd::StrLen(k) => Reply::Integer(self.get(k).map_or(0, |v| v.len() as i64)),
            DataCmd::IncrBy(k, by) => self.incr_by(k, *by),
            DataCmd::Append(k, v) => {
                let mut new = self.get(k).cloned().unwrap_or_default();
                new.extend_from_slice(v);
                if new.len() > value_max_bytes {
                    return Reply::error(format!("ERR string exceeds maximum allowed size ({value_max_bytes} bytes)"));
                }
                if is_head(&new) {
                    return Reply::error(FORGED_HEAD);
                }
                let len = new.len() as i64;
                self.put(k, Some(new));
                Reply::Integer(len)
            }
            _ => self.run_more(c, value_max_bytes),
        }
    }

    /// The string and keyspace commands beyond the first ones (issue 34), Redis's replies.
    fn run_more(&mut self, c: &DataCmd, value_max_bytes: usize) -> Reply {
        match c {
            DataCmd::SetIf { key, value, only, get, ttl } => {
                let before = self.bulk_of(key);
                let kept = self.deadline(key);
                let set = self.set_if(key, value, *only);
                match (set, ttl) {
                    (false, _) | (true, SetTtl::Clear) => {}
                    (true, SetTtl::Keep) => self.set_deadline(key, kept),
                    (true, SetTtl::Expire(at)) => self.set_deadline(key, Some(*at)),
                }
                match (get, set) {
                    (true, _) => before,
                    (false, true) => Reply::ok(),
                    (false, false) => Reply::Null,
                }
            }
            DataCmd::SetNx(k, v) => Reply::Integer(self.set_if(k, v, Existing::Absent) as i64),
            DataCmd::GetSet(k, v) => {
                let before = self.bulk_of(k);
                self.set_if(k, v, Existing::Any);
                before
            }
            DataCmd::GetDel(k) => {
                let before = self.bulk_of(k);
                if self.get(k).is_some() {
                    self.put(k, None);
                }
                before
            }
            DataCmd::GetRange(k, start, end) => Reply::bulk(range(self.bytes(k), *start, *end).to_vec()),
            DataCmd::SetRange(k, offset, v) => self.set_range(k, *offset, v, value_max_bytes),
            DataCmd::IncrByFloat(k, by) => self.incr_by_float(k, *by),
            DataCmd::MSetNx(pairs) => {
                let none = pairs.iter().all(|(k, _)| self.get(k).is_none());
                if none {
                    pairs.iter().for_each(|(k, v)| self.replace(k, v.clone()));
                }
                Reply::Integer(none as i64)
            }
            DataCmd::Type(k) => {
                let kind = self.get(k).map(|v| Head::decode(v).map_or("string", |h| h.kind.name()));
                Reply::Simple(kind.unwrap_or("none").into())
            }
            DataCmd::Rename { from, to, nx } => self.rename(from, to, *nx),
            DataCmd::Move { from, to } => {
                if self.get(from).is_none() || self.get(to).is_some() {
                    return Reply::Integer(0);
                }
                self.rename(from, to, true)
            }
            DataCmd::Copy { from, to, replace } => {
                if from == to {
                    return Reply::error("ERR source and destination objects are the same");
                }
                let Some(v) = self.get(from).cloned() else { return Reply::Integer(0) };
                if self.get(to).is_some() && !replace {
                    return Reply::Integer(0);
                }
                let Some(elements) = self.elements_to_move(from, to) else { return Reply::Null };
                let at = self.deadline(from);
                self.replace(to, v);
                self.set_deadline(to, at);
                self.fill(to, elements);
                Reply::Integer(1)
            }
            DataCmd::GetBit(k, offset) => Reply::Integer(bit(self.bytes(k), *offset) as i64),
            DataCmd::SetBit(k, offset, on) => self.set_bit(k, *offset, *on, value_max_bytes),
            DataCmd::Lcs { a, b, answer } => super::lcs::reply(self.bytes(a), self.bytes(b), *answer),
            DataCmd::GetEx(k, ttl) => {
                let before = self.bulk_of(k);
                match ttl {
                    Some(_) if self.get(k).is_none() => {}
                    Some(SetTtl::Clear) if self.deadline(k).is_some() => self.set_deadline(k, None),
                    Some(SetTtl::Expire(at)) => self.set_deadline(k, Some(*at)),
                    _ => {}
                }
                before
            }
            DataCmd::Expire(k, at, when) => Reply::Integer(self.expire(k, *at, *when) as i64),
            DataCmd::Ttl(k, asked) => Reply::Integer(self.ttl_reply(k, *asked)),
            DataCmd::Persist(k) => {
                let had = self.get(k).is_some() && self.deadline(k).is_some();
                if had {
                    self.set_deadline(k, None);
                }
                Reply::Integer(had as i64)
            }
            _ => unreachable!("the first commands are run by `run`"),
        }
    }

    /// `key`'s value, empty if it has none.
    fn bytes(&self, k: &Key) -> &[u8] {
        self.get(k).map_or(&[], Vec::as_slice)
    }

    /// `key`'s value as a `GET` answers it.
    fn bulk_of(&self, k: &Key) -> Reply {
        self.get(k).map_or(Reply::Null, |v| Reply::bulk(v.clone()))
    }

    /// `SET key value` under `only`'s condition on the key's existence: whether it was set.
    /// `EXPIRE` and its kin: whether the deadline was set (or the key deleted, its time past).
    fn expire(&mut self, k: &Key, at: Expiry, when: ExpireIf) -> bool {
        if self.get(k).is_none() {
            return false;
        }
        let current = self.deadline(k).map(|e| e.deadline_ms(self.now_ms));
        let new = at.deadline_ms(self.now_ms);
        let allowed = match when {
            ExpireIf::Always => true,
            ExpireIf::NoDeadline => current.is_none(),
            ExpireIf::HasDeadline => current.is_some(),
            ExpireIf::Later => current.is_some_and(|c| new > c), // none: infinite, never later
            ExpireIf::Earlier => current.is_none_or(|c| new < c),
            ExpireIf::EarlierThanItsDeadline => current.is_some_and(|c| new < c),
        };
        if allowed {
            self.set_deadline(k, Some(at));
        }
        allowed
    }

    /// `TTL` and its kin: -2 for no key, -1 for no deadline, else the time left (rounded as
    /// Redis rounds it) or the deadline.
    fn ttl_reply(&self, k: &Key, asked: TtlAsked) -> i64 {
        if self.get(k).is_none() {
            return -2;
        }
        let Some(at) = self.deadline(k).map(|e| e.deadline_ms(self.now_ms)) else { return -1 };
        let ms = match asked.absolute {
            true => at,
            false => at.saturating_sub(self.now_ms),
        };
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        match (asked.millis, asked.absolute) {
            (true, _) => ms,
            (false, true) => ms / 1_000,
            (false, false) => (ms + 500) / 1_000,
        }
    }

    fn set_if(&mut self, k: &Key, v: &Value, only: Existing) -> bool {
        let exists = self.get(k).is_some();
        let allowed = match only {
            Existing::Any => true,
            Existing::Absent => !exists,
            Existing::Present => exists,
        };
        if allowed {
            self.replace(k, v.clone());
        }
        allowed
    }

    fn set_range(&mut self, k: &Key, offset: u64, v: &Value, value_max_bytes: usize) -> Reply {
        let current = self.get(k).cloned().unwrap_or_default();
        if v.is_empty() {
            return Reply::Integer(current.len() as i64); // Redis: nothing written, not even a new key
        }
        let end = offset.saturating_add(v.len() as u64);
        if end > value_max_bytes as u64 {
            return Reply::error(format!("ERR string exceeds maximum allowed size ({value_max_bytes} bytes)"));
        }
        let (offset, end) = (offset as usize, end as usize);
        let mut new = current;
        if new.len() < end {
            new.resize(end, 0);
        }
        new[offset..end].copy_from_slice(v);
        if is_head(&new) {
            return Reply::error(FORGED_HEAD);
        }
        let len = new.len() as i64;
        self.put(k, Some(new));
        Reply::Integer(len)
    }

    fn set_bit(&mut self, k: &Key, offset: u64, on: bool, value_max_bytes: usize) -> Reply {
        let byte = offset / 8;
        if byte >= value_max_bytes as u64 {
            return Reply::error(format!("ERR string exceeds maximum allowed size ({value_max_bytes} bytes)"));
        }
        let mut v = self.get(k).cloned().unwrap_or_default();
        let old = bit(&v, offset);
        let byte = byte as usize;
        if v.len() <= byte {
            v.resize(byte + 1, 0);
        }
        let mask = 1u8 << (7 - (offset % 8));
        v[byte] = if on { v[byte] | mask } else { v[byte] & !mask };
        if is_head(&v) {
            return Reply::error(FORGED_HEAD);
        }
        self.put(k, Some(v));
        Reply::Integer(old as i64)
    }

    fn incr_by_float(&mut self, k: &Key, by: f64) -> Reply {
        match add_float(self.get(k), by, "ERR value is not a valid float") {
            Ok(text) => {
                self.put(k, Some(text.clone()));
                Reply::bulk(text)
            }
            Err(e) => e,
        }
    }

    fn rename(&mut self, from: &Key, to: &Key, nx: bool) -> Reply {
        let Some(v) = self.get(from).cloned() else { return Reply::error("ERR no such key") };
        if nx && self.get(to).is_some() {
            return Reply::Integer(0);
        }
        if from != to {
            let Some(elements) = self.elements_to_move(from, to) else { return Reply::Null };
            let at = self.deadline(from);
            self.put(from, None);
            self.replace(to, v);
            self.set_deadline(to, at);
            self.fill(to, elements);
        }
        if nx {
            Reply::Integer((from != to) as i64)
        } else {
            Reply::ok()
        }
    }

    fn incr_by(&mut self, k: &Key, by: i64) -> Reply {
        match add_integer(self.get(k), by, "ERR value is not an integer or out of range") {
            Ok(new) => {
                self.put(k, Some(new.to_string().into_bytes()));
                Reply::Integer(new)
            }
            Err(e) => e,
        }
    }
}

/// `INCRBY`'s arithmetic on a stored value (none counts as 0), or Redis's error: `not_integer`
/// for a value that is not one, the overflow error for a sum past `i64`.
pub(super) fn add_integer(current: Option<&Value>, by: i64, not_integer: &str) -> Result<i64, Reply> {
    let current = match current {
        None => 0,
        Some(v) => {
            std::str::from_utf8(v).ok().and_then(|s| s.parse::<i64>().ok()).ok_or_else(|| Reply::error(not_integer))?
        }
    };
    current.checked_add(by).ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))
}

/// `INCRBYFLOAT`'s arithmetic on a stored value (none counts as 0): the sum as stored, or Redis's
/// error — `not_float` for a value that is not one, another for a sum that is not finite.
pub(super) fn add_float(current: Option<&Value>, by: f64, not_float: &str) -> Result<Vec<u8>, Reply> {
    let current = match current {
        None => 0.0,
        Some(v) => parse_float(v).ok_or_else(|| Reply::error(not_float))?,
    };
    let new = current + by;
    if !new.is_finite() {
        return Err(Reply::error("ERR increment would produce NaN or Infinity"));
    }
    Ok(format_float(new).into_bytes())
}

/// Redis's `GETRANGE`: `start` and `end` inclusive, negative ones counted from the end, clamped
/// to the value; empty when the range is.
fn range(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = v.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return &[];
    }
    let at = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (start, end) = (at(start), at(end).min(len - 1));
    if start > end {
        return &[];
    }
    &v[start as usize..=end as usize]
}

/// Bit `offset` of `v`, the most significant bit of the first byte being bit 0 (Redis's order);
/// 0 past the end.
fn bit(v: &[u8], offset: u64) -> bool {
    let byte = offset / 8;
    byte < v.len() as u64 && v[byte as usize] & (1u8 << (7 - (offset % 8))) != 0
}

/// A stored value as Redis reads a float: the whole value, no spaces, finite.
pub fn parse_float(v: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(v).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| !f.is_nan())
}

/// A float as `INCRBYFLOAT` stores it: the shortest decimal that reads back the same, never in
/// exponent form (`3`, `1.25`, `17179869185.5`).
pub fn format_float(f: f64) -> String {
    let s = format!("{f}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Key {
        s.as_bytes().to_vec()
    }

    fn read(pairs: &[(&str, Option<&str>)]) -> Reads {
        let values = pairs.iter().map(|(key, v)| (k(key), v.map(|v| v.as_bytes().to_vec()))).collect();
        Reads { values, ..Reads::default() }
    }

    #[test]
    fn a_transaction_sees_its_own_writes_in_order() {
        let cmds = vec![
            DataCmd::IncrBy(k("a"), 5),
            DataCmd::IncrBy(k("a"), 1),
            DataCmd::Set(k("b"), k("x")),
            DataCmd::Get(k("b")),
            DataCmd::Del(vec![k("b"), k("b"), k("c")]),
        ];
        assert_eq!(keys_to_read(&cmds), [k("a"), k("b"), k("c")].into_iter().collect());
        let e = evaluate(&cmds, &read(&[("a", Some("10")), ("b", None), ("c", None)]), 1 << 20, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(
            e.replies,
            vec![Reply::Integer(15), Reply::Integer(16), Reply::ok(), Reply::bulk("x"), Reply::Integer(1)]
        );
        assert_eq!(
            e.writes,
            vec![Write { key: k("a"), op: WriteOp::Set(k("16")) }, Write { key: k("b"), op: WriteOp::Del }]
        );
    }

    #[test]
    fn a_failing_command_answers_its_error_and_writes_nothing_while_the_others_apply() {
        let cmds = vec![DataCmd::IncrBy(k("t"), 1), DataCmd::Append(k("t"), k("!"))];
        let e = evaluate(&cmds, &read(&[("t", Some("text"))]), 1 << 20, usize::MAX).expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::error("ERR value is not an integer or out of range"), Reply::Integer(5)]);
        assert_eq!(e.writes, vec![Write { key: k("t"), op: WriteOp::Set(k("text!")) }]);
    }

    #[test]
    fn blind_writes_need_no_read_and_counts_follow_redis() {
        let cmds = vec![DataCmd::MSet(vec![(k("a"), k("1"))]), DataCmd::Exists(vec![k("a"), k("a"), k("z")])];
        assert_eq!(keys_to_read(&cmds), [k("a"), k("z")].into_iter().collect());
        let e =
            evaluate(&cmds, &read(&[("a", None), ("z", None)]), 1 << 20, usize::MAX).expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::ok(), Reply::Integer(2)]);
    }

    #[test]
    fn overflow_and_size_limits_are_errors() {
        let e = evaluate(&[DataCmd::IncrBy(k("n"), 1)], &read(&[("n", Some("9223372036854775807"))]), 16, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::error("ERR increment or decrement would overflow")]);
        let e = evaluate(&[DataCmd::Append(k("s"), vec![b'x'; 20])], &read(&[("s", None)]), 16, usize::MAX)
            .expect("within the reply limit");
        assert!(matches!(&e.replies[0], Reply::Error(m) if m.contains("maximum allowed size")));
        assert!(e.writes.is_empty());
    }

    #[test]
    fn increments_and_blind_writes_of_distinct_keys_need_no_read() {
        let cmds = vec![DataCmd::IncrBy(k("a"), -5), DataCmd::IncrBy(k("b"), 5), DataCmd::Set(k("c"), k("x"))];
        let split = at_primaries(&cmds);
        assert_eq!(split.at_primary, vec![true, true, true]);
        assert_eq!(split.writes[0], Write { key: k("a"), op: WriteOp::IncrBy(-5) });
        let after = read(&[("a", Some("95")), ("b", Some("105")), ("c", Some("x"))]);
        let replies: Vec<Reply> =
            cmds.iter().map(|c| reply_at_primary(c, |key| after.values.get(key).cloned().flatten())).collect();
        // The same replies as reading first and evaluating here.
        let e = evaluate(&cmds, &read(&[("a", Some("100")), ("b", Some("100"))]), 1 << 20, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(replies, e.replies);
        assert_eq!(replies, vec![Reply::Integer(95), Reply::Integer(105), Reply::ok()]);
    }

    #[test]
    fn a_key_named_twice_keeps_its_commands_here_and_the_others_still_go_to_the_primaries() {
        let twice = at_primaries(&[DataCmd::IncrBy(k("a"), 1), DataCmd::IncrBy(k("a"), 1)]);
        assert_eq!(twice.at_primary, vec![false, false]);
        let read_then_write = at_primaries(&[DataCmd::Get(k("a")), DataCmd::Set(k("a"), k("x"))]);
        assert_eq!(read_then_write.at_primary, vec![false, false]);
        let mixed = at_primaries(&[DataCmd::Get(k("l1")), DataCmd::Append(k("l2"), k("7,"))]);
        assert_eq!(mixed.at_primary, vec![false, true]);
        assert_eq!(mixed.writes, vec![Write { key: k("l2"), op: WriteOp::Append(k("7,")) }]);
        let mset_twice = at_primaries(&[DataCmd::MSet(vec![(k("a"), k("1")), (k("a"), k("2"))])]);
        assert_eq!(mset_twice.at_primary, vec![false]);
    }

    fn run_one(c: DataCmd, before: &[(&str, Option<&str>)]) -> Evaluated {
        assert_eq!(keys_to_read(std::slice::from_ref(&c)).len(), before.len(), "{c:?} reads its keys");
        evaluate(&[c], &read(before), 64, usize::MAX).expect("within the reply limit")
    }

    #[test]
    fn conditional_sets_answer_and_write_as_redis_does() {
        let set = |only, get| DataCmd::SetIf { key: k("a"), value: k("new"), only, get, ttl: SetTtl::Clear };
        let e = run_one(set(Existing::Absent, false), &[("a", Some("old"))]);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Null], 0), "SET NX on a key that exists");
        let e = run_one(set(Existing::Present, true), &[("a", Some("old"))]);
        assert_eq!(e.replies, vec![Reply::bulk("old")], "SET XX GET answers the old value");
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Set(k("new")) }]);
        let e = run_one(set(Existing::Present, false), &[("a", None)]);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Null], 0));
        assert_eq!(run_one(DataCmd::SetNx(k("a"), k("v")), &[("a", None)]).replies, vec![Reply::Integer(1)]);
        assert_eq!(run_one(DataCmd::SetNx(k("a"), k("v")), &[("a", Some("x"))]).replies, vec![Reply::Integer(0)]);
        let e = run_one(DataCmd::GetSet(k("a"), k("v")), &[("a", None)]);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Null], 1));
        let e = run_one(DataCmd::GetDel(k("a")), &[("a", Some("x"))]);
        assert_eq!(e.replies, vec![Reply::bulk("x")]);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Del }]);
        let e = run_one(DataCmd::MSetNx(vec![(k("a"), k("1")), (k("b"), k("2"))]), &[("a", None), ("b", Some("x"))]);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Integer(0)], 0), "MSETNX writes all or none");
    }

    #[test]
    fn ranges_count_from_either_end_as_in_redis() {
        let get = |s, e, v: Option<&str>| run_one(DataCmd::GetRange(k("a"), s, e), &[("a", v)]).replies[0].clone();
        let v = Some("This is a string");
        assert_eq!(get(0, 3, v), Reply::bulk("This"));
        assert_eq!(get(-3, -1, v), Reply::bulk("ing"));
        assert_eq!(get(0, -1, v), Reply::bulk("This is a string"));
        assert_eq!(get(10, 100, v), Reply::bulk("string"));
        assert_eq!(get(5, 3, v), Reply::bulk(""));
        assert_eq!(get(-1, -5, v), Reply::bulk(""));
        assert_eq!(get(0, 3, None), Reply::bulk(""));
        let set = |o, w: &str, v| run_one(DataCmd::SetRange(k("a"), o, k(w)), &[("a", v)]);
        let e = set(6, "Redis", Some("Hello World"));
        assert_eq!(e.replies, vec![Reply::Integer(11)]);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Set(k("Hello Redis")) }]);
        let e = set(2, "x", None);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Set(b"\0\0x".to_vec()) }], "padded with zeros");
        assert_eq!(set(3, "", None).writes, vec![], "an empty SETRANGE creates nothing");
        assert!(matches!(&set(60, "12345", None).replies[0], Reply::Error(m) if m.contains("maximum allowed size")));
    }

    #[test]
    fn float_increments_keep_the_shortest_form_and_refuse_what_is_not_a_number() {
        let incr = |by, v| run_one(DataCmd::IncrByFloat(k("f"), by), &[("f", v)]).replies[0].clone();
        assert_eq!(incr(10.5, None), Reply::bulk("10.5"));
        assert_eq!(incr(1.5, Some("1.5")), Reply::bulk("3"));
        assert_eq!(incr(1.5, Some("17179869184")), Reply::bulk("17179869185.5"));
        assert_eq!(incr(1.0, Some(" 1")), Reply::error("ERR value is not a valid float"));
        assert_eq!(incr(1.0, Some("x")), Reply::error("ERR value is not a valid float"));
        assert_eq!(
            incr(f64::MAX, Some("1.7976931348623157e308")),
            Reply::error("ERR increment would produce NaN or Infinity")
        );
    }

    #[test]
    fn bits_count_from_the_first_bytes_most_significant_bit() {
        let e = run_one(DataCmd::SetBit(k("b"), 7, true), &[("b", None)]);
        assert_eq!(e.replies, vec![Reply::Integer(0)]);
        assert_eq!(e.writes, vec![Write { key: k("b"), op: WriteOp::Set(vec![1]) }]);
        let e = run_one(DataCmd::SetBit(k("b"), 1, false), &[("b", Some("p"))]);
        assert_eq!((e.replies, e.writes[0].op.clone()), (vec![Reply::Integer(1)], WriteOp::Set(k("0"))), "0x70 → 0x30");
        assert_eq!(run_one(DataCmd::GetBit(k("b"), 1), &[("b", Some("@"))]).replies, vec![Reply::Integer(1)]);
        assert_eq!(run_one(DataCmd::GetBit(k("b"), 99), &[("b", Some("@"))]).replies, vec![Reply::Integer(0)]);
        let past = run_one(DataCmd::SetBit(k("b"), 64 * 8, true), &[("b", None)]);
        assert!(matches!(&past.replies[0], Reply::Error(m) if m.contains("maximum allowed size")));
    }

    #[test]
    fn renames_copies_and_types_follow_redis() {
        let rename =
            |nx, before: &[(&str, Option<&str>)]| run_one(DataCmd::Rename { from: k("a"), to: k("b"), nx }, before);
        let e = rename(false, &[("a", Some("1")), ("b", Some("2"))]);
        assert_eq!(e.replies, vec![Reply::ok()]);
        assert_eq!(
            e.writes,
            vec![Write { key: k("a"), op: WriteOp::Del }, Write { key: k("b"), op: WriteOp::Set(k("1")) }]
        );
        assert_eq!(rename(false, &[("a", None), ("b", None)]).replies, vec![Reply::error("ERR no such key")]);
        assert_eq!(rename(true, &[("a", Some("1")), ("b", Some("2"))]).replies, vec![Reply::Integer(0)]);
        let same = evaluate(
            &[DataCmd::Rename { from: k("a"), to: k("a"), nx: false }],
            &read(&[("a", Some("1"))]),
            64,
            usize::MAX,
        );
        assert_eq!(same.expect("within the limit").writes, vec![], "a rename onto itself keeps the key");
        let copy = |replace| {
            run_one(DataCmd::Copy { from: k("a"), to: k("b"), replace }, &[("a", Some("1")), ("b", Some("2"))])
        };
        assert_eq!(copy(false).replies, vec![Reply::Integer(0)]);
        assert_eq!(copy(true).writes, vec![Write { key: k("b"), op: WriteOp::Set(k("1")) }]);
        assert_eq!(run_one(DataCmd::Type(k("a")), &[("a", Some("1"))]).replies, vec![Reply::Simple("string".into())]);
        assert_eq!(run_one(DataCmd::Type(k("a")), &[("a", None)]).replies, vec![Reply::Simple("none".into())]);
    }

    #[test]
    fn a_move_takes_the_key_only_to_where_it_is_absent() {
        let moved = |before: &[(&str, Option<&str>)]| run_one(DataCmd::Move { from: k("a"), to: k("b") }, before);
        let e = moved(&[("a", Some("1")), ("b", None)]);
        assert_eq!(e.replies, vec![Reply::Integer(1)]);
        assert_eq!(
            e.writes,
            vec![Write { key: k("a"), op: WriteOp::Del }, Write { key: k("b"), op: WriteOp::Set(k("1")) }]
        );
        assert_eq!(moved(&[("a", Some("1")), ("b", Some("2"))]).replies, vec![Reply::Integer(0)]);
        assert_eq!(moved(&[("a", None), ("b", None)]).replies, vec![Reply::Integer(0)]);
    }

    #[test]
    fn the_keys_a_command_names_are_the_keys_it_changes_in_place() {
        let mut cmds = vec![
            DataCmd::Get(k("a")),
            DataCmd::MSet(vec![(k("a"), k("1")), (k("b"), k("2"))]),
            DataCmd::Move { from: k("a"), to: k("b") },
            DataCmd::Lcs { a: k("a"), b: k("b"), answer: crate::client::command::LcsAnswer::Len },
        ];
        for c in &mut cmds {
            let named: Vec<Key> = c.keys().into_iter().cloned().collect();
            let mutable: Vec<Key> = c.keys_mut().into_iter().map(|k| k.clone()).collect();
            assert_eq!(named, mutable, "{c:?}");
        }
    }

    /// `MGET k k k …`: one value read, repeated in the reply. Counted before it is copied.
    #[test]
    fn a_reply_past_the_limit_is_refused_before_its_values_are_copied() {
        let repeats = vec![k("big"); 1_000];
        let cmds = vec![DataCmd::MGet(repeats)];
        let values = [(k("big"), Some(vec![b'v'; 4096]))].into_iter().collect();
        let read = Reads { values, ..Reads::default() };
        assert_eq!(evaluate(&cmds, &read, 1 << 20, 1 << 20), Err(Stop::TooLarge(ReplyTooLarge { max: 1 << 20 })));
        let e = evaluate(&cmds, &read, 1 << 20, 8 << 20).expect("within 8 MiB");
        assert!(matches!(&e.replies[0], Reply::Array(values) if values.len() == 1_000));
    }

    fn with_deadlines(cmds: &[DataCmd], before: &[(&str, Option<&str>, Option<u64>)], now_ms: u64) -> Evaluated {
        let values: Vec<(&str, Option<&str>)> = before.iter().map(|(key, v, _)| (*key, *v)).collect();
        let of = before.iter().filter_map(|(key, _, at)| Some((k(key), (*at)?))).collect();
        let read = Reads { deadlines: Deadlines { of, now_ms }, ..read(&values) };
        evaluate(cmds, &read, 64, usize::MAX).expect("within the reply limit")
    }

    /// TTL's -2/-1/time left (rounded as Redis does), EXPIRE's NX/XX/GT/LT, PERSIST, and the
    /// writes they become: the value again with its new deadline.
    #[test]
    fn expiry_commands_answer_and_write_as_redis_does() {
        let ttl = |millis, absolute| DataCmd::Ttl(k("a"), TtlAsked { millis, absolute });
        let e = with_deadlines(
            &[ttl(false, false), ttl(true, false), ttl(false, true)],
            &[("a", Some("v"), Some(10_700))],
            1_000,
        );
        assert_eq!(e.replies, vec![Reply::Integer(10), Reply::Integer(9_700), Reply::Integer(10)]);
        let e = with_deadlines(&[ttl(false, false)], &[("a", Some("v"), None)], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(-1)]);
        let e = with_deadlines(&[ttl(true, false)], &[("a", None, None)], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(-2)]);

        let expire = |at, when| DataCmd::Expire(k("a"), at, when);
        let e = with_deadlines(&[expire(Expiry::In(5_000), ExpireIf::Later)], &[("a", Some("v"), Some(9_000))], 1_000);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Integer(0)], 0), "GT: 6 000 is not later than 9 000");
        let e =
            with_deadlines(&[expire(Expiry::In(5_000), ExpireIf::Earlier)], &[("a", Some("v"), Some(9_000))], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(1)]);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::SetExpiring(k("v"), Expiry::In(5_000)) }]);
        let e = with_deadlines(&[expire(Expiry::In(5_000), ExpireIf::Later)], &[("a", Some("v"), None)], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(0)], "GT: no deadline counts as infinite");
        let e = with_deadlines(&[expire(Expiry::In(5_000), ExpireIf::NoDeadline)], &[("a", Some("v"), None)], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(1)]);
        let e = with_deadlines(&[expire(Expiry::At(500), ExpireIf::Always)], &[("a", Some("v"), None)], 1_000);
        assert_eq!(e.replies, vec![Reply::Integer(1)], "a deadline already past deletes the key");
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Del }]);
        let e = with_deadlines(&[expire(Expiry::In(5), ExpireIf::Always)], &[("a", None, None)], 1_000);
        assert_eq!((e.replies, e.writes.len()), (vec![Reply::Integer(0)], 0), "no key, nothing to expire");

        let e = with_deadlines(
            &[DataCmd::Persist(k("a")), DataCmd::Persist(k("a"))],
            &[("a", Some("v"), Some(9_000))],
            1_000,
        );
        assert_eq!(e.replies, vec![Reply::Integer(1), Reply::Integer(0)]);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Set(k("v")) }]);
    }

    /// SET clears a deadline, KEEPTTL and APPEND keep it, RENAME and COPY carry it, GETEX sets it.
    #[test]
    fn writes_keep_clear_or_carry_deadlines_as_redis_does() {
        let before = [("a", Some("v"), Some(9_000)), ("b", None, None)];
        let set = |ttl| DataCmd::SetIf { key: k("a"), value: k("w"), only: Existing::Any, get: false, ttl };
        let e = with_deadlines(&[set(SetTtl::Keep)], &before[..1], 1_000);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::SetExpiring(k("w"), Expiry::At(9_000)) }]);
        let e = with_deadlines(&[set(SetTtl::Clear)], &before[..1], 1_000);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::Set(k("w")) }]);
        let e = with_deadlines(&[DataCmd::Append(k("a"), k("!"))], &before[..1], 1_000);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::SetExpiring(k("v!"), Expiry::At(9_000)) }]);
        let e = with_deadlines(&[DataCmd::Rename { from: k("a"), to: k("b"), nx: false }], &before, 1_000);
        assert_eq!(
            e.writes,
            vec![
                Write { key: k("a"), op: WriteOp::Del },
                Write { key: k("b"), op: WriteOp::SetExpiring(k("v"), Expiry::At(9_000)) }
            ]
        );
        let e = with_deadlines(&[DataCmd::GetEx(k("a"), Some(SetTtl::Expire(Expiry::In(50))))], &before[..1], 1_000);
        assert_eq!(e.replies, vec![Reply::bulk("v")]);
        assert_eq!(e.writes, vec![Write { key: k("a"), op: WriteOp::SetExpiring(k("v"), Expiry::In(50)) }]);
        let e = with_deadlines(&[DataCmd::GetEx(k("a"), None)], &before[..1], 1_000);
        assert!(e.writes.is_empty(), "GETEX without options changes nothing");
    }
}
