//! Redis commands as Waymark understands them: the arguments of a request turned into a typed
//! command, or into the error Redis itself would give (wrong arity, not an integer, an option
//! Waymark does not support — never a silent success).

use super::ttl_args;
pub use waymark_core::client::command::{Existing, LcsAnswer};
pub use waymark_core::client::DataCmd;
pub use waymark_core::database::Db;
use waymark_core::{Key, Value};

#[derive(Clone, Debug, PartialEq)]
pub enum Cmd {
    Data(DataCmd),
    /// `BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`, `BLMPOP`: `cmd` outside `MULTI` waits up to
    /// `timeout_ms` (0: for ever) for an element; queued in `MULTI`, it runs once as `cmd`.
    Blocking {
        cmd: DataCmd,
        timeout_ms: u64,
    },
    Ping(Option<Vec<u8>>),
    /// `TIME`: this host's clock, seconds and microseconds.
    Time,
    Echo(Vec<u8>),
    Quit,
    Hello {
        proto: Option<u8>,
        auth: Option<(Vec<u8>, Vec<u8>)>,
        name: Option<Vec<u8>>,
    },
    Auth {
        user: Option<Vec<u8>>,
        password: Vec<u8>,
    },
    Select(i64),
    /// `MOVE key db`: the key, and the database it goes to (the front end stores both).
    Move {
        key: Key,
        db: Db,
    },
    /// `COPY source destination DB db [REPLACE]`: the destination in another database.
    CopyToDb {
        from: Key,
        to: Key,
        db: Db,
        replace: bool,
    },
    /// `SWAPDB a b`: refused, with why.
    SwapDb,
    ClientSetName(Vec<u8>),
    ClientGetName,
    /// `CLIENT SETINFO LIB-NAME|LIB-VER value`: `lib_ver` false for the name.
    ClientSetInfo {
        lib_ver: bool,
        value: Vec<u8>,
    },
    ClientId,
    ClientInfo,
    /// `CLIENT LIST [TYPE normal|…] [ID id …]`: `None` lists every connection.
    ClientList(Option<Vec<u64>>),
    /// `CLIENT KILL ip:port` (the old form: `OK`, or an error when none matches).
    ClientKillAddr(String),
    /// `CLIENT KILL <filter> <value> …`: how many were killed.
    ClientKill(crate::clients::KillFilter),
    /// `CLIENT NO-EVICT on|off`: Waymark never evicts a client, so either is already true.
    ClientNoEvict,
    /// `RESET`: the connection as it was opened.
    Reset,
    /// `OBJECT ENCODING key`.
    ObjectEncoding(Key),
    /// `OBJECT REFCOUNT key`: Waymark shares no value between keys, so 1 for a key that exists.
    ObjectRefcount(Key),
    ObjectHelp,
    ConfigGet(Vec<Vec<u8>>),
    ConfigSet(Vec<(Vec<u8>, Vec<u8>)>),
    /// `CONFIG RESETSTAT`: the per-command counters start again.
    ConfigResetStat,
    /// `FUNCTION FLUSH [ASYNC|SYNC]`: Waymark has no functions, so there are none to flush.
    FunctionFlush,
    Command,
    CommandCount,
    CommandDocs,
    CommandInfo(Vec<Vec<u8>>),
    /// `INFO [section …]`: the sections asked, lower case (none: the default ones).
    Info(Vec<String>),
    DbSize,
    Multi,
    Exec,
    Discard,
    Watch(Vec<Key>),
    Unwatch,
    /// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
    Scan {
        cursor: u64,
        pattern: Option<Vec<u8>>,
        count: u32,
        kind: Option<String>,
    },
    Keys(Vec<u8>),
    RandomKey,
    /// `FLUSHALL` and `FLUSHDB` (Waymark has one database), `ASYNC` or `SYNC` alike.
    /// `FLUSHALL` (`all`) or `FLUSHDB` (the connection's database).
    Flush {
        all: bool,
    },
    /// `ACL …` (`resp/acl.rs`).
    Acl(AclCmd),
}

/// The `ACL` subcommands Waymark answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AclCmd {
    SetUser { name: Vec<u8>, rules: Vec<Vec<u8>> },
    GetUser(Vec<u8>),
    DelUser(Vec<Vec<u8>>),
    List,
    Users,
    WhoAmI,
    Cat(Option<Vec<u8>>),
}

/// An error reply, with Redis's wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmdError(pub String);

impl From<ttl_args::ArgError> for CmdError {
    fn from(e: ttl_args::ArgError) -> Self {
        CmdError(e.0)
    }
}

/// Whether `name` (lower case) is a command Waymark answers.
pub fn known(name: &str) -> bool {
    commands().any(|(n, _)| *n == name)
}

/// Every command Waymark answers with its arity: [`TABLE`], then the hash and set commands
/// (`hash_args::TABLE`, `set_args::TABLE`, `list_args::TABLE`).
pub fn commands() -> impl Iterator<Item = &'static (&'static str, i64)> {
    TABLE
        .iter()
        .chain(super::hash_args::TABLE)
        .chain(super::set_args::TABLE)
        .chain(super::list_args::TABLE)
        .chain(super::list_args::BLOCKING)
}

