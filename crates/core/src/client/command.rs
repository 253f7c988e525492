//! The data commands the transaction client runs: what a Redis command that reads or writes data
//! asks for, already parsed and checked (arity, integers) by the front end.

use crate::ids::{Key, Value};
use crate::io::Member;
pub use crate::store::Expiry;

/// A command that reads or writes data: these run as one serializable transaction (alone, or
/// together between `MULTI` and `EXEC`).
#[derive(Clone, Debug, PartialEq)]
pub enum DataCmd {
    Get(Key),
    Set(Key, Value),
    Del(Vec<Key>),
    Exists(Vec<Key>),
    MGet(Vec<Key>),
    MSet(Vec<(Key, Value)>),
    IncrBy(Key, i64),
    Append(Key, Value),
    StrLen(Key),
    /// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL]`: `only` the condition on the key's
    /// existence, `get` whether the reply is the old value, `ttl` what becomes of its deadline.
    SetIf {
        key: Key,
        value: Value,
        only: Existing,
        get: bool,
        ttl: SetTtl,
    },
    /// `SET key value EX|PX|EXAT|PXAT t` alone, `SETEX`, `PSETEX`: a blind write with a deadline.
    SetEx(Key, Value, Expiry),
    /// `GETEX key [EX|PX|EXAT|PXAT t|PERSIST]`: the value, and its deadline changed if asked.
    GetEx(Key, Option<SetTtl>),
    /// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` with `NX|XX|GT|LT`.
    Expire(Key, Expiry, ExpireIf),
    /// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`.
    Ttl(Key, TtlAsked),
    Persist(Key),
    /// `SETNX key value`: `SET … NX` answering 1 or 0.
    SetNx(Key, Value),
    /// `GETSET key value`: `SET … GET`.
    GetSet(Key, Value),
    GetDel(Key),
    /// `GETRANGE key start end` (and `SUBSTR`): Redis's inclusive, negative-from-the-end range.
    GetRange(Key, i64, i64),
    /// `SETRANGE key offset value`: the offset already checked non-negative.
    SetRange(Key, u64, Value),
    IncrByFloat(Key, f64),
    /// `MSETNX`: every pair, or none if any key exists.
    MSetNx(Vec<(Key, Value)>),
    Type(Key),
    /// `RENAME` (`nx` false) and `RENAMENX`.
    Rename {
        from: Key,
        to: Key,
        nx: bool,
    },
    /// `COPY source destination [REPLACE]` within the one database.
    Copy {
        from: Key,
        to: Key,
        replace: bool,
    },
    /// `MOVE key db`, the front end having stored `from` in the connection's database and `to`
    /// in the other: 1 if moved (with its deadline), 0 if `from` is missing or `to` exists.
    Move {
        from: Key,
        to: Key,
    },
    /// `GETBIT key offset`: the offset already checked below 2³².
    GetBit(Key, u64),
    /// `SETBIT key offset bit`.
    SetBit(Key, u64, bool),
    /// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`.
    Lcs {
        a: Key,
        b: Key,
        answer: LcsAnswer,
    },
    /// A command on the hash at the key (`HSET`, `HGET`, … ; `collection`).
    Hash(Key, HashCmd),
    /// A command on the set at the key (`SADD`, `SISMEMBER`, … ; `collection`).
    Members(Key, SetCmd),
    /// `SMOVE source destination member`.
    SMove {
        from: Key,
        to: Key,
        member: Member,
    },
    /// `SINTER`, `SUNION`, `SDIFF` of `keys` (missing ones are empty sets), their `…STORE` forms
    /// into `store`, and `SINTERCARD` (`card`, with its `LIMIT`, 0 for none).
    Algebra {
        op: SetOp,
        keys: Vec<Key>,
        store: Option<Key>,
        card: Option<u64>,
    },
    /// A command on the list at the key (`LPUSH`, `LRANGE`, … ; `collection`).
    List(Key, ListCmd),
    /// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` and `RPOPLPUSH`: an element popped from
    /// one end of `from` pushed onto one end of `to` (the same list rotates).
    LMove {
        from: Key,
        to: Key,
        from_end: End,
        to_end: End,
    },
    /// `LMPOP numkeys key … LEFT|RIGHT [COUNT n]`: up to `count` elements of the first of `keys`
    /// that is a non-empty list, answered `[key, [element …]]`; `count` `None`: one, answered
    /// `[key, element]` as `BLPOP`/`BRPOP` answer.
    LMPop {
        keys: Vec<Key>,
        end: End,
        count: Option<u64>,
    },
    /// `MEMORY USAGE key`: the bytes the key takes, its elements' included, counted as the
    /// memory limit counts them (`tally::ENTRY_OVERHEAD_BYTES` per record); nil for no key.
    MemoryUsage(Key),
}

