//! Keys expire on a real 3-host cluster (issue 34): `SET … PX`, `EXPIRE` and its kin, `TTL` and
//! its kin, `PERSIST`, inside `MULTI` too; every host agrees once a key's deadline passed; the
//! active expiry removes keys nobody reads; and a key expired and read as gone never comes back —
//! not on its promoted replica after its primary's host is killed, not after that host returns.

mod common;

use common::words::{bulk, cmd, try_cmd};
use common::{key_with_primary, poll, restore_and_start, wait_bounded, waymark_said, Cluster, Spec};
use redis::{Connection, Value};
use std::time::{Duration, Instant};

/// How long the failover may take to make a killed host's replicas primaries.
const FAILOVER_WITHIN: Duration = Duration::from_secs(20);
/// How long the active expiry may take to remove a key nobody reads.
const ACTIVE_WITHIN: Duration = Duration::from_secs(10);
/// How long one `waymark snapshot` command may take (a debug build on 2 shared cores).
const SNAPSHOT_WITHIN: Duration = Duration::from_secs(120);

fn waymark(words: &[&str]) -> (bool, String) {
    waymark_said(words, SNAPSHOT_WITHIN)
}

fn int(con: &mut Connection, words: &[&str]) -> i64 {
    match cmd(con, words) {
        Value::Int(n) => n,
        other => panic!("{words:?} answered {other:?}, not an integer"),
    }
}

/// Sleeps until `deadline` has passed by this machine's clock (the hosts share it).
fn sleep_past(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now + Duration::from_millis(50));
    }
}

