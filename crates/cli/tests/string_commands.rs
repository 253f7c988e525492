//! The string and keyspace commands that need no expiry (issue 34) answer as Redis does on a real
//! 3-host cluster, alone and inside `MULTI`/`EXEC`, with keys whose primaries are on different
//! hosts — each command one serializable transaction, evaluated by the core's client.

mod common;

use common::words::{bulk, cmd, err, scan_all, scan_from};
use common::{Cluster, Spec};
use redis::Value;
use std::time::Duration;

fn ok() -> Value {
    Value::Okay
}

#[test]
fn string_and_keyspace_commands_answer_as_redis_does_across_hosts() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let keys = cluster.key_per_primary();
    let (a, b, c) = (keys[0].as_str(), keys[1].as_str(), keys[2].as_str());
    let mut con = cluster.redis("node1");
    let mut other = cluster.redis("node3");

    // SET's conditions and GET, SETNX, GETSET, GETDEL.
    assert_eq!(cmd(&mut con, &["SET", a, "1", "NX"]), ok());
    assert_eq!(cmd(&mut con, &["SET", a, "2", "NX"]), Value::Nil);
    assert_eq!(cmd(&mut con, &["SET", a, "3", "XX", "GET"]), bulk("1"));
    assert_eq!(cmd(&mut con, &["SET", b, "x", "XX"]), Value::Nil);
    assert_eq!(cmd(&mut con, &["SETNX", b, "x"]), Value::Int(1));
    assert_eq!(cmd(&mut con, &["SETNX", b, "y"]), Value::Int(0));
    assert_eq!(cmd(&mut con, &["GETSET", b, "z"]), bulk("x"));
    assert_eq!(cmd(&mut other, &["GETDEL", b]), bulk("z"));
    assert_eq!(cmd(&mut con, &["EXISTS", b]), Value::Int(0));
    assert!(err(&mut con, &["SET", a, "1", "EX", "0"]).contains("invalid expire time in 'set' command"));
    assert!(err(&mut con, &["SET", a, "1", "NX", "XX"]).contains("syntax error"));

    // Ranges.
    assert_eq!(cmd(&mut con, &["SET", c, "Hello World"]), ok());
    assert_eq!(cmd(&mut con, &["SETRANGE", c, "6", "Redis"]), Value::Int(11));
    assert_eq!(cmd(&mut other, &["GETRANGE", c, "-5", "-1"]), bulk("Redis"));
    assert_eq!(cmd(&mut other, &["SUBSTR", c, "0", "4"]), bulk("Hello"));
    assert!(err(&mut con, &["SETRANGE", c, "-1", "x"]).contains("offset is out of range"));

    // Floats.
    assert_eq!(cmd(&mut con, &["SET", b, "10.5"]), ok());
    assert_eq!(cmd(&mut con, &["INCRBYFLOAT", b, "0.1"]), bulk("10.6"));
    assert_eq!(cmd(&mut con, &["INCRBYFLOAT", b, "-5.6"]), bulk("5"));
    assert!(err(&mut con, &["INCRBYFLOAT", c, "1"]).contains("not a valid float"));
    assert!(err(&mut con, &["INCRBYFLOAT", b, "abc"]).contains("not a valid float"));
    assert!(err(&mut con, &["INCRBYFLOAT", b, "+inf"]).contains("would produce NaN or Infinity"));

    // Bits, LCS, GETEX.
    assert_eq!(cmd(&mut con, &["SETBIT", c, "7", "0"]), Value::Int(0));
    assert_eq!(cmd(&mut other, &["GETBIT", c, "1"]), Value::Int(1), "'H' is 0x48");
    assert_eq!(cmd(&mut con, &["SET", a, "ohmytext"]), ok());
    assert_eq!(cmd(&mut con, &["SET", b, "mynewtext"]), ok());
    assert_eq!(cmd(&mut other, &["LCS", a, b]), bulk("mytext"));
    assert_eq!(cmd(&mut other, &["LCS", a, b, "LEN"]), Value::Int(6));
    assert_eq!(cmd(&mut other, &["GETEX", a]), bulk("ohmytext"));
    assert!(err(&mut con, &["GETEX", a, "EX", "0"]).contains("invalid expire time in 'getex' command"));
    assert_eq!(cmd(&mut con, &["MSET", a, "3", b, "5"]), ok());

    // The keyspace: TYPE, RENAME across hosts, RENAMENX, COPY, TOUCH, UNLINK, MSETNX.
    assert_eq!(cmd(&mut con, &["TYPE", a]), Value::SimpleString("string".into()));
    assert_eq!(cmd(&mut con, &["RENAME", a, b]), ok());
    assert_eq!(cmd(&mut other, &["MGET", a, b]), Value::Array(vec![Value::Nil, bulk("3")]));
    assert_eq!(cmd(&mut con, &["TYPE", a]), Value::SimpleString("none".into()));
    assert!(err(&mut con, &["RENAME", a, b]).contains("no such key"));
    assert_eq!(cmd(&mut con, &["RENAMENX", b, c]), Value::Int(0));
    assert_eq!(cmd(&mut con, &["COPY", c, a]), Value::Int(1));
    assert_eq!(cmd(&mut con, &["COPY", b, a]), Value::Int(0));
    assert_eq!(cmd(&mut con, &["COPY", b, a, "REPLACE"]), Value::Int(1));
    assert_eq!(cmd(&mut other, &["GET", a]), bulk("3"));
    assert_eq!(cmd(&mut con, &["TOUCH", a, b, "nokey"]), Value::Int(2));
    assert_eq!(cmd(&mut con, &["UNLINK", a, b]), Value::Int(2));
    assert_eq!(cmd(&mut con, &["MSETNX", a, "1", c, "2"]), Value::Int(0));
    assert_eq!(cmd(&mut con, &["MSETNX", a, "1", b, "2"]), Value::Int(1));
    assert_eq!(cmd(&mut other, &["MGET", a, b]), Value::Array(vec![bulk("1"), bulk("2")]));

    // Inside MULTI/EXEC, each command sees the ones before it.
    let replies: Value = redis::pipe()
        .atomic()
        .cmd("GETSET")
        .arg(a)
        .arg("10")
        .cmd("INCRBYFLOAT")
        .arg(a)
        .arg("0.5")
        .cmd("RENAME")
        .arg(a)
        .arg(c)
        .cmd("GETRANGE")
        .arg(c)
        .arg(0)
        .arg(1)
        .query(&mut con)
        .expect("EXEC");
    assert_eq!(replies, Value::Array(vec![bulk("1"), bulk("10.5"), ok(), bulk("10")]));
    assert_eq!(cmd(&mut other, &["MGET", a, c]), Value::Array(vec![Value::Nil, bulk("10.5")]));
}

