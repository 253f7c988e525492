//! The commands ACL rules name, with Redis's categories for each (Redis 7's `COMMAND INFO`
//! `acl_categories`) and where their keys are among their arguments. Only the commands Waymark
//! answers are listed; a category Redis has but no Waymark command belongs to (`@sortedset`,
//! `@pubsub`, …) is accepted in rules and grants nothing.
//!
//! A container command (`ACL`, `CONFIG`, `CLIENT`, `COMMAND`, `FUNCTION`) has an entry per
//! subcommand, `acl|whoami`, as in Redis: `+acl` grants them all, `+acl|whoami` one.

/// A command category, Redis's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    Keyspace,
    Read,
    Write,
    Set,
    SortedSet,
    List,
    Hash,
    String,
    Bitmap,
    HyperLogLog,
    Geo,
    Stream,
    PubSub,
    Admin,
    Fast,
    Slow,
    Blocking,
    Dangerous,
    Connection,
    Transaction,
    Scripting,
}

/// Every category, in Redis's `ACL CAT` order.
pub const CATEGORIES: &[(Category, &str)] = &[
    (Category::Keyspace, "keyspace"),
    (Category::Read, "read"),
    (Category::Write, "write"),
    (Category::Set, "set"),
    (Category::SortedSet, "sortedset"),
    (Category::List, "list"),
    (Category::Hash, "hash"),
    (Category::String, "string"),
    (Category::Bitmap, "bitmap"),
    (Category::HyperLogLog, "hyperloglog"),
    (Category::Geo, "geo"),
    (Category::Stream, "stream"),
    (Category::PubSub, "pubsub"),
    (Category::Admin, "admin"),
    (Category::Fast, "fast"),
    (Category::Slow, "slow"),
    (Category::Blocking, "blocking"),
    (Category::Dangerous, "dangerous"),
    (Category::Connection, "connection"),
    (Category::Transaction, "transaction"),
    (Category::Scripting, "scripting"),
];

impl Category {
    /// The category `@name` names (without the `@`, any case); `all` is not one.
    pub fn parse(name: &str) -> Option<Category> {
        CATEGORIES.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|(c, _)| *c)
    }

    pub fn name(self) -> &'static str {
        CATEGORIES.iter().find(|(c, _)| *c == self).map_or("?", |(_, n)| n)
    }
}

/// Which arguments are keys (Redis's legacy key spec, counting the command name as argument 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    None,
    /// From argument `first` to `last` (negative: counted from the end, -1 the last argument),
    /// every `step`-th.
    Range {
        first: usize,
        last: isize,
        step: usize,
    },
}

/// One command (or subcommand, `acl|setuser`) as ACL rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandAcl {
    pub name: &'static str,
    pub categories: &'static [Category],
    pub keys: Keys,
}

use Category::*;

const fn c(name: &'static str, categories: &'static [Category], keys: Keys) -> CommandAcl {
    CommandAcl { name, categories, keys }
}

const K1: Keys = Keys::Range { first: 1, last: 1, step: 1 };
/// The key of a subcommand's request (`OBJECT ENCODING key`).
const K2: Keys = Keys::Range { first: 2, last: 2, step: 1 };
const K12: Keys = Keys::Range { first: 1, last: 2, step: 1 };
const KALL: Keys = Keys::Range { first: 1, last: -1, step: 1 };
const KPAIRS: Keys = Keys::Range { first: 1, last: -1, step: 2 };
const NO: Keys = Keys::None;

