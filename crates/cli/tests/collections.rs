//! Hashes and sets on 3 hosts (issue 35): a field written on one host is read on every other,
//! counters in a hash stay exact under concurrent `HINCRBY`s from every host inside `MULTI`,
//! members moved between sets from every host are neither lost nor doubled, and a snapshot
//! restores collections.

mod common;

use common::words::{bulk, cmd, err};
use common::{replicas_agree, restore_and_start, waymark_said, Cluster, Spec};
use redis::Value;
use std::time::Duration;

const SNAPSHOT_WITHIN: Duration = Duration::from_secs(120);

fn int(v: Value) -> i64 {
    match v {
        Value::Int(n) => n,
        other => panic!("an integer expected, got {other:?}"),
    }
}

#[test]
fn a_hash_written_on_one_host_reads_the_same_on_every_host_and_survives_a_snapshot() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let mut one = cluster.redis("node1");
    assert_eq!(int(cmd(&mut one, &["HSET", "user:1", "name", "ada", "born", "1815", "lang", "en"])), 3);
    assert_eq!(int(cmd(&mut one, &["HSET", "user:1", "lang", "fr"])), 0, "an existing field is not new");
    assert_eq!(int(cmd(&mut one, &["HDEL", "user:1", "lang", "nope"])), 1);
    for host in ["node1", "node2", "node3"] {
        let mut c = cluster.redis(host);
        let all: Vec<String> = redis::cmd("HGETALL").arg("user:1").query(&mut c).expect("HGETALL");
        assert_eq!(all, ["born", "1815", "name", "ada"], "on {host}");
        assert_eq!(cmd(&mut c, &["TYPE", "user:1"]), Value::SimpleString("hash".into()));
        assert!(err(&mut c, &["GET", "user:1"]).contains("WRONGTYPE"), "on {host}");
        assert_eq!(int(cmd(&mut c, &["DBSIZE"])), 1, "fields are not keys, on {host}");
    }
    cluster.settled(Duration::from_secs(30));
    let stores = cluster.store_vnodes().expect("status of every store vnode");
    replicas_agree(&stores, 2).expect("replicas agree");

    let dir = cluster.dir().display().to_string();
    let (ok, said) = waymark_said(&["snapshot", "create", "hashes", "--dir", &dir], SNAPSHOT_WITHIN);
    assert!(ok, "snapshot create:\n{said}");
    assert_eq!(int(cmd(&mut one, &["HSET", "user:1", "after", "snapshot"])), 1);
    let restored = restore_and_start(&dir, "hashes", 2, SNAPSHOT_WITHIN);
    let mut r = restored.redis("node2");
    let all: Vec<String> = redis::cmd("HGETALL").arg("user:1").query(&mut r).expect("HGETALL");
    assert_eq!(all, ["born", "1815", "name", "ada"], "the restore holds the hash as the snapshot saw it");
    assert_eq!(cmd(&mut r, &["HGET", "user:1", "after"]), Value::Nil);
}

/// Clients on every host add to the fields of one hash, each `HINCRBY` in a `MULTI` with an
/// `INCRBY` of a plain counter: every field ends at what was added to it, and the counter at
/// their sum.
#[test]
fn concurrent_hincrbys_from_every_host_add_up_exactly() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let (clients, rounds) = (6usize, 40i64);
    std::thread::scope(|s| {
        for c in 0..clients {
            let host = format!("node{}", c % 3 + 1);
            let mut con = cluster.redis(&host);
            s.spawn(move || {
                for round in 0..rounds {
                    let field = format!("f{}", round % 4);
                    // Six clients on one hash: a transaction that loses to conflicts 16 times in
                    // a row is refused ("try again"), and a client tries it again, as told. (The
                    // commands go one by one: a pipelined `MULTI` hides `EXEC`'s error text.)
                    let mut tries = 0;
                    let replies: (i64, i64) = loop {
                        let queue = |args: &[&str], con: &mut redis::Connection| {
                            let mut cmd = redis::cmd(args[0]);
                            cmd.arg(&args[1..]);
                            cmd.query::<redis::Value>(con).unwrap_or_else(|e| panic!("client {c} {args:?}: {e}"))
                        };
                        queue(&["MULTI"], &mut con);
                        queue(&["HINCRBY", "counters", &field, "1"], &mut con);
                        queue(&["INCRBY", "total", "1"], &mut con);
                        match redis::cmd("EXEC").query::<(i64, i64)>(&mut con) {
                            Err(e) if e.to_string().contains("try again") && tries < 20 => tries += 1,
                            other => break other.unwrap_or_else(|e| panic!("client {c} round {round}: {e}")),
                        }
                    };
                    assert!(replies.0 >= 1 && replies.1 >= 1);
                }
            });
        }
    });
    let mut con = cluster.redis("node2");
    let total = clients as i64 * rounds;
    assert_eq!(cmd(&mut con, &["GET", "total"]), bulk(&total.to_string()));
    let fields: Vec<i64> = redis::cmd("HVALS").arg("counters").query(&mut con).expect("HVALS");
    assert_eq!(fields.len(), 4);
    assert_eq!(fields.iter().sum::<i64>(), total, "the fields add up to the counter");
    assert!(fields.iter().all(|f| *f == total / 4), "each field got its share: {fields:?}");
    assert_eq!(int(cmd(&mut con, &["HLEN", "counters"])), 4);
}

/// Clients on every host move members between two sets (on different partitions) with `SMOVE`,
/// and union them into a third with `SUNIONSTORE`: no member is lost or in both sets at once.
#[test]
fn members_moved_between_sets_from_every_host_are_never_lost_or_doubled() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let members: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut con = cluster.redis("node1");
    let mut add = vec!["SADD", "left"];
    add.extend(members.iter().map(String::as_str));
    assert_eq!(int(cmd(&mut con, &add)), 20);
    std::thread::scope(|s| {
        for c in 0..6usize {
            let mut con = cluster.redis(&format!("node{}", c % 3 + 1));
            let members = &members;
            s.spawn(move || {
                for round in 0..30 {
                    let m = &members[(c * 7 + round) % members.len()];
                    let (from, to) = if round % 2 == 0 { ("left", "right") } else { ("right", "left") };
                    let moved: i64 = redis::cmd("SMOVE").arg(from).arg(to).arg(m).query(&mut con).expect("SMOVE");
                    assert!(moved == 0 || moved == 1);
                }
            });
        }
    });
    let mut con = cluster.redis("node3");
    let left: Vec<String> = redis::cmd("SMEMBERS").arg("left").query(&mut con).expect("SMEMBERS");
    let right: Vec<String> = redis::cmd("SMEMBERS").arg("right").query(&mut con).expect("SMEMBERS");
    assert_eq!(left.len() + right.len(), 20, "left {left:?} right {right:?}");
    assert_eq!(int(cmd(&mut con, &["SINTERCARD", "2", "left", "right"])), 0, "a member in both sets");
    assert_eq!(int(cmd(&mut con, &["SUNIONSTORE", "all", "left", "right"])), 20);
    assert_eq!(int(cmd(&mut con, &["SCARD", "all"])), 20);
    assert_eq!(int(cmd(&mut con, &["SCARD", "left"])), left.len() as i64, "SCARD counts the members");
}