#[test]
fn scan_keys_randomkey_and_flushall_see_the_whole_keyspace_from_any_host() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let mut con = cluster.redis("node1");
    let mut other = cluster.redis("node2");
    let mut pairs: Vec<(String, String)> = (0..300).map(|i| (format!("user:{i}"), i.to_string())).collect();
    pairs.push(("other".into(), "x".into()));
    redis::cmd("MSET").arg(&pairs).query::<()>(&mut con).expect("MSET");

    // The whole cluster's keys, from any host (each primary applies a commit soon after it is
    // acknowledged, so the count may lag an instant).
    common::poll("DBSIZE to count every key", Duration::from_secs(5), || {
        match redis::cmd("DBSIZE").query::<i64>(&mut other) {
            Ok(301) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });

    let (mut keys, pages) = scan_all(&mut other, &["COUNT", "7"]);
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 301, "every key, from another host");
    assert!(pages > 2, "several pages");
    let (users, _) = scan_all(&mut con, &["MATCH", "user:1?", "COUNT", "50"]);
    assert_eq!(users.len(), 10);
    let (strings, _) = scan_all(&mut con, &["TYPE", "hash"]);
    assert!(strings.is_empty(), "no hashes");

    let mut matched: Vec<String> = redis::cmd("KEYS").arg("user:2[0-4]").query(&mut other).expect("KEYS");
    matched.sort();
    assert_eq!(matched, vec!["user:20", "user:21", "user:22", "user:23", "user:24"]);
    let random: String = redis::cmd("RANDOMKEY").query(&mut con).expect("RANDOMKEY");
    assert!(pairs.iter().any(|(k, _)| *k == random), "{random} is a key");
    assert!(err(&mut con, &["SCAN", "x"]).contains("invalid cursor"));

    // A cursor this connection never handed out restarts its partition: keys may repeat, none
    // is lost.
    let (next, _): (String, Vec<String>) = redis::cmd("SCAN").arg("0").query(&mut con).expect("SCAN");
    let (more, _) = scan_from(&mut other, &next, &[]);
    assert!(!more.is_empty());

    assert_eq!(cmd(&mut con, &["FLUSHALL"]), ok());
    assert_eq!(cmd(&mut other, &["DBSIZE"]), Value::Int(0));
    let none: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut other).expect("KEYS");
    assert!(none.is_empty());
    assert_eq!(cmd(&mut con, &["RANDOMKEY"]), Value::Nil);
    assert_eq!(cmd(&mut con, &["FLUSHDB", "ASYNC"]), ok());
}
