//! The arguments of Redis's list commands (`LPUSH` … `LMPOP`), checked as Redis 7 checks them,
//! into the core's data commands.

use super::ttl_args::{self, ArgError};
use waymark_core::client::command::{End, ListCmd};
use waymark_core::client::DataCmd;

/// The list commands, with Redis's arity (negative: at least that many arguments, the name
/// counted).
pub const TABLE: &[(&str, i64)] = &[
    ("lpush", -3),
    ("rpush", -3),
    ("lpushx", -3),
    ("rpushx", -3),
    ("lpop", -2),
    ("rpop", -2),
    ("llen", 2),
    ("lindex", 3),
    ("lset", 4),
    ("lrange", 4),
    ("ltrim", 4),
    ("lrem", 4),
    ("linsert", 5),
    ("lpos", -3),
    ("lmove", 5),
    ("rpoplpush", 3),
    ("lmpop", -4),
];

/// The blocking list commands: outside `MULTI` the client waits, up to the time-out, for an
/// element to take.
pub const BLOCKING: &[(&str, i64)] = &[("blpop", -3), ("brpop", -3), ("blmove", 6), ("brpoplpush", 4), ("blmpop", -5)];

/// Whether `name` (lower case) is a blocking list command.
pub fn is_blocking(name: &str) -> bool {
    BLOCKING.iter().any(|(n, _)| *n == name)
}

/// Blocking list command `name` (lower case, its arity checked): the command it runs while it
/// waits, and its time-out in milliseconds (0: none).
pub fn parse_blocking(name: &str, mut args: Vec<Vec<u8>>) -> Result<(DataCmd, u64), ArgError> {
    let side = if name.starts_with("bl") { End::Left } else { End::Right };
    match name {
        "blpop" | "brpop" => {
            let timeout = timeout_ms(&args.pop().expect("arity checked"))?;
            Ok((DataCmd::LMPop { keys: args, end: side, count: None }, timeout))
        }
        "blmove" | "brpoplpush" => {
            let timeout = timeout_ms(&args.pop().expect("arity checked"))?;
            let cmd = parse(&name[1..], args)?;
            Ok((cmd, timeout))
        }
        "blmpop" => {
            let timeout = timeout_ms(&args.remove(0))?;
            Ok((lmpop(args)?, timeout))
        }
        other => unreachable!("{other} is not in list_args::BLOCKING"),
    }
}

/// A blocking command's time-out, in seconds with a fraction, as milliseconds rounded up.
fn timeout_ms(arg: &[u8]) -> Result<u64, ArgError> {
    let seconds: f64 = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|s: &f64| s.is_finite())
        .ok_or_else(|| ArgError("ERR timeout is not a float or out of range".into()))?;
    let ms = (seconds * 1000.0).ceil();
    if ms < 0.0 {
        return Err(ArgError("ERR timeout is negative".into()));
    }
    if ms >= i64::MAX as f64 {
        return Err(ArgError("ERR timeout is out of range".into()));
    }
    Ok(ms as u64)
}

/// Whether `name` (lower case) is a list command.
pub fn is_list(name: &str) -> bool {
    TABLE.iter().any(|(n, _)| *n == name)
}

fn syntax() -> ArgError {
    ArgError("ERR syntax error".into())
}

/// `LEFT` or `RIGHT`, in any case.
fn end(arg: &[u8]) -> Result<End, ArgError> {
    match arg.to_ascii_lowercase().as_slice() {
        b"left" => Ok(End::Left),
        b"right" => Ok(End::Right),
        _ => Err(syntax()),
    }
}

/// An integer of at least `min`, or `why` (Redis's `getRangeLongFromObjectOrReply`).
fn at_least(arg: &[u8], min: i64, why: &str) -> Result<i64, ArgError> {
    ttl_args::integer(arg).ok().filter(|n| *n >= min).ok_or_else(|| ArgError(format!("ERR {why}")))
}

