//! The arguments of the commands that set or read deadlines (`SET … EX`, `SETEX`, `GETEX`,
//! `EXPIRE` and its kin, `TTL` and its kin), turned into commands with Redis's errors.

use waymark_core::client::command::{Existing, ExpireIf, Expiry, SetTtl, TtlAsked};
use waymark_core::client::DataCmd;
use waymark_core::{Key, Value};

/// An error reply, with Redis's wording (`command::CmdError` takes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError(pub String);

fn syntax() -> ArgError {
    ArgError("ERR syntax error".into())
}

fn invalid_time(command: &str) -> ArgError {
    ArgError(format!("ERR invalid expire time in '{command}' command"))
}

/// An integer argument, or Redis's error for one that is not (every command's parser uses it).
pub fn integer(arg: &[u8]) -> Result<i64, ArgError> {
    let not_integer = || ArgError("ERR value is not an integer or out of range".into());
    std::str::from_utf8(arg).ok().and_then(|s| s.parse().ok()).ok_or_else(not_integer)
}

/// A relative time in milliseconds as Redis accepts it: its deadline from now fits in an `i64`.
fn relative_ms(ms: i64, command: &str) -> Result<u64, ArgError> {
    // Redis refuses a relative time whose deadline would not fit in a signed 64-bit count of
    // milliseconds ("invalid expire time").
    let now_ms = i64::try_from(crate::clock::now_ms()).unwrap_or(i64::MAX);
    match now_ms.checked_add(ms) {
        Some(_) => Ok(ms.max(0) as u64),
        None => Err(invalid_time(command)),
    }
}

/// `EX`/`PX`/`EXAT`/`PXAT` and its argument as a deadline; `SET`, `SETEX` and `GETEX` take only
/// positive times (Redis: "invalid expire time").
fn positive_expiry(unit: &str, arg: &[u8], command: &str) -> Result<Expiry, ArgError> {
    let n = integer(arg)?;
    if n <= 0 {
        return Err(invalid_time(command));
    }
    let ms = |n: i64| n.checked_mul(1_000).map(|ms| ms as u64).ok_or_else(|| invalid_time(command));
    Ok(match unit {
        "EX" => Expiry::In(relative_ms(ms(n)? as i64, command)?),
        "PX" => Expiry::In(relative_ms(n, command)?),
        "EXAT" => Expiry::At(ms(n)?),
        _ => Expiry::At(n as u64),
    })
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`.
pub fn set(key: Key, value: Value, options: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let (mut only, mut get, mut ttl) = (Existing::Any, false, None::<SetTtl>);
    let mut it = options.into_iter();
    while let Some(opt) = it.next() {
        let opt = String::from_utf8_lossy(&opt).to_ascii_uppercase();
        match opt.as_str() {
            "NX" if only != Existing::Present => only = Existing::Absent,
            "XX" if only != Existing::Absent => only = Existing::Present,
            "GET" => get = true,
            "KEEPTTL" if ttl.is_none() => ttl = Some(SetTtl::Keep),
            "EX" | "PX" | "EXAT" | "PXAT" if ttl.is_none() => {
                let arg = it.next().ok_or_else(syntax)?;
                ttl = Some(SetTtl::Expire(positive_expiry(&opt, &arg, "set")?));
            }
            _ => return Err(syntax()),
        }
    }
    let ttl = ttl.unwrap_or(SetTtl::Clear);
    match (only, get, ttl) {
        (Existing::Any, false, SetTtl::Clear) => Ok(DataCmd::Set(key, value)),
        (Existing::Any, false, SetTtl::Expire(at)) => Ok(DataCmd::SetEx(key, value, at)),
        _ => Ok(DataCmd::SetIf { key, value, only, get, ttl }),
    }
}

/// `SETEX key seconds value` and `PSETEX key milliseconds value`.
pub fn setex(name: &str, key: Key, time: &[u8], value: Value) -> Result<DataCmd, ArgError> {
    let unit = if name == "setex" { "EX" } else { "PX" };
    Ok(DataCmd::SetEx(key, value, positive_expiry(unit, time, name)?))
}

/// `GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]`.
pub fn getex(key: Key, options: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let upper: Vec<String> = options.iter().map(|o| String::from_utf8_lossy(o).to_ascii_uppercase()).collect();
    let ttl = match upper.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => None,
        ["PERSIST"] => Some(SetTtl::Clear),
        [unit @ ("EX" | "PX" | "EXAT" | "PXAT"), _] => {
            Some(SetTtl::Expire(positive_expiry(unit, &options[1], "getex")?))
        }
        _ => return Err(syntax()),
    };
    Ok(DataCmd::GetEx(key, ttl))
}

/// `EXPIRE key seconds [NX|XX|GT|LT]` and `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`: a time in the past
/// (negative ones too) deletes the key.
pub fn expire(name: &str, key: Key, time: &[u8], options: Vec<Vec<u8>>) -> Result<DataCmd, ArgError> {
    let n = integer(time)?;
    let ms = match name {
        "expire" | "expireat" => n.checked_mul(1_000).ok_or_else(|| invalid_time(name))?,
        _ => n,
    };
    let at = match (name.ends_with("at"), ms) {
        (_, ms) if ms < 0 => Expiry::At(0),
        (false, ms) => Expiry::In(relative_ms(ms, name)?),
        (true, ms) => Expiry::At(ms as u64),
    };
    let mut when = ExpireIf::Always;
    for opt in options {
        let next = match String::from_utf8_lossy(&opt).to_ascii_uppercase().as_str() {
            "NX" => ExpireIf::NoDeadline,
            "XX" => ExpireIf::HasDeadline,
            "GT" => ExpireIf::Later,
            "LT" => ExpireIf::Earlier,
            other => return Err(ArgError(format!("ERR Unsupported option {other}"))),
        };
        when = combine(when, next)?;
    }
    Ok(DataCmd::Expire(key, at, when))
}

/// Redis's rules for several of `NX`, `XX`, `GT`, `LT` (`XX` with `GT` or `LT` is allowed: a key
/// without a deadline never passes either of those anyway, except `LT`, which `XX` then refuses).
fn combine(now: ExpireIf, next: ExpireIf) -> Result<ExpireIf, ArgError> {
    use ExpireIf::*;
    match (now, next) {
        (Always, n) => Ok(n),
        (a, b) if a == b => Ok(a),
        (NoDeadline, _) | (_, NoDeadline) => {
            Err(ArgError("ERR NX and XX, GT or LT options at the same time are not compatible".into()))
        }
        (Later, Earlier) | (Earlier, Later) => {
            Err(ArgError("ERR GT and LT options at the same time are not compatible".into()))
        }
        (HasDeadline, Earlier) | (Earlier, HasDeadline) => Ok(EarlierThanItsDeadline),
        (HasDeadline, x) | (x, HasDeadline) => Ok(x),
        (a, _) => Ok(a),
    }
}

/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`.
pub fn ttl(name: &str, key: Key) -> DataCmd {
    let asked = TtlAsked { millis: name.starts_with('p'), absolute: name.ends_with("time") };
    DataCmd::Ttl(key, asked)
}