/// A hash command's arguments after its key, checked by the front end.
#[derive(Clone, Debug, PartialEq)]
pub enum HashCmd {
    /// `HSET` (answers how many fields are new) or `HMSET` (`OK`): at least one pair.
    Set {
        pairs: Vec<(Member, Value)>,
        ok: bool,
    },
    /// `HSETNX field value`.
    SetNx(Member, Value),
    Get(Member),
    MGet(Vec<Member>),
    /// `HDEL field …`: the hash is deleted once it has no field left.
    Del(Vec<Member>),
    Len,
    Exists(Member),
    StrLen(Member),
    IncrBy(Member, i64),
    IncrByFloat(Member, f64),
    Keys,
    Vals,
    GetAll,
    /// `HRANDFIELD key [count [WITHVALUES]]`: `None` for one field or nil; a negative count
    /// may repeat fields.
    RandField {
        count: Option<i64>,
        with_values: bool,
    },
    /// `HSCAN key cursor [MATCH pattern] [COUNT n] [NOVALUES]`: Waymark answers every field
    /// matching in one page (cursor 0), as Redis does for a small hash; a cursor it never gave
    /// has nothing left.
    Scan {
        cursor: u64,
        pattern: Option<Vec<u8>>,
        no_values: bool,
    },
}

/// A set command's arguments after its key, checked by the front end.
#[derive(Clone, Debug, PartialEq)]
pub enum SetCmd {
    /// `SADD member …`: answers how many are new.
    Add(Vec<Member>),
    /// `SREM member …`: the set is deleted once empty.
    Rem(Vec<Member>),
    IsMember(Member),
    MIsMember(Vec<Member>),
    Card,
    Members,
    /// `SPOP key [count]`: `None` pops one (or answers nil).
    Pop(Option<u64>),
    /// `SRANDMEMBER key [count]`: a negative count may repeat members.
    RandMember(Option<i64>),
    /// `SSCAN key cursor [MATCH pattern] [COUNT n]`: every member matching in one page, as
    /// `HSCAN`.
    Scan {
        cursor: u64,
        pattern: Option<Vec<u8>>,
    },
}

impl SetCmd {
    /// The members the command reads, or `None` when it reads them all.
    pub fn members(&self) -> Option<Vec<&Member>> {
        match self {
            SetCmd::Add(ms) | SetCmd::Rem(ms) | SetCmd::MIsMember(ms) => Some(ms.iter().collect()),
            SetCmd::IsMember(m) => Some(vec![m]),
            SetCmd::Card => Some(vec![]),
            SetCmd::Members | SetCmd::Pop(_) | SetCmd::RandMember(_) | SetCmd::Scan { .. } => None,
        }
    }
}