/// List command `name` (lower case, its arity checked) with its arguments after the name.
pub fn parse(name: &str, args: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let mut a = args.into_iter();
    let mut one = || a.next().ok_or_else(|| ArgError(format!("ERR wrong number of arguments for '{name}' command")));
    let on_key = |key, c| Ok(DataCmd::List(key, c));
    let side = if name.starts_with('l') { End::Left } else { End::Right };
    match name {
        "lpush" | "rpush" | "lpushx" | "rpushx" => {
            let key = one()?;
            on_key(key, ListCmd::Push { end: side, values: a.collect(), only_existing: name.ends_with('x') })
        }
        "lpop" | "rpop" => {
            let key = one()?;
            let count = match (a.next(), a.next()) {
                (None, _) => None,
                (Some(n), None) => Some(at_least(&n, 0, "value is out of range, must be positive")? as u64),
                (Some(_), Some(_)) => {
                    return Err(ArgError(format!("ERR wrong number of arguments for '{name}' command")))
                }
            };
            on_key(key, ListCmd::Pop(side, count))
        }
        "llen" => on_key(one()?, ListCmd::Len),
        "lindex" => {
            let key = one()?;
            on_key(key, ListCmd::Index(ttl_args::integer(&one()?)?))
        }
        "lset" => {
            let (key, index, value) = (one()?, one()?, one()?);
            on_key(key, ListCmd::Set(ttl_args::integer(&index)?, value))
        }
        "lrange" | "ltrim" => {
            let (key, start, stop) = (one()?, one()?, one()?);
            let (start, stop) = (ttl_args::integer(&start)?, ttl_args::integer(&stop)?);
            on_key(key, if name == "lrange" { ListCmd::Range(start, stop) } else { ListCmd::Trim(start, stop) })
        }
        "lrem" => {
            let (key, count, value) = (one()?, one()?, one()?);
            on_key(key, ListCmd::Rem(ttl_args::integer(&count)?, value))
        }
        "linsert" => {
            let (key, place, pivot, value) = (one()?, one()?, one()?, one()?);
            let before = match place.to_ascii_lowercase().as_slice() {
                b"before" => true,
                b"after" => false,
                _ => return Err(syntax()),
            };
            on_key(key, ListCmd::Insert { before, pivot, value })
        }
        "lpos" => {
            let (key, element) = (one()?, one()?);
            on_key(key, lpos(element, a.collect())?)
        }
        "lmove" => {
            let (from, to, from_end, to_end) = (one()?, one()?, one()?, one()?);
            Ok(DataCmd::LMove { from, to, from_end: end(&from_end)?, to_end: end(&to_end)? })
        }
        "rpoplpush" => {
            let (from, to) = (one()?, one()?);
            Ok(DataCmd::LMove { from, to, from_end: End::Right, to_end: End::Left })
        }
        "lmpop" => lmpop(a.collect()),
        other => unreachable!("{other} is not in list_args::TABLE"),
    }
}

/// `LPOS`'s options after the element: `RANK`, `COUNT`, `MAXLEN`, in any order.
fn lpos(element: Vec<u8>, options: Vec<Vec<u8>>) -> Result<ListCmd, ArgError> {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut o = options.into_iter();
    while let Some(option) = o.next() {
        let value = o.next().ok_or_else(syntax)?;
        match option.to_ascii_lowercase().as_slice() {
            b"rank" => {
                rank = ttl_args::integer(&value)?;
                if rank == i64::MIN {
                    return Err(ArgError("ERR value is out of range".into()));
                }
                if rank == 0 {
                    return Err(ArgError(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                         negative to start from the end of the list"
                            .into(),
                    ));
                }
            }
            b"count" => count = Some(at_least(&value, 0, "COUNT can't be negative")? as u64),
            b"maxlen" => maxlen = at_least(&value, 0, "MAXLEN can't be negative")? as u64,
            _ => return Err(syntax()),
        }
    }
    Ok(ListCmd::Pos { element, rank, count, maxlen })
}