#[test]
fn keys_expire_alike_on_every_host_and_ttls_answer_as_redis_does() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let keys = cluster.key_per_primary();
    let (a, b, c) = (keys[0].as_str(), keys[1].as_str(), keys[2].as_str());
    let mut con = cluster.redis("node1");
    let mut others = [cluster.redis("node2"), cluster.redis("node3")];

    let set_at = Instant::now();
    assert_eq!(cmd(&mut con, &["SET", a, "short", "PX", "600"]), Value::Okay);
    assert_eq!(cmd(&mut con, &["SETEX", b, "100", "long"]), Value::Okay);
    assert_eq!(cmd(&mut con, &["SET", c, "kept"]), Value::Okay);
    let pttl = int(&mut con, &["PTTL", a]);
    assert!((1..=600).contains(&pttl), "PTTL {pttl}");
    assert_eq!(int(&mut con, &["TTL", b]), 100);
    assert_eq!(int(&mut con, &["TTL", c]), -1);
    assert_eq!(int(&mut con, &["TTL", "no-such-key"]), -2);
    let at = int(&mut con, &["EXPIRETIME", b]);
    let unix_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((unix_s + 98..=unix_s + 101).contains(&at), "EXPIRETIME {at} at {unix_s}");
    for other in others.iter_mut() {
        assert_eq!(cmd(other, &["GET", a]), bulk("short"), "every host reads it before its deadline");
    }

    // EXPIRE's conditions: GT against no deadline (infinite) fails, NX sets, XX LT shortens.
    assert_eq!(int(&mut con, &["EXPIRE", c, "50", "GT"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", c, "50", "NX"]), 1);
    assert_eq!(int(&mut con, &["EXPIRE", c, "80", "XX", "LT"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", c, "20", "XX", "LT"]), 1);
    assert_eq!(int(&mut con, &["TTL", c]), 20);
    assert_eq!(int(&mut con, &["PERSIST", c]), 1);
    assert_eq!(int(&mut con, &["PERSIST", c]), 0);
    assert_eq!(int(&mut con, &["TTL", c]), -1);
    // APPEND keeps the deadline, SET clears it, KEEPTTL keeps it, GETEX sets it.
    assert_eq!(int(&mut con, &["APPEND", b, "er"]), 6);
    assert_eq!(int(&mut con, &["TTL", b]), 100);
    assert_eq!(cmd(&mut con, &["SET", b, "again", "KEEPTTL"]), Value::Okay);
    assert_eq!(int(&mut con, &["TTL", b]), 100);
    assert_eq!(cmd(&mut con, &["GETEX", c, "EX", "30"]), bulk("kept"));
    assert_eq!(int(&mut con, &["TTL", c]), 30);
    assert_eq!(cmd(&mut con, &["SET", c, "plain"]), Value::Okay);
    assert_eq!(int(&mut con, &["TTL", c]), -1);
    // Inside MULTI, across keys on three primaries, one transaction.
    redis::cmd("MULTI").query::<()>(&mut con).unwrap();
    for words in [&["SET", c, "m", "EX", "40"][..], &["TTL", c], &["PEXPIRE", b, "900000"], &["TTL", b]] {
        assert_eq!(cmd(&mut con, words), Value::SimpleString("QUEUED".into()));
    }
    let exec = cmd(&mut con, &["EXEC"]);
    assert_eq!(exec, Value::Array(vec![Value::Okay, Value::Int(40), Value::Int(1), Value::Int(900)]));
    // Errors as Redis words them.
    let e = try_cmd(&mut con, &["SET", a, "x", "EX", "0"]).unwrap_err().to_string();
    assert!(e.contains("invalid expire time in 'set' command"), "{e}");
    let e = try_cmd(&mut con, &["EXPIRE", a, "1", "NX", "XX"]).unwrap_err().to_string();
    assert!(e.contains("not compatible"), "{e}");

    // Past the deadline: gone on every host, whoever asks first.
    sleep_past(set_at + Duration::from_millis(600));
    assert_eq!(cmd(&mut others[1], &["GET", a]), Value::Nil);
    assert_eq!(cmd(&mut con, &["GET", a]), Value::Nil);
    assert_eq!(int(&mut others[0], &["EXISTS", a]), 0);
    assert_eq!(int(&mut con, &["TTL", a]), -2);
    // A deadline already past deletes at once (EXPIRE with a negative time).
    assert_eq!(int(&mut con, &["EXPIRE", b, "-1"]), 1);
    assert_eq!(cmd(&mut others[0], &["GET", b]), Value::Nil);
}

/// The active expiry: keys nobody reads leave `DBSIZE` once their deadline passed.
#[test]
fn keys_nobody_reads_are_expired_by_their_primaries() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let mut con = cluster.redis("node2");
    for i in 0..40 {
        assert_eq!(cmd(&mut con, &["SET", &format!("session:{i}"), "x", "PX", "300"]), Value::Okay);
    }
    assert_eq!(cmd(&mut con, &["SET", "stays", "y"]), Value::Okay);
    assert_eq!(int(&mut con, &["DBSIZE"]), 41);
    poll("the 40 keys with a deadline leave DBSIZE", ACTIVE_WITHIN, || match int(&mut con, &["DBSIZE"]) {
        1 => Ok(()),
        n => Err(format!("DBSIZE {n}")),
    });
    assert_eq!(cmd(&mut con, &["GET", "stays"]), bulk("y"));
}

/// A key read as gone after its deadline is never read again: its primary committed the expiry
/// through the chain before anyone was told, so the promoted replica has it — even if its clock
/// were behind — and so does the old primary's host when it returns.
#[test]
fn an_expired_key_never_comes_back_after_its_primary_dies_and_returns() {
    let mut cluster = Cluster::start(&Spec::new(3, 2));
    let topology = cluster.topology();
    let key = key_with_primary(&topology, "expiring", "store0@node2");
    let mut con = cluster.redis("node1");
    let set_at = Instant::now();
    assert_eq!(cmd(&mut con, &["SET", &key, "v", "PX", "400"]), Value::Okay);
    assert_eq!(cmd(&mut con, &["SET", "later", "w", "EX", "300"]), Value::Okay);
    sleep_past(set_at + Duration::from_millis(400));
    assert_eq!(cmd(&mut con, &["GET", &key]), Value::Nil, "read as gone");

    cluster.kill("node2");
    poll("the key's replica serves it after the failover", FAILOVER_WITHIN, || {
        match try_cmd(&mut con, &["GET", &key]) {
            Ok(Value::Nil) => Ok(()),
            Ok(other) => panic!("the expired key came back on the promoted replica: {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    });
    cluster.spawn("node2");
    cluster.wait_serving("node2");
    let mut back = cluster.redis("node2");
    for c in [&mut con, &mut back] {
        assert_eq!(cmd(c, &["GET", &key]), Value::Nil);
        assert_eq!(int(c, &["EXISTS", &key]), 0);
        let ttl = int(c, &["TTL", "later"]);
        assert!((290..=300).contains(&ttl), "a deadline outlives the failover and the return: TTL {ttl}");
    }
}

/// A restored snapshot keeps absolute deadlines: a key whose deadline passed while it lay in the
/// snapshot is gone at its first read after the restore, on every host; one still to come keeps
/// its time left.
#[test]
fn a_restored_snapshot_keeps_deadlines_and_what_expired_meanwhile_is_gone() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let keys = cluster.key_per_primary();
    let (short, long, plain) = (keys[0].as_str(), keys[1].as_str(), keys[2].as_str());
    let mut con = cluster.redis("node3");
    let set_at = Instant::now();
    assert_eq!(cmd(&mut con, &["SET", short, "s", "PX", "1500"]), Value::Okay);
    assert_eq!(cmd(&mut con, &["SET", long, "l", "EX", "600"]), Value::Okay);
    assert_eq!(cmd(&mut con, &["SET", plain, "p"]), Value::Okay);
    let dir = cluster.dir().display().to_string();
    let (ok, text) = waymark(&["snapshot", "create", "ttl", "--dir", &dir]);
    assert!(ok, "snapshot create:\n{text}");
    assert!(set_at.elapsed() < Duration::from_millis(1500), "the snapshot was taken before the short deadline");
    let restored = restore_and_start(&dir, "ttl", 2, SNAPSHOT_WITHIN);
    sleep_past(set_at + Duration::from_millis(1500));
    for name in ["node1", "node2"] {
        let mut c = restored.redis(name);
        assert_eq!(cmd(&mut c, &["GET", short]), Value::Nil, "expired while it lay in the snapshot");
        assert_eq!(cmd(&mut c, &["GET", long]), bulk("l"));
        let ttl = int(&mut c, &["TTL", long]);
        assert!((580..=600).contains(&ttl), "the deadline came through the restore: TTL {ttl}");
        assert_eq!(int(&mut c, &["TTL", plain]), -1);
    }
}

/// A cache with expiry and a fixed-window rate limiter, as applications write them with redis-py
/// 8 from PyPI (`tests/py/requirements.txt`, which scripts/test installs into `tests/py/site`;
/// RESP3 by default, as the connection's `CLIENT INFO` confirms), against three hosts: `SET … EX`, `GET`,
/// `TTL`, and `INCR` + `EXPIRE NX` in a pipeline transaction, the window's count resetting once it
/// expires.
#[test]
fn a_cache_and_a_rate_limiter_written_with_redis_py_work_on_three_hosts() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let ports: Vec<String> =
        ["node1", "node2", "node3"].iter().map(|h| cluster.host(h).redis_addr().port().to_string()).collect();
    let script = format!(
        r#"
import redis, time
assert redis.__version__.startswith("8."), redis.__version__
hosts = [redis.Redis(host="127.0.0.1", port=p) for p in ({ports})]
assert str(hosts[0].client_info()["resp"]) == "3", hosts[0].client_info()
cache = hosts[0]
cache.set("page:/home", "<html>", ex=1)
assert hosts[1].get("page:/home") == b"<html>", "the cache reads the same on another host"
assert 0 < hosts[2].ttl("page:/home") <= 1
def allowed(r, who, limit):
    p = r.pipeline(transaction=True)
    p.incr("rate:" + who)
    p.expire("rate:" + who, 1, nx=True)
    count, _ = p.execute()
    return count <= limit
verdicts = [allowed(hosts[i % 3], "alice", 3) for i in range(5)]
assert verdicts == [True, True, True, False, False], verdicts
assert 0 < hosts[1].pttl("rate:alice") <= 1000
time.sleep(1.2)
assert hosts[2].get("page:/home") is None, "the cached page expired"
assert allowed(hosts[1], "alice", 3), "a new window after the old one expired"
print("ok")
"#,
        ports = ports.join(", ")
    );
    let site = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/site");
    assert!(site.join("redis").is_dir(), "{} has no redis-py: run scripts/test (it pip-installs it)", site.display());
    let child = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(&script)
        .env("PYTHONPATH", &site)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("Debian's python3 runs");
    let out = wait_bounded(child, Duration::from_secs(60), "redis-py");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim() == "ok", "redis-py cache and rate limiter:\n{said}");
}
