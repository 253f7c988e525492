//! The arguments of Redis's hash commands (`HSET` … `HSCAN`) after their key, checked as Redis 7
//! checks them, into the core's `HashCmd`.

use super::set_args::{scan_args, ScanArgs};
use super::ttl_args::{self, ArgError};
use waymark_core::client::command::HashCmd;
use waymark_core::client::evaluate::parse_float;
use waymark_core::client::DataCmd;
use waymark_core::Key;

/// The hash commands, with Redis's arity (negative: at least that many arguments, the name
/// counted).
pub const TABLE: &[(&str, i64)] = &[
    ("hset", -4),
    ("hmset", -4),
    ("hsetnx", 4),
    ("hget", 3),
    ("hmget", -3),
    ("hdel", -3),
    ("hlen", 2),
    ("hexists", 3),
    ("hstrlen", 3),
    ("hincrby", 4),
    ("hincrbyfloat", 4),
    ("hkeys", 2),
    ("hvals", 2),
    ("hgetall", 2),
    ("hrandfield", -2),
    ("hscan", -3),
];

/// Whether `name` (lower case) is a hash command.
pub fn is_hash(name: &str) -> bool {
    TABLE.iter().any(|(n, _)| *n == name)
}

fn syntax() -> ArgError {
    ArgError("ERR syntax error".into())
}

/// Hash command `name` (lower case, its arity checked) on `key` with the arguments after it.
pub fn parse(name: &str, key: Key, args: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let mut a = args.into_iter();
    let mut one = || a.next().ok_or_else(|| ArgError(format!("ERR wrong number of arguments for '{name}' command")));
    let cmd = match name {
        "hset" | "hmset" => {
            let rest: Vec<Vec<u8>> = std::iter::from_fn(|| a.next()).collect();
            if !rest.len().is_multiple_of(2) {
                return Err(ArgError(format!("ERR wrong number of arguments for '{name}' command")));
            }
            let mut it = rest.into_iter();
            let pairs = std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect();
            HashCmd::Set { pairs, ok: name == "hmset" }
        }
        "hsetnx" => HashCmd::SetNx(one()?, one()?),
        "hget" => HashCmd::Get(one()?),
        "hmget" => HashCmd::MGet(a.collect()),
        "hdel" => HashCmd::Del(a.collect()),
        "hlen" => HashCmd::Len,
        "hexists" => HashCmd::Exists(one()?),
        "hstrlen" => HashCmd::StrLen(one()?),
        "hincrby" => {
            let (field, by) = (one()?, one()?);
            HashCmd::IncrBy(field, ttl_args::integer(&by)?)
        }
        "hincrbyfloat" => {
            let (field, by) = (one()?, one()?);
            let by = parse_float(&by).ok_or_else(|| ArgError("ERR value is not a valid float".into()))?;
            if !by.is_finite() {
                return Err(ArgError("ERR value is NaN or Infinity".into()));
            }
            HashCmd::IncrByFloat(field, by)
        }
        "hkeys" => HashCmd::Keys,
        "hvals" => HashCmd::Vals,
        "hgetall" => HashCmd::GetAll,
        "hrandfield" => rand_field(a.collect())?,
        "hscan" => scan(a.collect())?,
        other => unreachable!("{other} is not in hash_args::TABLE"),
    };
    Ok(DataCmd::Hash(key, cmd))
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
fn rand_field(args: Vec<Vec<u8>>) -> Result<HashCmd, ArgError> {
    match args.as_slice() {
        [] => Ok(HashCmd::RandField { count: None, with_values: false }),
        [count, rest @ ..] => {
            let count = ttl_args::integer(count)?;
            let with_values = match rest {
                [] => false,
                [w] if w.eq_ignore_ascii_case(b"withvalues") => true,
                _ => return Err(syntax()),
            };
            // Redis's bound: a negative count's field and value pairs must be countable.
            let bound = if with_values { i64::MAX / 2 } else { i64::MAX };
            if count < -bound {
                return Err(ArgError("ERR value is out of range".into()));
            }
            Ok(HashCmd::RandField { count: Some(count), with_values })
        }
    }
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`.
fn scan(args: Vec<Vec<u8>>) -> Result<HashCmd, ArgError> {
    let ScanArgs { cursor, pattern, no_values } = scan_args(args, true)?;
    Ok(HashCmd::Scan { cursor, pattern, no_values })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<Vec<u8>> {
        s.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn hash_arguments_parse_as_redis_checks_them() {
        let k = b"h".to_vec();
        let set = parse("hset", k.clone(), args(&["a", "1", "b", "2"])).unwrap();
        let pairs = vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())];
        assert_eq!(set, DataCmd::Hash(k.clone(), HashCmd::Set { pairs, ok: false }));
        assert!(parse("hset", k.clone(), args(&["a", "1", "b"])).unwrap_err().0.contains("wrong number"));
        assert!(parse("hincrby", k.clone(), args(&["a", "x"])).unwrap_err().0.contains("not an integer"));
        assert!(parse("hincrbyfloat", k.clone(), args(&["a", "x"])).unwrap_err().0.contains("valid float"));
        assert_eq!(parse("hrandfield", k.clone(), args(&["2", "with"])).unwrap_err(), syntax());
        let min = i64::MIN.to_string();
        assert!(parse("hrandfield", k.clone(), args(&[&min])).unwrap_err().0.contains("out of range"));
        assert_eq!(parse("hscan", k.clone(), args(&["x"])).unwrap_err().0, "ERR invalid cursor");
        assert_eq!(parse("hscan", k.clone(), args(&["0", "count", "0"])).unwrap_err(), syntax());
        let scan = parse("hscan", k.clone(), args(&["0", "MATCH", "a*"])).unwrap();
        let pattern = Some(b"a*".to_vec());
        assert_eq!(scan, DataCmd::Hash(k, HashCmd::Scan { cursor: 0, pattern, no_values: false }));
    }
}
