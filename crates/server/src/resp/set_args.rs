//! The arguments of Redis's set commands (`SADD` … `SSCAN`), checked as Redis 7 checks them,
//! into the core's data commands.

use super::ttl_args::{self, ArgError};
use waymark_core::client::command::{SetCmd, SetOp};
use waymark_core::client::DataCmd;

/// The set commands, with Redis's arity (negative: at least that many arguments, the name
/// counted).
pub const TABLE: &[(&str, i64)] = &[
    ("sadd", -3),
    ("srem", -3),
    ("sismember", 3),
    ("smismember", -3),
    ("scard", 2),
    ("smembers", 2),
    ("spop", -2),
    ("srandmember", -2),
    ("smove", 4),
    ("sinter", -2),
    ("sunion", -2),
    ("sdiff", -2),
    ("sinterstore", -3),
    ("sunionstore", -3),
    ("sdiffstore", -3),
    ("sintercard", -3),
    ("sscan", -3),
];

/// Whether `name` (lower case) is a set command.
pub fn is_set(name: &str) -> bool {
    TABLE.iter().any(|(n, _)| *n == name)
}

fn syntax() -> ArgError {
    ArgError("ERR syntax error".into())
}

/// Set command `name` (lower case, its arity checked) with its arguments after the name.
pub fn parse(name: &str, args: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let mut a = args.into_iter();
    let mut one = || a.next().ok_or_else(|| ArgError(format!("ERR wrong number of arguments for '{name}' command")));
    let op = |name: &str| match &name[1..name.len().min(6)] {
        "inter" => SetOp::Inter,
        "union" => SetOp::Union,
        _ => SetOp::Diff,
    };
    let on_key = |key, c| Ok(DataCmd::Members(key, c));
    match name {
        "sadd" => on_key(one()?, SetCmd::Add(a.collect())),
        "srem" => on_key(one()?, SetCmd::Rem(a.collect())),
        "sismember" => on_key(one()?, SetCmd::IsMember(one()?)),
        "smismember" => on_key(one()?, SetCmd::MIsMember(a.collect())),
        "scard" => on_key(one()?, SetCmd::Card),
        "smembers" => on_key(one()?, SetCmd::Members),
        "spop" => {
            let key = one()?;
            let count = match (a.next(), a.next()) {
                (None, _) => None,
                (Some(n), None) => Some(
                    u64::try_from(ttl_args::integer(&n)?)
                        .map_err(|_| ArgError("ERR value is out of range, must be positive".into()))?,
                ),
                (Some(_), Some(_)) => return Err(syntax()),
            };
            on_key(key, SetCmd::Pop(count))
        }
        "srandmember" => {
            let key = one()?;
            let count = match (a.next(), a.next()) {
                (None, _) => None,
                (Some(n), None) => Some(ttl_args::integer(&n)?),
                (Some(_), Some(_)) => return Err(syntax()),
            };
            if count == Some(i64::MIN) {
                return Err(ArgError("ERR value is out of range".into()));
            }
            on_key(key, SetCmd::RandMember(count))
        }
        "smove" => {
            let (from, to, member) = (one()?, one()?, one()?);
            Ok(DataCmd::SMove { from, to, member })
        }
        "sinter" | "sunion" | "sdiff" => {
            Ok(DataCmd::Algebra { op: op(name), keys: a.collect(), store: None, card: None })
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            let store = Some(one()?);
            Ok(DataCmd::Algebra { op: op(name), keys: a.collect(), store, card: None })
        }
        "sintercard" => inter_card(a.collect()),
        "sscan" => {
            let key = one()?;
            let ScanArgs { cursor, pattern, .. } = scan_args(a.collect(), false)?;
            on_key(key, SetCmd::Scan { cursor, pattern })
        }
        other => unreachable!("{other} is not in set_args::TABLE"),
    }
}

/// `SINTERCARD numkeys key … [LIMIT limit]`.
fn inter_card(args: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let numkeys = ttl_args::integer(&args[0]).ok().filter(|n| *n > 0);
    let Some(numkeys) = numkeys else { return Err(ArgError("ERR numkeys should be greater than 0".into())) };
    let rest = &args[1..];
    let n = numkeys as usize;
    if n > rest.len() {
        return Err(ArgError("ERR Number of keys can't be greater than number of args".into()));
    }
    let (keys, options) = rest.split_at(n);
    let limit = match options {
        [] => 0,
        [word, limit] if word.eq_ignore_ascii_case(b"limit") => {
            let limit = ttl_args::integer(limit).ok().and_then(|n| u64::try_from(n).ok());
            limit.ok_or_else(|| ArgError("ERR LIMIT can't be negative".into()))?
        }
        _ => return Err(syntax()),
    };
    Ok(DataCmd::Algebra { op: SetOp::Inter, keys: keys.to_vec(), store: None, card: Some(limit) })
}

/// What `HSCAN` and `SSCAN` are given after their key.
pub struct ScanArgs {
    pub cursor: u64,
    pub pattern: Option<Vec<u8>>,
    /// `NOVALUES` (`HSCAN` only: `no_values_allowed`).
    pub no_values: bool,
}

/// `cursor [MATCH pattern] [COUNT count] [NOVALUES]` of `HSCAN` and `SSCAN`, checked as Redis
/// checks them (`COUNT` below 1 is a syntax error; Waymark answers every match in one page).
pub fn scan_args(args: Vec<Vec<u8>>, no_values_allowed: bool) -> Result<ScanArgs, ArgError> {
    let mut a = args.into_iter();
    let cursor = a.next().ok_or_else(syntax)?;
    let cursor: u64 = std::str::from_utf8(&cursor)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ArgError("ERR invalid cursor".into()))?;
    let (mut pattern, mut no_values) = (None, false);
    while let Some(option) = a.next() {
        match option.to_ascii_lowercase().as_slice() {
            b"match" => pattern = Some(a.next().ok_or_else(syntax)?),
            b"count" => {
                if ttl_args::integer(&a.next().ok_or_else(syntax)?)? < 1 {
                    return Err(syntax());
                }
            }
            b"novalues" if no_values_allowed => no_values = true,
            _ => return Err(syntax()),
        }
    }
    Ok(ScanArgs { cursor, pattern, no_values })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<Vec<u8>> {
        s.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn set_arguments_parse_as_redis_checks_them() {
        let k = |s: &str| s.as_bytes().to_vec();
        assert_eq!(
            parse("sadd", args(&["s", "a", "b"])).unwrap(),
            DataCmd::Members(k("s"), SetCmd::Add(vec![k("a"), k("b")]))
        );
        assert!(parse("spop", args(&["s", "-1"])).unwrap_err().0.contains("must be positive"));
        assert_eq!(parse("spop", args(&["s", "1", "2"])).unwrap_err(), syntax());
        let store = parse("sunionstore", args(&["d", "a", "b"])).unwrap();
        let union = DataCmd::Algebra { op: SetOp::Union, keys: vec![k("a"), k("b")], store: Some(k("d")), card: None };
        assert_eq!(store, union);
        assert!(parse("sintercard", args(&["0", "a"])).unwrap_err().0.contains("greater than 0"));
        assert!(parse("sintercard", args(&["3", "a"])).unwrap_err().0.contains("can't be greater"));
        assert!(parse("sintercard", args(&["1", "a", "LIMIT", "-1"])).unwrap_err().0.contains("negative"));
        let card = DataCmd::Algebra { op: SetOp::Inter, keys: vec![k("a")], store: None, card: Some(5) };
        assert_eq!(parse("sintercard", args(&["1", "a", "limit", "5"])).unwrap(), card);
    }
}