/// Waymark's commands with Redis 7's categories. Invariant: names are unique, lowercase, and a
/// subcommand's container (`acl` of `acl|cat`) is listed too.
pub const COMMANDS: &[CommandAcl] = &[
    c("get", &[Read, String, Fast], K1),
    c("hset", &[Write, Hash, Fast], K1),
    c("hmset", &[Write, Hash, Fast], K1),
    c("hsetnx", &[Write, Hash, Fast], K1),
    c("hget", &[Read, Hash, Fast], K1),
    c("hmget", &[Read, Hash, Fast], K1),
    c("hdel", &[Write, Hash, Fast], K1),
    c("hlen", &[Read, Hash, Fast], K1),
    c("hexists", &[Read, Hash, Fast], K1),
    c("hstrlen", &[Read, Hash, Fast], K1),
    c("hincrby", &[Write, Hash, Fast], K1),
    c("hincrbyfloat", &[Write, Hash, Fast], K1),
    c("hkeys", &[Read, Hash, Slow], K1),
    c("hvals", &[Read, Hash, Slow], K1),
    c("hgetall", &[Read, Hash, Slow], K1),
    c("hrandfield", &[Read, Hash, Slow], K1),
    c("hscan", &[Read, Hash, Slow], K1),
    c("sadd", &[Write, Set, Fast], K1),
    c("srem", &[Write, Set, Fast], K1),
    c("sismember", &[Read, Set, Fast], K1),
    c("smismember", &[Read, Set, Fast], K1),
    c("scard", &[Read, Set, Fast], K1),
    c("smembers", &[Read, Set, Slow], K1),
    c("spop", &[Write, Set, Fast], K1),
    c("srandmember", &[Read, Set, Slow], K1),
    c("smove", &[Write, Set, Fast], K12),
    c("sinter", &[Read, Set, Slow], KALL),
    c("sunion", &[Read, Set, Slow], KALL),
    c("sdiff", &[Read, Set, Slow], KALL),
    c("sinterstore", &[Write, Set, Slow], KALL),
    c("sunionstore", &[Write, Set, Slow], KALL),
    c("sdiffstore", &[Write, Set, Slow], KALL),
    // From the first key on: a `LIMIT n` after them is checked as keys too, which can only refuse.
    c("sintercard", &[Read, Set, Slow], Keys::Range { first: 2, last: -1, step: 1 }),
    c("sscan", &[Read, Set, Slow], K1),
    c("lpush", &[Write, List, Fast], K1),
    c("rpush", &[Write, List, Fast], K1),
    c("lpushx", &[Write, List, Fast], K1),
    c("rpushx", &[Write, List, Fast], K1),
    c("lpop", &[Write, List, Fast], K1),
    c("rpop", &[Write, List, Fast], K1),
    c("llen", &[Read, List, Fast], K1),
    c("lindex", &[Read, List, Slow], K1),
    c("lset", &[Write, List, Slow], K1),
    c("lrange", &[Read, List, Slow], K1),
    c("ltrim", &[Write, List, Slow], K1),
    c("lrem", &[Write, List, Slow], K1),
    c("linsert", &[Write, List, Slow], K1),
    c("lpos", &[Read, List, Slow], K1),
    c("lmove", &[Write, List, Slow], K12),
    c("rpoplpush", &[Write, List, Slow], K12),
    // From the first key on, as `sintercard`: the `LEFT|RIGHT [COUNT n]` after them can only refuse.
    c("lmpop", &[Write, List, Slow], Keys::Range { first: 2, last: -1, step: 1 }),
    c("blpop", &[Write, List, Slow, Blocking], Keys::Range { first: 1, last: -2, step: 1 }),
    c("brpop", &[Write, List, Slow, Blocking], Keys::Range { first: 1, last: -2, step: 1 }),
    c("blmove", &[Write, List, Slow, Blocking], K12),
    c("brpoplpush", &[Write, List, Slow, Blocking], K12),
    c("blmpop", &[Write, List, Slow, Blocking], Keys::Range { first: 3, last: -1, step: 1 }),
    c("set", &[Write, String, Slow], K1),
    c("del", &[Keyspace, Write, Slow], KALL),
    c("exists", &[Keyspace, Read, Fast], KALL),
    c("mget", &[Read, String, Fast], KALL),
    c("mset", &[Write, String, Slow], KPAIRS),
    c("incr", &[Write, String, Fast], K1),
    c("incrby", &[Write, String, Fast], K1),
    c("decr", &[Write, String, Fast], K1),
    c("decrby", &[Write, String, Fast], K1),
    c("append", &[Write, String, Fast], K1),
    c("strlen", &[Read, String, Fast], K1),
    c("setnx", &[Write, String, Fast], K1),
    c("getset", &[Write, String, Fast], K1),
    c("getdel", &[Write, String, Fast], K1),
    c("getrange", &[Read, String, Slow], K1),
    c("substr", &[Read, String, Slow], K1),
    c("setrange", &[Write, String, Slow], K1),
    c("incrbyfloat", &[Write, String, Fast], K1),
    c("msetnx", &[Write, String, Slow], KPAIRS),
    c("type", &[Keyspace, Read, Fast], K1),
    c("rename", &[Keyspace, Write, Slow], K12),
    c("renamenx", &[Keyspace, Write, Fast], K12),
    c("copy", &[Keyspace, Write, Slow], K12),
    c("move", &[Keyspace, Write, Fast], K1),
    c("swapdb", &[Keyspace, Write, Fast, Dangerous], NO),
    c("unlink", &[Keyspace, Write, Fast], KALL),
    c("touch", &[Keyspace, Read, Fast], KALL),
    c("getex", &[Write, String, Fast], K1),
    c("setex", &[Write, String, Slow], K1),
    c("psetex", &[Write, String, Slow], K1),
    c("expire", &[Keyspace, Write, Fast], K1),
    c("pexpire", &[Keyspace, Write, Fast], K1),
    c("expireat", &[Keyspace, Write, Fast], K1),
    c("pexpireat", &[Keyspace, Write, Fast], K1),
    c("ttl", &[Keyspace, Read, Fast], K1),
    c("pttl", &[Keyspace, Read, Fast], K1),
    c("expiretime", &[Keyspace, Read, Fast], K1),
    c("pexpiretime", &[Keyspace, Read, Fast], K1),
    c("persist", &[Keyspace, Write, Fast], K1),
    c("getbit", &[Read, Bitmap, Fast], K1),
    c("setbit", &[Write, Bitmap, Slow], K1),
    c("lcs", &[Read, String, Slow], K12),
    c("scan", &[Keyspace, Read, Slow], NO),
    c("keys", &[Keyspace, Read, Slow, Dangerous], NO),
    c("randomkey", &[Keyspace, Read, Slow], NO),
    c("dbsize", &[Keyspace, Read, Fast], NO),
    c("flushall", &[Keyspace, Write, Slow, Dangerous], NO),
    c("flushdb", &[Keyspace, Write, Slow, Dangerous], NO),
    c("multi", &[Fast, Transaction], NO),
    c("exec", &[Slow, Transaction], NO),
    c("discard", &[Fast, Transaction], NO),
    c("watch", &[Fast, Transaction], KALL),
    c("unwatch", &[Fast, Transaction], NO),
    c("ping", &[Fast, Connection], NO),
    c("time", &[Fast], NO),
    c("echo", &[Fast, Connection], NO),
    c("hello", &[Fast, Connection], NO),
    c("auth", &[Fast, Connection], NO),
    c("select", &[Fast, Connection], NO),
    c("quit", &[Fast, Connection], NO),
    c("info", &[Slow, Dangerous], NO),
    c("client", &[Slow], NO),
    c("client|id", &[Slow, Connection], NO),
    c("client|getname", &[Slow, Connection], NO),
    c("client|setname", &[Slow, Connection], NO),
    c("client|setinfo", &[Slow, Connection], NO),
    c("client|info", &[Slow, Connection], NO),
    c("client|list", &[Admin, Slow, Dangerous, Connection], NO),
    c("client|kill", &[Admin, Slow, Dangerous, Connection], NO),
    c("client|no-evict", &[Admin, Slow, Dangerous, Connection], NO),
    c("reset", &[Fast, Connection], NO),
    c("object", &[Slow], NO),
    c("object|encoding", &[Keyspace, Read, Slow], K2),
    c("object|help", &[Keyspace, Slow], NO),
    c("object|refcount", &[Keyspace, Read, Slow], K2),
    c("memory", &[Slow], NO),
    c("memory|usage", &[Read, Slow], K2),
    c("config", &[Slow], NO),
    c("config|get", &[Admin, Slow, Dangerous], NO),
    c("config|set", &[Admin, Slow, Dangerous], NO),
    c("command", &[Slow, Connection], NO),
    c("command|count", &[Slow, Connection], NO),
    c("command|docs", &[Slow, Connection], NO),
    c("command|info", &[Slow, Connection], NO),
    c("function", &[Slow], NO),
    c("function|flush", &[Write, Slow, Scripting], NO),
    c("acl", &[Slow], NO),
    c("acl|cat", &[Slow], NO),
    c("acl|whoami", &[Slow], NO),
    c("acl|list", &[Admin, Slow, Dangerous], NO),
    c("acl|users", &[Admin, Slow, Dangerous], NO),
    c("acl|getuser", &[Admin, Slow, Dangerous], NO),
    c("acl|setuser", &[Admin, Slow, Dangerous], NO),
    c("acl|deluser", &[Admin, Slow, Dangerous], NO),
];