/// One end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// A list command's arguments after its key, checked by the front end.
#[derive(Clone, Debug, PartialEq)]
pub enum ListCmd {
    /// `LPUSH`/`RPUSH` (and `…X`, `only_existing`: nothing if the key is missing): at least one
    /// value, pushed one after the other; answers the length.
    Push {
        end: End,
        values: Vec<Value>,
        only_existing: bool,
    },
    /// `LPOP`/`RPOP key [count]`: `None` pops one (or answers nil).
    Pop(End, Option<u64>),
    Len,
    Index(i64),
    /// `LSET key index element`.
    Set(i64, Value),
    /// `LRANGE key start stop`, Redis's inclusive indexes counted from either end.
    Range(i64, i64),
    /// `LTRIM key start stop`: keeps that range.
    Trim(i64, i64),
    /// `LREM key count element`: the first `count` equal to it (from the tail when negative; all
    /// when 0).
    Rem(i64, Value),
    /// `LINSERT key BEFORE|AFTER pivot element`.
    Insert {
        before: bool,
        pivot: Value,
        value: Value,
    },
    /// `LPOS key element [RANK r] [COUNT n] [MAXLEN m]`: `count` `None` answers one index or nil;
    /// `rank` is never 0 (negative: from the tail); `maxlen` 0 for no limit.
    Pos {
        element: Value,
        rank: i64,
        count: Option<u64>,
        maxlen: u64,
    },
}

impl ListCmd {
    /// Whether the command needs the list's every element (it rewrites or searches it), rather
    /// than the positions its head names (`NeedMembers`).
    pub fn reads_whole(&self) -> bool {
        matches!(self, ListCmd::Rem(..) | ListCmd::Insert { .. } | ListCmd::Pos { .. })
    }
}

/// The set algebra of `SINTER`, `SUNION` and `SDIFF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Inter,
    Union,
    Diff,
}

impl HashCmd {
    /// The fields the command reads, or `None` when it reads them all.
    pub fn fields(&self) -> Option<Vec<&Member>> {
        match self {
            HashCmd::Set { pairs, .. } => Some(pairs.iter().map(|(f, _)| f).collect()),
            HashCmd::SetNx(f, _)
            | HashCmd::Get(f)
            | HashCmd::Exists(f)
            | HashCmd::StrLen(f)
            | HashCmd::IncrBy(f, _)
            | HashCmd::IncrByFloat(f, _) => Some(vec![f]),
            HashCmd::MGet(fs) | HashCmd::Del(fs) => Some(fs.iter().collect()),
            HashCmd::Len => Some(vec![]),
            HashCmd::Keys | HashCmd::Vals | HashCmd::GetAll | HashCmd::RandField { .. } | HashCmd::Scan { .. } => None,
        }
    }
}

/// Every key a command names, as often as it names it, in order: one match for both borrows
/// (`$iter` is `iter` or `iter_mut`; the patterns bind by reference either way).
macro_rules! keys_named {
    ($cmd:expr, $iter:ident) => {
        match $cmd {
            DataCmd::Get(k)
            | DataCmd::Set(k, _)
            | DataCmd::IncrBy(k, _)
            | DataCmd::Append(k, _)
            | DataCmd::StrLen(k) => {
                vec![k]
            }
            DataCmd::SetEx(k, ..)
            | DataCmd::GetEx(k, _)
            | DataCmd::Expire(k, ..)
            | DataCmd::Ttl(k, _)
            | DataCmd::Persist(k)
            | DataCmd::SetIf { key: k, .. }
            | DataCmd::SetNx(k, _)
            | DataCmd::GetSet(k, _)
            | DataCmd::GetDel(k)
            | DataCmd::GetRange(k, ..)
            | DataCmd::SetRange(k, ..)
            | DataCmd::IncrByFloat(k, _)
            | DataCmd::Type(k)
            | DataCmd::GetBit(k, _)
            | DataCmd::SetBit(k, ..) => vec![k],
            DataCmd::Lcs { a, b, .. } => vec![a, b],
            DataCmd::Hash(k, _) | DataCmd::MemoryUsage(k) | DataCmd::Members(k, _) | DataCmd::List(k, _) => vec![k],
            DataCmd::LMove { from, to, .. } => vec![from, to],
            DataCmd::LMPop { keys, .. } => keys.$iter().collect(),
            DataCmd::SMove { from, to, .. } => vec![from, to],
            DataCmd::Algebra { keys, store, .. } => store.$iter().chain(keys.$iter()).collect(),
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::MGet(ks) => ks.$iter().collect(),
            DataCmd::MSet(pairs) | DataCmd::MSetNx(pairs) => pairs.$iter().map(|(k, _)| k).collect(),
            DataCmd::Rename { from, to, .. } | DataCmd::Copy { from, to, .. } | DataCmd::Move { from, to } => {
                vec![from, to]
            }
        }
    };
}