/// The commands Waymark answers, with Redis's arity (negative: at least that many arguments,
/// counting the name) — `COMMAND` lists them for tools.
pub const TABLE: &[(&str, i64)] = &[
    ("get", 2),
    ("set", -3),
    ("del", -2),
    ("exists", -2),
    ("mget", -2),
    ("mset", -3),
    ("incr", 2),
    ("incrby", 3),
    ("decr", 2),
    ("decrby", 3),
    ("append", 3),
    ("strlen", 2),
    ("setnx", 3),
    ("getset", 3),
    ("getdel", 2),
    ("getrange", 4),
    ("substr", 4),
    ("setrange", 4),
    ("incrbyfloat", 3),
    ("msetnx", -3),
    ("type", 2),
    ("rename", 3),
    ("renamenx", 3),
    ("copy", -3),
    ("unlink", -2),
    ("touch", -2),
    ("function", -2),
    ("getex", -2),
    ("setex", 4),
    ("psetex", 4),
    ("expire", -3),
    ("pexpire", -3),
    ("expireat", -3),
    ("pexpireat", -3),
    ("ttl", 2),
    ("pttl", 2),
    ("expiretime", 2),
    ("pexpiretime", 2),
    ("persist", 2),
    ("getbit", 3),
    ("setbit", 4),
    ("lcs", -3),
    ("scan", -2),
    ("keys", 2),
    ("randomkey", 1),
    ("flushall", -1),
    ("flushdb", -1),
    ("multi", 1),
    ("exec", 1),
    ("discard", 1),
    ("watch", -2),
    ("unwatch", 1),
    ("ping", -1),
    ("time", 1),
    ("echo", 2),
    ("hello", -1),
    ("auth", -2),
    ("select", 2),
    ("move", 3),
    ("swapdb", 3),
    ("quit", -1),
    ("info", -1),
    ("dbsize", 1),
    ("client", -2),
    ("reset", 1),
    ("object", -2),
    ("memory", -2),
    ("config", -2),
    ("command", -1),
    ("acl", -2),
];

fn arity_error(name: &str) -> CmdError {
    CmdError(format!("ERR wrong number of arguments for '{name}' command"))
}

fn integer(arg: &[u8]) -> Result<i64, CmdError> {
    Ok(ttl_args::integer(arg)?)
}