/// `LMPOP numkeys key … LEFT|RIGHT [COUNT count]`.
fn lmpop(args: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let numkeys = at_least(&args[0], 1, "numkeys should be greater than 0")? as usize;
    let rest = &args[1..];
    if numkeys >= rest.len() {
        return Err(syntax()); // no room left for LEFT|RIGHT
    }
    let (keys, rest) = rest.split_at(numkeys);
    let end = end(&rest[0])?;
    let count = match &rest[1..] {
        [] => 1,
        [word, n] if word.eq_ignore_ascii_case(b"count") => at_least(n, 1, "count should be greater than 0")? as u64,
        _ => return Err(syntax()),
    };
    Ok(DataCmd::LMPop { keys: keys.to_vec(), end, count: Some(count) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn err(name: &str, words: &[&str]) -> String {
        parse(name, args(words)).unwrap_err().0
    }

    #[test]
    fn pushes_pops_and_moves_name_their_ends() {
        let k = |s: &str| s.as_bytes().to_vec();
        let push = ListCmd::Push { end: End::Right, values: vec![k("a"), k("b")], only_existing: true };
        assert_eq!(parse("rpushx", args(&["l", "a", "b"])), Ok(DataCmd::List(k("l"), push)));
        assert_eq!(parse("lpop", args(&["l", "0"])), Ok(DataCmd::List(k("l"), ListCmd::Pop(End::Left, Some(0)))));
        let moved = DataCmd::LMove { from: k("a"), to: k("b"), from_end: End::Right, to_end: End::Left };
        assert_eq!(parse("rpoplpush", args(&["a", "b"])), Ok(moved.clone()));
        assert_eq!(parse("lmove", args(&["a", "b", "RIGHT", "left"])), Ok(moved));
        let lmpop = DataCmd::LMPop { keys: vec![k("a"), k("b")], end: End::Right, count: Some(3) };
        assert_eq!(parse("lmpop", args(&["2", "a", "b", "right", "COUNT", "3"])), Ok(lmpop));
    }

    #[test]
    fn blocking_commands_run_their_plain_forms_with_a_time_out() {
        let k = |s: &str| s.as_bytes().to_vec();
        let blpop = DataCmd::LMPop { keys: vec![k("a"), k("b")], end: End::Left, count: None };
        assert_eq!(parse_blocking("blpop", args(&["a", "b", "0.5"])), Ok((blpop, 500)));
        let moved = DataCmd::LMove { from: k("a"), to: k("b"), from_end: End::Right, to_end: End::Left };
        assert_eq!(parse_blocking("brpoplpush", args(&["a", "b", "0"])), Ok((moved, 0)));
        let blmpop = DataCmd::LMPop { keys: vec![k("a")], end: End::Right, count: Some(2) };
        assert_eq!(parse_blocking("blmpop", args(&["1", "1", "a", "RIGHT", "COUNT", "2"])), Ok((blmpop, 1000)));
        let bad = |words: &[&str]| parse_blocking("blpop", args(words)).unwrap_err().0;
        assert_eq!(bad(&["a", "-1"]), "ERR timeout is negative");
        assert_eq!(bad(&["a", "abc"]), "ERR timeout is not a float or out of range");
        assert_eq!(bad(&["a", "inf"]), "ERR timeout is not a float or out of range");
    }

    #[test]
    fn bad_arguments_get_redis_errors() {
        assert_eq!(err("lpop", &["l", "-1"]), "ERR value is out of range, must be positive");
        assert_eq!(err("lpop", &["l", "1", "1"]), "ERR wrong number of arguments for 'lpop' command");
        assert_eq!(err("lmove", &["a", "b", "up", "left"]), "ERR syntax error");
        assert_eq!(err("linsert", &["l", "aft3r", "a", "b"]), "ERR syntax error");
        assert!(err("lpos", &["l", "a", "RANK", "0"]).starts_with("ERR RANK can't be zero"));
        assert_eq!(err("lpos", &["l", "a", "COUNT", "-1"]), "ERR COUNT can't be negative");
        assert_eq!(err("lpos", &["l", "a", "MAXLEN"]), "ERR syntax error");
        for numkeys in ["0", "a", "-1"] {
            assert_eq!(err("lmpop", &[numkeys, "l", "LEFT"]), "ERR numkeys should be greater than 0");
        }
        for bad in
            [&["1", "l", "bad"][..], &["1", "l", "LEFT", "x"], &["1", "l", "RIGHT", "LEFT"], &["1", "l", "COUNT"]]
        {
            assert_eq!(err("lmpop", bad), "ERR syntax error", "{bad:?}");
        }
        assert_eq!(err("lmpop", &["1", "l", "LEFT", "COUNT", "1", "COUNT", "2"]), "ERR syntax error");
        for count in ["0", "a", "-1"] {
            assert_eq!(err("lmpop", &["1", "l", "LEFT", "COUNT", count]), "ERR count should be greater than 0");
        }
    }
}