impl DataCmd {
    /// The keys the command names, each as often as it names it: what its evaluation reads.
    pub fn keys(&self) -> Vec<&Key> {
        keys_named!(self, iter)
    }

    /// Whether the command reads its keys as strings: on a collection it answers `WRONGTYPE`
    /// (`MGET`, `SET`, `DEL` and the keyspace commands take any type).
    pub fn reads_strings(&self) -> bool {
        match self {
            DataCmd::Get(_)
            | DataCmd::IncrBy(..)
            | DataCmd::Append(..)
            | DataCmd::StrLen(_)
            | DataCmd::GetEx(..)
            | DataCmd::GetSet(..)
            | DataCmd::GetDel(_)
            | DataCmd::GetRange(..)
            | DataCmd::SetRange(..)
            | DataCmd::IncrByFloat(..)
            | DataCmd::GetBit(..)
            | DataCmd::SetBit(..)
            | DataCmd::Lcs { .. } => true,
            DataCmd::SetIf { get, .. } => *get,
            _ => false,
        }
    }

    /// Whether a value the command stores whole would read as a collection's head (the front
    /// end refuses it: `evaluate::FORGED_HEAD`; values built by `APPEND`, `SETRANGE` and `SETBIT`
    /// are checked as they are built).
    pub fn forges_head(&self) -> bool {
        let head = |v: &Value| crate::collection::is_head(v);
        match self {
            DataCmd::Set(_, v)
            | DataCmd::SetEx(_, v, _)
            | DataCmd::SetNx(_, v)
            | DataCmd::GetSet(_, v)
            | DataCmd::SetIf { value: v, .. } => head(v),
            DataCmd::MSet(pairs) | DataCmd::MSetNx(pairs) => pairs.iter().any(|(_, v)| head(v)),
            _ => false,
        }
    }

    /// The same keys, to be changed in place (the front end stores a client's keys in its
    /// database, `crate::database`).
    pub fn keys_mut(&mut self) -> Vec<&mut Key> {
        keys_named!(self, iter_mut)
    }
}

/// What `LCS` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LcsAnswer {
    /// The longest common subsequence itself.
    Text,
    /// Its length (`LEN`).
    Len,
    /// The matching ranges, the last in the values first as Redis lists them (`IDX`), those
    /// shorter than `min_len` left out, each with its length if `with_len`.
    Ranges { min_len: u64, with_len: bool },
}

/// What a `SET` (or `GETEX`) does to the key's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTtl {
    /// Plain `SET`: the key no longer expires (`GETEX … PERSIST` too).
    Clear,
    /// `KEEPTTL`: the deadline stays.
    Keep,
    /// `EX`/`PX`/`EXAT`/`PXAT`.
    Expire(Expiry),
}

/// `EXPIRE`'s condition on the key's current deadline (no deadline counts as infinite for `GT`
/// and `LT`, as in Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireIf {
    Always,
    /// `NX`: only if the key has no deadline.
    NoDeadline,
    /// `XX`: only if it has one.
    HasDeadline,
    /// `GT`: only if the new deadline is later.
    Later,
    /// `LT`: only if the new deadline is earlier.
    Earlier,
    /// `XX LT`: only if the key has a deadline and the new one is earlier.
    EarlierThanItsDeadline,
}

/// What `TTL` and its kin answer: time left or the deadline itself, in seconds or milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtlAsked {
    pub millis: bool,
    /// `EXPIRETIME`/`PEXPIRETIME`: the Unix time of the deadline rather than the time left.
    pub absolute: bool,
}

/// `SET`'s condition on whether the key exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    Any,
    /// `NX`: only if it does not exist.
    Absent,
    /// `XX`: only if it exists.
    Present,
}