/// Commands every authenticated user may run whatever its rules: switching user needs the other
/// user's password, and leaving asks nothing.
pub const ALWAYS_ALLOWED: &[&str] = &["auth", "hello", "quit"];

/// The index in `COMMANDS` of `name` (lowercase), if Waymark has it.
pub fn index_of(name: &str) -> Option<usize> {
    COMMANDS.iter().position(|c| c.name == name)
}

/// The entry a request's arguments are checked against: `container|sub` when the command has
/// that subcommand, else the command itself (`None`: Waymark has no such command, and the parser
/// answers it). `args` is the request, the name first.
pub fn entry_for(args: &[Vec<u8>]) -> Option<usize> {
    let name = std::string::String::from_utf8_lossy(args.first()?).to_ascii_lowercase();
    let whole = index_of(&name)?;
    if let Some(sub) = args.get(1).filter(|_| has_subcommands(&name)) {
        let sub = std::string::String::from_utf8_lossy(sub).to_ascii_lowercase();
        if let Some(i) = index_of(&format!("{name}|{sub}")) {
            return Some(i);
        }
    }
    Some(whole)
}

/// Whether `name` is a container with `name|…` entries.
pub fn has_subcommands(name: &str) -> bool {
    COMMANDS.iter().any(|c| c.name.strip_prefix(name).is_some_and(|rest| rest.starts_with('|')))
}

/// The keys of a request, by its entry's key spec (arguments past the end are none).
pub fn keys_of<'a>(entry: &CommandAcl, args: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [u8]> {
    let (first, last, step) = match entry.keys {
        Keys::None => (1, 0, 1),
        Keys::Range { first, last, step } => {
            let last = if last < 0 { args.len() as isize + last } else { last };
            (first, last.max(0) as usize, step.max(1))
        }
    };
    let end = last.min(args.len().saturating_sub(1));
    (first..=end).step_by(step).filter(move |_| first <= end).filter_map(move |i| args.get(i).map(Vec::as_slice))
}