/// Turns a request's arguments into a command. `args` is never empty (the parser skips empty
/// requests).
pub fn parse(args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let Some(&(_, arity)) = commands().find(|(n, _)| *n == name) else {
        return Err(unknown(&name, &args[1..]));
    };
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(arity_error(&name));
    }
    let mut a = args.into_iter().skip(1);
    let mut one = || a.next().expect("arity checked");
    match name.as_str() {
        "get" => Ok(Cmd::Data(DataCmd::Get(one()))),
        "set" => {
            let (key, value) = (one(), one());
            ttl_args::set(key, value, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        "setex" | "psetex" => {
            let (key, time, value) = (one(), one(), one());
            ttl_args::setex(&name, key, &time, value).map(Cmd::Data).map_err(CmdError::from)
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            let (key, time) = (one(), one());
            ttl_args::expire(&name, key, &time, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        "ttl" | "pttl" | "expiretime" | "pexpiretime" => Ok(Cmd::Data(ttl_args::ttl(&name, one()))),
        "persist" => Ok(Cmd::Data(DataCmd::Persist(one()))),
        "del" => Ok(Cmd::Data(DataCmd::Del(a.collect()))),
        "exists" => Ok(Cmd::Data(DataCmd::Exists(a.collect()))),
        "mget" => Ok(Cmd::Data(DataCmd::MGet(a.collect()))),
        "mset" => mset(a.collect()),
        "incr" => Ok(Cmd::Data(DataCmd::IncrBy(one(), 1))),
        "decr" => Ok(Cmd::Data(DataCmd::IncrBy(one(), -1))),
        "incrby" => {
            let (key, by) = (one(), one());
            Ok(Cmd::Data(DataCmd::IncrBy(key, integer(&by)?)))
        }
        "decrby" => {
            let (key, by) = (one(), one());
            let by = integer(&by)?.checked_neg().ok_or_else(|| CmdError("ERR decrement would overflow".into()))?;
            Ok(Cmd::Data(DataCmd::IncrBy(key, by)))
        }
        "append" => {
            let (key, value) = (one(), one());
            Ok(Cmd::Data(DataCmd::Append(key, value)))
        }
        "strlen" => Ok(Cmd::Data(DataCmd::StrLen(one()))),
        "setnx" => {
            let (key, value) = (one(), one());
            Ok(Cmd::Data(DataCmd::SetNx(key, value)))
        }
        "getset" => {
            let (key, value) = (one(), one());
            Ok(Cmd::Data(DataCmd::GetSet(key, value)))
        }
        "getdel" => Ok(Cmd::Data(DataCmd::GetDel(one()))),
        "getrange" | "substr" => {
            let (key, start, end) = (one(), one(), one());
            Ok(Cmd::Data(DataCmd::GetRange(key, integer(&start)?, integer(&end)?)))
        }
        "setrange" => {
            let (key, offset, value) = (one(), one(), one());
            let offset = u64::try_from(integer(&offset)?).map_err(|_| CmdError("ERR offset is out of range".into()))?;
            Ok(Cmd::Data(DataCmd::SetRange(key, offset, value)))
        }
        "incrbyfloat" => {
            let (key, by) = (one(), one());
            // An infinite increment parses, as in Redis, and fails as the sum it would produce.
            let by = waymark_core::client::evaluate::parse_float(&by)
                .ok_or_else(|| CmdError("ERR value is not a valid float".into()))?;
            Ok(Cmd::Data(DataCmd::IncrByFloat(key, by)))
        }
        "msetnx" => Ok(Cmd::Data(DataCmd::MSetNx(pairs("msetnx", a.collect())?))),
        "type" => Ok(Cmd::Data(DataCmd::Type(one()))),
        "rename" | "renamenx" => {
            let (from, to) = (one(), one());
            Ok(Cmd::Data(DataCmd::Rename { from, to, nx: name == "renamenx" }))
        }
        "copy" => {
            let (from, to) = (one(), one());
            copy(from, to, a.collect())
        }
        "unlink" => Ok(Cmd::Data(DataCmd::Del(a.collect()))),
        "getex" => {
            let key = one();
            ttl_args::getex(key, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        "getbit" => {
            let (key, offset) = (one(), one());
            Ok(Cmd::Data(DataCmd::GetBit(key, bit_offset(&offset)?)))
        }
        "setbit" => {
            let (key, offset, bit) = (one(), one(), one());
            let on = match bit.as_slice() {
                b"0" => false,
                b"1" => true,
                _ => return Err(CmdError("ERR bit is not an integer or out of range".into())),
            };
            Ok(Cmd::Data(DataCmd::SetBit(key, bit_offset(&offset)?, on)))
        }
        "lcs" => {
            let (a_key, b_key) = (one(), one());
            lcs(a_key, b_key, a.collect())
        }
        "touch" => Ok(Cmd::Data(DataCmd::Exists(a.collect()))),
        blocking if super::list_args::is_blocking(blocking) => {
            let (cmd, timeout_ms) = super::list_args::parse_blocking(blocking, a.collect())?;
            Ok(Cmd::Blocking { cmd, timeout_ms })
        }
        list if super::list_args::is_list(list) => {
            super::list_args::parse(list, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        set if super::set_args::is_set(set) => {
            super::set_args::parse(set, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        hash if super::hash_args::is_hash(hash) => {
            let key = one();
            super::hash_args::parse(hash, key, a.collect()).map(Cmd::Data).map_err(CmdError::from)
        }
        "watch" => Ok(Cmd::Watch(a.collect())),
        "multi" => Ok(Cmd::Multi),
        "exec" => Ok(Cmd::Exec),
        "discard" => Ok(Cmd::Discard),
        "unwatch" => Ok(Cmd::Unwatch),
        _ => connection(&name, a.collect()),
    }
}

fn unknown(name: &str, args: &[Vec<u8>]) -> CmdError {
    let shown: Vec<String> = args.iter().take(8).map(|a| format!("'{}'", String::from_utf8_lossy(a))).collect();
    CmdError(format!("ERR unknown command '{name}', with args beginning with: {}", shown.join(" ")))
}

/// A bit offset as Redis takes it: below 2³² (its 512 MiB bulk limit in bits).
fn bit_offset(arg: &[u8]) -> Result<u64, CmdError> {
    let offset = || CmdError("ERR bit offset is not an integer or out of range".into());
    let n = std::str::from_utf8(arg).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(offset)?;
    if n >= 1 << 32 {
        return Err(offset());
    }
    Ok(n)
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`.
fn lcs(a: Key, b: Key, options: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let (mut len, mut idx, mut min_len, mut with_len) = (false, false, 0u64, false);
    let mut it = options.into_iter();
    while let Some(opt) = it.next() {
        match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "LEN" => len = true,
            "IDX" => idx = true,
            "WITHMATCHLEN" => with_len = true,
            "MINMATCHLEN" => match it.next() {
                Some(n) => min_len = integer(&n)?.max(0) as u64,
                None => return Err(CmdError("ERR syntax error".into())),
            },
            _ => return Err(CmdError("ERR syntax error".into())),
        }
    }
    let answer = match (len, idx) {
        (true, true) => {
            return Err(CmdError("ERR If you want both the length and indexes, please just use IDX.".into()))
        }
        (true, false) => LcsAnswer::Len,
        (false, true) => LcsAnswer::Ranges { min_len, with_len },
        (false, false) => LcsAnswer::Text,
    };
    Ok(Cmd::Data(DataCmd::Lcs { a, b, answer }))
}

/// `COPY source destination [DB db] [REPLACE]`.
fn copy(from: Key, to: Key, options: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let (mut replace, mut db) = (false, None);
    let mut it = options.into_iter();
    while let Some(opt) = it.next() {
        match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "REPLACE" => replace = true,
            "DB" => match it.next() {
                Some(n) => db = Some(db_index(&n)?),
                None => return Err(CmdError("ERR syntax error".into())),
            },
            _ => return Err(CmdError("ERR syntax error".into())),
        }
    }
    Ok(match db {
        Some(db) => Cmd::CopyToDb { from, to, db, replace },
        None => Cmd::Data(DataCmd::Copy { from, to, replace }),
    })
}

/// A database's number, as `SELECT`, `MOVE` and `COPY … DB` take it.
pub fn db_index(arg: &[u8]) -> Result<Db, CmdError> {
    Db::new(integer(arg)?).ok_or_else(|| CmdError("ERR DB index is out of range".into()))
}

fn mset(args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    Ok(Cmd::Data(DataCmd::MSet(pairs("mset", args)?)))
}

/// `key value …` pairs of `MSET` and `MSETNX`.
fn pairs(name: &str, args: Vec<Vec<u8>>) -> Result<Vec<(Key, Value)>, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(arity_error(name));
    }
    let mut pairs = vec![];
    let mut it = args.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        pairs.push((k, v));
    }
    Ok(pairs)
}

fn connection(name: &str, args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let upper = |a: &Vec<u8>| String::from_utf8_lossy(a).to_ascii_uppercase();
    match name {
        "ping" if args.len() <= 1 => Ok(Cmd::Ping(args.into_iter().next())),
        "ping" => Err(arity_error("ping")),
        "echo" => Ok(Cmd::Echo(args.into_iter().next().expect("arity checked"))),
        "time" => Ok(Cmd::Time),
        "quit" => Ok(Cmd::Quit),
        "hello" => hello(args),
        "auth" => match args.len() {
            1 => Ok(Cmd::Auth { user: None, password: args[0].clone() }),
            2 => Ok(Cmd::Auth { user: Some(args[0].clone()), password: args[1].clone() }),
            _ => Err(CmdError("ERR syntax error".into())),
        },
        "select" => Ok(Cmd::Select(integer(&args[0])?)),
        "move" => Ok(Cmd::Move { key: args[0].clone(), db: db_index(&args[1])? }),
        "swapdb" => {
            // Redis's own order of checks: a bad index is refused before the command is.
            db_index(&args[0])?;
            db_index(&args[1])?;
            Ok(Cmd::SwapDb)
        }
        "info" => Ok(Cmd::Info(args.iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect())),
        "dbsize" => Ok(Cmd::DbSize),
        "scan" => scan(args),
        "keys" => Ok(Cmd::Keys(args.into_iter().next().expect("arity checked"))),
        "randomkey" => Ok(Cmd::RandomKey),
        "function" => match (args.first().map(upper).as_deref(), args.get(1).map(upper).as_deref()) {
            (Some("FLUSH"), None | Some("ASYNC" | "SYNC")) if args.len() <= 2 => Ok(Cmd::FunctionFlush),
            (Some("FLUSH"), _) => Err(CmdError("ERR syntax error".into())),
            (Some(sub), _) => Err(CmdError(format!("ERR FUNCTION {sub} is not supported by Waymark (no functions)"))),
            (None, _) => Err(arity_error("function")),
        },
        "flushall" | "flushdb" => match args.first().map(upper).as_deref() {
            None | Some("ASYNC" | "SYNC") if args.len() <= 1 => Ok(Cmd::Flush { all: name == "flushall" }),
            _ => Err(CmdError("ERR syntax error".into())),
        },
        "client" => client(&upper(&args[0]), args),
        "object" => object(&upper(&args[0]), args),
        "memory" => memory(&upper(&args[0]), args),
        "reset" => Ok(Cmd::Reset),
        "acl" => acl(&upper(&args[0]), args),
        "config" => match upper(&args[0]).as_str() {
            "GET" if args.len() >= 2 => Ok(Cmd::ConfigGet(args[1..].to_vec())),
            "GET" => Err(CmdError("ERR wrong number of arguments for 'config|get' command".into())),
            "SET" if args.len() >= 3 && args.len() % 2 == 1 => {
                Ok(Cmd::ConfigSet(args[1..].chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()))
            }
            "SET" => Err(CmdError("ERR wrong number of arguments for 'config|set' command".into())),
            "RESETSTAT" if args.len() == 1 => Ok(Cmd::ConfigResetStat),
            sub => Err(CmdError(format!(
                "ERR CONFIG {sub} is not supported by Waymark: its settings live in the node's config file"
            ))),
        },
        "command" => match args.first().map(upper).as_deref() {
            None => Ok(Cmd::Command),
            Some("COUNT") => Ok(Cmd::CommandCount),
            Some("DOCS") => Ok(Cmd::CommandDocs),
            Some("INFO") => Ok(Cmd::CommandInfo(args[1..].to_vec())),
            Some(sub) => Err(CmdError(format!("ERR unknown subcommand '{sub}'. Try COMMAND HELP."))),
        },
        _ => Err(unknown(name, &args)),
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`, Redis's defaults (`COUNT 10`).
fn scan(args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let mut it = args.into_iter();
    let cursor = it.next().expect("arity checked");
    let cursor = std::str::from_utf8(&cursor)
        .ok()
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(|| CmdError("ERR invalid cursor".into()))?;
    let (mut pattern, mut count, mut kind) = (None, 10u32, None);
    while let Some(opt) = it.next() {
        let Some(value) = it.next() else { return Err(CmdError("ERR syntax error".into())) };
        match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "MATCH" => pattern = Some(value),
            "COUNT" => match integer(&value)? {
                n if n < 1 => return Err(CmdError("ERR syntax error".into())),
                n => count = u32::try_from(n).unwrap_or(u32::MAX),
            },
            "TYPE" => kind = Some(String::from_utf8_lossy(&value).into_owned()),
            _ => return Err(CmdError("ERR syntax error".into())),
        }
    }
    Ok(Cmd::Scan { cursor, pattern, count, kind })
}

fn client(sub: &str, args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let syntax = || CmdError("ERR syntax error".into());
    match (sub, args.len()) {
        ("SETNAME", 2) if args[1].iter().any(|b| *b <= b' ') => {
            Err(CmdError("ERR Client names cannot contain spaces, newlines or special characters.".into()))
        }
        ("SETNAME", 2) => Ok(Cmd::ClientSetName(args[1].clone())),
        ("GETNAME", 1) => Ok(Cmd::ClientGetName),
        ("SETINFO", 3) => match upper_text(&args[1]).as_str() {
            "LIB-NAME" | "LIB-VER" if args[2].iter().any(|b| *b <= b' ') => {
                Err(CmdError("ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.".into()))
            }
            "LIB-NAME" => Ok(Cmd::ClientSetInfo { lib_ver: false, value: args[2].clone() }),
            "LIB-VER" => Ok(Cmd::ClientSetInfo { lib_ver: true, value: args[2].clone() }),
            _ => Err(CmdError(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(&args[1])))),
        },
        ("ID", 1) => Ok(Cmd::ClientId),
        ("INFO", 1) => Ok(Cmd::ClientInfo),
        ("LIST", _) => client_list(&args[1..]),
        ("KILL", 2) => Ok(Cmd::ClientKillAddr(String::from_utf8_lossy(&args[1]).into_owned())),
        ("KILL", n) if n >= 3 && n % 2 == 1 => client_kill(&args[1..]),
        ("KILL", _) => Err(syntax()),
        ("NO-EVICT", 2) => match upper_text(&args[1]).as_str() {
            "ON" | "OFF" => Ok(Cmd::ClientNoEvict),
            _ => Err(syntax()),
        },
        ("SETNAME" | "GETNAME" | "SETINFO" | "ID" | "INFO" | "NO-EVICT", _) => {
            Err(CmdError(format!("ERR wrong number of arguments for 'client|{}' command", sub.to_lowercase())))
        }
        _ => Err(CmdError(format!("ERR unknown subcommand '{sub}'. Try CLIENT HELP."))),
    }
}

/// `CLIENT LIST`'s options: `TYPE normal` is every connection (Waymark has no other kind), another
/// type none; `ID id …` those ids.
fn client_list(opts: &[Vec<u8>]) -> Result<Cmd, CmdError> {
    match opts {
        [] => Ok(Cmd::ClientList(None)),
        [t, kind] if upper_text(t) == "TYPE" => match upper_text(kind).as_str() {
            "NORMAL" => Ok(Cmd::ClientList(None)),
            "MASTER" | "REPLICA" | "SLAVE" | "PUBSUB" => Ok(Cmd::ClientList(Some(vec![]))),
            other => Err(CmdError(format!("ERR Unknown client type '{}'", other.to_lowercase()))),
        },
        [t, ids @ ..] if upper_text(t) == "ID" && !ids.is_empty() => {
            let id = |b: &Vec<u8>| integer(b).ok().and_then(|n| u64::try_from(n).ok()).filter(|n| *n > 0);
            let ids = ids.iter().map(id).collect::<Option<Vec<u64>>>();
            ids.map(|ids| Cmd::ClientList(Some(ids))).ok_or_else(|| CmdError("ERR Invalid client ID".into()))
        }
        _ => Err(CmdError("ERR syntax error".into())),
    }
}

/// `CLIENT KILL <filter> <value> …` (`ID`, `ADDR`, `LADDR`, `USER`, `TYPE`, `SKIPME`).
fn client_kill(pairs: &[Vec<u8>]) -> Result<Cmd, CmdError> {
    use crate::clients::KillFilter;
    let mut f = KillFilter { normal: true, skip_me: true, ..KillFilter::default() };
    for pair in pairs.chunks(2) {
        let [filter, value] = pair else { return Err(CmdError("ERR syntax error".into())) };
        let text = String::from_utf8_lossy(value).into_owned();
        match upper_text(filter).as_str() {
            "ID" => match integer(value).ok().and_then(|n| u64::try_from(n).ok()).filter(|n| *n > 0) {
                Some(id) => f.id = Some(id),
                None => return Err(CmdError("ERR client-id should be greater than 0".into())),
            },
            "ADDR" => f.addr = Some(text),
            "LADDR" => f.laddr = Some(text),
            "USER" => f.user = Some(text),
            "TYPE" => match text.to_ascii_lowercase().as_str() {
                "normal" => {}
                "master" | "replica" | "slave" | "pubsub" => f.normal = false,
                other => return Err(CmdError(format!("ERR Unknown client type '{other}'"))),
            },
            "SKIPME" => match text.to_ascii_lowercase().as_str() {
                "yes" => f.skip_me = true,
                "no" => f.skip_me = false,
                _ => return Err(CmdError("ERR syntax error".into())),
            },
            _ => return Err(CmdError("ERR syntax error".into())),
        }
    }
    Ok(Cmd::ClientKill(f))
}

/// `OBJECT ENCODING key` and `OBJECT HELP`; the rest (`FREQ`, `IDLETIME`, `REFCOUNT`) Waymark does
/// not keep.
fn object(sub: &str, args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    match (sub, args.len()) {
        ("ENCODING", 2) => Ok(Cmd::ObjectEncoding(args[1].clone())),
        ("REFCOUNT", 2) => Ok(Cmd::ObjectRefcount(args[1].clone())),
        ("HELP", 1) => Ok(Cmd::ObjectHelp),
        ("ENCODING" | "HELP" | "REFCOUNT", _) => {
            Err(CmdError(format!("ERR wrong number of arguments for 'object|{}' command", sub.to_lowercase())))
        }
        ("FREQ" | "IDLETIME", _) => {
            Err(CmdError(format!("ERR OBJECT {sub} is not supported by Waymark (it keeps no such counter)")))
        }
        _ => Err(CmdError(format!("ERR unknown subcommand '{sub}'. Try OBJECT HELP."))),
    }
}

/// `MEMORY USAGE key [SAMPLES n]` (Waymark counts every element: no sampling).
fn memory(sub: &str, args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    match (sub, args.as_slice()) {
        ("USAGE", [_, key]) => Ok(Cmd::Data(DataCmd::MemoryUsage(key.clone()))),
        ("USAGE", [_, key, samples, n]) if samples.eq_ignore_ascii_case(b"samples") => {
            integer(n)?;
            Ok(Cmd::Data(DataCmd::MemoryUsage(key.clone())))
        }
        ("USAGE", [_, _, ..]) => Err(CmdError("ERR syntax error".into())),
        ("USAGE", _) => Err(CmdError("ERR wrong number of arguments for 'memory|usage' command".into())),
        ("DOCTOR" | "STATS" | "MALLOC-STATS" | "PURGE", _) => {
            Err(CmdError(format!("ERR MEMORY {sub} is not supported by Waymark: see INFO memory and /metrics")))
        }
        _ => Err(CmdError(format!("ERR unknown subcommand '{sub}'. Try MEMORY HELP."))),
    }
}

/// An argument in capitals, for matching Redis's case-insensitive words.
fn upper_text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).to_ascii_uppercase()
}

/// `ACL SETUSER|GETUSER|DELUSER|LIST|USERS|WHOAMI|CAT`, with Redis's arity errors.
fn acl(sub: &str, args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let arity = || CmdError(format!("ERR wrong number of arguments for 'acl|{}' command", sub.to_lowercase()));
    let mut rest = args.into_iter().skip(1);
    let n = rest.len();
    let cmd = match (sub, n) {
        ("SETUSER", 1..) => AclCmd::SetUser { name: rest.next().ok_or_else(arity)?, rules: rest.collect() },
        ("GETUSER", 1) => AclCmd::GetUser(rest.next().ok_or_else(arity)?),
        ("DELUSER", 1..) => AclCmd::DelUser(rest.collect()),
        ("LIST", 0) => AclCmd::List,
        ("USERS", 0) => AclCmd::Users,
        ("WHOAMI", 0) => AclCmd::WhoAmI,
        ("CAT", 0 | 1) => AclCmd::Cat(rest.next()),
        ("SETUSER" | "GETUSER" | "DELUSER" | "LIST" | "USERS" | "WHOAMI" | "CAT", _) => return Err(arity()),
        _ => return Err(CmdError(format!("ERR unknown subcommand '{sub}'. Try ACL HELP."))),
    };
    Ok(Cmd::Acl(cmd))
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
fn hello(args: Vec<Vec<u8>>) -> Result<Cmd, CmdError> {
    let mut it = args.into_iter();
    let proto = match it.next() {
        None => None,
        Some(p) => match integer(&p) {
            Ok(v @ (2 | 3)) => Some(v as u8),
            _ => return Err(CmdError("NOPROTO unsupported protocol version".into())),
        },
    };
    let (mut auth, mut name) = (None, None);
    while let Some(opt) = it.next() {
        match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "AUTH" => match (it.next(), it.next()) {
                (Some(u), Some(p)) => auth = Some((u, p)),
                _ => return Err(CmdError("ERR Syntax error in HELLO option 'AUTH'".into())),
            },
            "SETNAME" => match it.next() {
                Some(n) => name = Some(n),
                None => return Err(CmdError("ERR Syntax error in HELLO option 'SETNAME'".into())),
            },
            other => return Err(CmdError(format!("ERR Syntax error in HELLO option '{other}'"))),
        }
    }
    Ok(Cmd::Hello { proto, auth, name })
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_core::client::command::{ExpireIf, Expiry, SetTtl, TtlAsked};

    fn cmd(words: &str) -> Result<Cmd, CmdError> {
        parse(words.split(' ').map(|w| w.as_bytes().to_vec()).collect())
    }

    #[test]
    fn data_commands_parse_into_their_typed_form() {
        assert_eq!(cmd("GET a"), Ok(Cmd::Data(DataCmd::Get(b"a".to_vec()))));
        assert_eq!(cmd("decrby a 5"), Ok(Cmd::Data(DataCmd::IncrBy(b"a".to_vec(), -5))));
        assert_eq!(
            cmd("MSET a 1 b 2"),
            Ok(Cmd::Data(DataCmd::MSet(vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())])))
        );
    }

    #[test]
    fn wrong_arity_and_bad_integers_get_redis_errors() {
        assert_eq!(cmd("GET"), Err(CmdError("ERR wrong number of arguments for 'get' command".into())));
        assert_eq!(cmd("MSET a 1 b"), Err(CmdError("ERR wrong number of arguments for 'mset' command".into())));
        assert_eq!(cmd("INCRBY a x"), Err(CmdError("ERR value is not an integer or out of range".into())));
        assert!(cmd("DECRBY a -9223372036854775808").is_err());
    }

    #[test]
    fn expiry_options_parse_with_redis_errors() {
        let (a, v) = (b"a".to_vec(), b"1".to_vec());
        assert_eq!(cmd("SET a 1 EX 10"), Ok(Cmd::Data(DataCmd::SetEx(a.clone(), v.clone(), Expiry::In(10_000)))));
        assert_eq!(cmd("SET a 1 pxat 77"), Ok(Cmd::Data(DataCmd::SetEx(a.clone(), v.clone(), Expiry::At(77)))));
        let keep = Cmd::Data(DataCmd::SetIf {
            key: a.clone(),
            value: v.clone(),
            only: Existing::Absent,
            get: false,
            ttl: SetTtl::Keep,
        });
        assert_eq!(cmd("SET a 1 NX KEEPTTL"), Ok(keep));
        assert_eq!(cmd("SET a 1 EX 10 PX 5"), Err(CmdError("ERR syntax error".into())));
        assert_eq!(cmd("SET a 1 EX 10 KEEPTTL"), Err(CmdError("ERR syntax error".into())));
        assert_eq!(cmd("SET a 1 EX 0"), Err(CmdError("ERR invalid expire time in 'set' command".into())));
        assert_eq!(cmd("SET a 1 EX"), Err(CmdError("ERR syntax error".into())));
        assert_eq!(cmd("SETEX a -1 v"), Err(CmdError("ERR invalid expire time in 'setex' command".into())));
        assert_eq!(cmd("PSETEX a 5 v"), Ok(Cmd::Data(DataCmd::SetEx(a.clone(), b"v".to_vec(), Expiry::In(5)))));
        assert_eq!(
            cmd("EXPIRE a 9223372036854775807"),
            Err(CmdError("ERR invalid expire time in 'expire' command".into()))
        );
        assert_eq!(cmd("EXPIRE a -3"), Ok(Cmd::Data(DataCmd::Expire(a.clone(), Expiry::At(0), ExpireIf::Always))));
        assert_eq!(
            cmd("PEXPIREAT a 99 GT"),
            Ok(Cmd::Data(DataCmd::Expire(a.clone(), Expiry::At(99), ExpireIf::Later)))
        );
        let xx_lt = Cmd::Data(DataCmd::Expire(a.clone(), Expiry::In(1_000), ExpireIf::EarlierThanItsDeadline));
        assert_eq!(cmd("EXPIRE a 1 xx lt"), Ok(xx_lt));
        assert!(cmd("EXPIRE a 1 NX GT").unwrap_err().0.contains("not compatible"));
        assert!(cmd("EXPIRE a 1 GT LT").unwrap_err().0.contains("GT and LT"));
        assert_eq!(cmd("EXPIRE a 1 FOO"), Err(CmdError("ERR Unsupported option FOO".into())));
        assert_eq!(cmd("EXPIRE a x"), Err(CmdError("ERR value is not an integer or out of range".into())));
        let pttl = Cmd::Data(DataCmd::Ttl(a.clone(), TtlAsked { millis: true, absolute: false }));
        assert_eq!(cmd("PTTL a"), Ok(pttl));
        let etime = Cmd::Data(DataCmd::Ttl(a.clone(), TtlAsked { millis: false, absolute: true }));
        assert_eq!(cmd("EXPIRETIME a"), Ok(etime));
        assert_eq!(cmd("GETEX a EX 10"), Ok(Cmd::Data(DataCmd::GetEx(a, Some(SetTtl::Expire(Expiry::In(10_000)))))));
    }

    #[test]
    fn unsupported_options_are_refused_not_ignored() {
        assert_eq!(cmd("SET a 1 FOO"), Err(CmdError("ERR syntax error".into())));
        assert!(cmd("ZUNION 2 a b").unwrap_err().0.starts_with("ERR unknown command 'zunion'"));
        assert_eq!(cmd("CONFIG SET save x"), Ok(Cmd::ConfigSet(vec![(b"save".to_vec(), b"x".to_vec())])));
        assert!(cmd("CONFIG SET save").is_err());
        assert_eq!(cmd("FUNCTION FLUSH"), Ok(Cmd::FunctionFlush));
        assert!(cmd("FUNCTION LOAD x").is_err());
    }

    #[test]
    fn string_and_keyspace_commands_parse_with_redis_errors() {
        let (a, v) = (b"a".to_vec(), b"v".to_vec());
        let ttl = SetTtl::Clear;
        let set_if = |only, get| Ok(Cmd::Data(DataCmd::SetIf { key: a.clone(), value: v.clone(), only, get, ttl }));
        assert_eq!(cmd("SET a v nx GET"), set_if(Existing::Absent, true));
        assert_eq!(cmd("SET a v XX"), set_if(Existing::Present, false));
        assert_eq!(cmd("SET a v NX XX"), Err(CmdError("ERR syntax error".into())));
        assert_eq!(cmd("SETRANGE a -1 v"), Err(CmdError("ERR offset is out of range".into())));
        assert_eq!(cmd("INCRBYFLOAT a nan"), Err(CmdError("ERR value is not a valid float".into())));
        assert_eq!(cmd("INCRBYFLOAT a 1.5"), Ok(Cmd::Data(DataCmd::IncrByFloat(a.clone(), 1.5))));
        assert_eq!(cmd("MSETNX a 1 b"), Err(CmdError("ERR wrong number of arguments for 'msetnx' command".into())));
        assert_eq!(cmd("COPY a b DB 16"), Err(CmdError("ERR DB index is out of range".into())));
        let to_db = Cmd::CopyToDb { from: a.clone(), to: b"b".to_vec(), db: Db::new(1).unwrap(), replace: false };
        assert_eq!(cmd("COPY a b DB 1"), Ok(to_db));
        assert_eq!(cmd("MOVE a 3"), Ok(Cmd::Move { key: a.clone(), db: Db::new(3).unwrap() }));
        assert_eq!(cmd("MOVE a 16"), Err(CmdError("ERR DB index is out of range".into())));
        assert_eq!(cmd("FLUSHDB ASYNC"), Ok(Cmd::Flush { all: false }));
        let copy = Cmd::Data(DataCmd::Copy { from: a.clone(), to: b"b".to_vec(), replace: true });
        assert_eq!(cmd("COPY a b replace"), Ok(copy));
        let to_zero = Cmd::CopyToDb { from: a.clone(), to: b"b".to_vec(), db: Db::default(), replace: true };
        assert_eq!(cmd("COPY a b db 0 replace"), Ok(to_zero), "database 0 from wherever the connection is");
        assert_eq!(cmd("RENAMENX a b"), Ok(Cmd::Data(DataCmd::Rename { from: a, to: b"b".to_vec(), nx: true })));
        assert_eq!(cmd("GETRANGE a 0"), Err(CmdError("ERR wrong number of arguments for 'getrange' command".into())));
        assert_eq!(cmd("GETEX a PERSIST"), Ok(Cmd::Data(DataCmd::GetEx(b"a".to_vec(), Some(SetTtl::Clear)))));
        assert_eq!(cmd("GETEX a FOO"), Err(CmdError("ERR syntax error".into())));
        assert!(cmd("SETBIT a 4294967296 1").unwrap_err().0.contains("out of range"));
        assert!(cmd("SETBIT a 0 2").unwrap_err().0.contains("out of range"));
        assert_eq!(
            cmd("LCS a b LEN IDX"),
            Err(CmdError("ERR If you want both the length and indexes, please just use IDX.".into()))
        );
        let ranges = LcsAnswer::Ranges { min_len: 5, with_len: true };
        assert_eq!(
            cmd("LCS a b idx minmatchlen 5 withmatchlen"),
            Ok(Cmd::Data(DataCmd::Lcs { a: b"a".to_vec(), b: b"b".to_vec(), answer: ranges }))
        );
    }

    /// Every command Waymark answers has its place in the ACL table (categories, keys), so a
    /// rule can name it and a check finds it.
    #[test]
    fn every_command_has_acl_categories() {
        for (name, _) in commands() {
            assert!(waymark_core::acl::table::index_of(name).is_some(), "{name} is not in the ACL table");
        }
        let mut parsed = cmd("ACL SETUSER app on >pw ~app:* +@read").unwrap();
        let rules = ["on", ">pw", "~app:*", "+@read"].map(|r| r.as_bytes().to_vec()).to_vec();
        assert_eq!(parsed, Cmd::Acl(AclCmd::SetUser { name: b"app".to_vec(), rules }));
        parsed = cmd("acl whoami").unwrap();
        assert_eq!(parsed, Cmd::Acl(AclCmd::WhoAmI));
        assert_eq!(cmd("ACL GETUSER"), Err(CmdError("ERR wrong number of arguments for 'acl|getuser' command".into())));
        assert!(cmd("ACL LOAD").unwrap_err().0.starts_with("ERR unknown subcommand 'LOAD'"));
    }

    #[test]
    fn hello_takes_a_protocol_and_options() {
        assert_eq!(cmd("HELLO 3"), Ok(Cmd::Hello { proto: Some(3), auth: None, name: None }));
        assert_eq!(cmd("HELLO 4"), Err(CmdError("NOPROTO unsupported protocol version".into())));
        let h = cmd("HELLO 2 AUTH default pw SETNAME me").unwrap();
        assert_eq!(
            h,
            Cmd::Hello {
                proto: Some(2),
                auth: Some((b"default".to_vec(), b"pw".to_vec())),
                name: Some(b"me".to_vec())
            }
        );
    }
}
