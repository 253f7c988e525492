//! Redis's numbered databases on a real 3-host cluster (issue 34): `SELECT 0`–`15`, each its own
//! keys for every command, `KEYS`, `SCAN`, `RANDOMKEY`, `DBSIZE` and `FLUSHDB`; `MOVE` and
//! `COPY … DB` between them as one transaction; a `SELECT` queued in `MULTI`; `FLUSHALL` of all;
//! `SWAPDB` refused with why. Connections on different hosts see the same databases.

mod common;

use common::words::{bulk, cmd, err, scan_all};
use common::{Cluster, Spec};
use redis::{Connection, Value};

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn keys(con: &mut Connection) -> Vec<String> {
    let mut found: Vec<String> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    found.sort();
    found
}

#[test]
fn each_database_holds_its_own_keys_on_every_host() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let mut one = cluster.redis("node1");
    let mut two = cluster.redis("node2");

    assert_eq!(cmd(&mut one, &["SET", "k", "zero"]), Value::Okay);
    assert_eq!(cmd(&mut one, &["SELECT", "1"]), Value::Okay);
    assert_eq!(cmd(&mut one, &["GET", "k"]), Value::Nil, "database 1 does not see database 0's key");
    assert_eq!(cmd(&mut one, &["MSET", "k", "one", "j", "uno"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["GET", "k"]), bulk("zero"), "another connection is in database 0");
    assert_eq!(cmd(&mut two, &["SELECT", "1"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["GET", "k"]), bulk("one"), "database 1 through another host");
    assert_eq!(keys(&mut two), ["j", "k"]);
    assert_eq!(cmd(&mut two, &["DBSIZE"]), int(2));
    assert_eq!(cmd(&mut two, &["SELECT", "0"]), Value::Okay);
    assert_eq!(keys(&mut two), ["k"]);
    assert_eq!(cmd(&mut two, &["DBSIZE"]), int(1));
    assert_eq!(scan_all(&mut two, &[]).0, ["k"], "SCAN lists database 0's keys only");
    assert_eq!(cmd(&mut two, &["RANDOMKEY"]), bulk("k"));
    let client = cmd(&mut one, &["CLIENT", "INFO"]);
    assert!(matches!(&client, Value::BulkString(b) if String::from_utf8_lossy(b).contains(" db=1 ")), "{client:?}");

    // MOVE: to where the key is absent only, with its deadline.
    assert_eq!(cmd(&mut one, &["EXPIRE", "j", "100"]), int(1));
    assert_eq!(cmd(&mut one, &["MOVE", "j", "2"]), int(1));
    assert_eq!(cmd(&mut one, &["MOVE", "k", "0"]), int(0), "database 0 has a k");
    assert_eq!(cmd(&mut one, &["MOVE", "nosuch", "2"]), int(0));
    assert!(err(&mut one, &["MOVE", "k", "1"]).contains("source and destination objects are the same"));
    assert!(err(&mut one, &["MOVE", "k", "16"]).contains("DB index is out of range"));
    assert_eq!(cmd(&mut one, &["SELECT", "2"]), Value::Okay);
    assert_eq!(cmd(&mut one, &["GET", "j"]), bulk("uno"));
    assert!(matches!(cmd(&mut one, &["TTL", "j"]), Value::Int(t) if t > 90 && t <= 100));

    // COPY … DB, then FLUSHDB of one database only.
    assert_eq!(cmd(&mut two, &["COPY", "k", "k", "DB", "5"]), int(1));
    assert_eq!(cmd(&mut two, &["SELECT", "5"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["GET", "k"]), bulk("zero"));
    assert_eq!(cmd(&mut two, &["FLUSHDB"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["DBSIZE"]), int(0));
    assert_eq!(cmd(&mut two, &["SELECT", "0"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["GET", "k"]), bulk("zero"), "FLUSHDB in database 5 left database 0");

    // A SELECT queued in MULTI: for the commands after it, and the connection once EXEC ran it.
    let replies = cmd(&mut two, &["MULTI"]);
    assert_eq!(replies, Value::Okay);
    for words in [&["SELECT", "3"][..], &["SET", "m", "3"], &["SELECT", "4"], &["SET", "m", "4"]] {
        assert_eq!(cmd(&mut two, words), Value::SimpleString("QUEUED".into()));
    }
    let Value::Array(replies) = cmd(&mut two, &["EXEC"]) else { panic!("EXEC answers an array") };
    assert_eq!(replies.len(), 4);
    assert_eq!(cmd(&mut two, &["GET", "m"]), bulk("4"), "the connection is in database 4 after EXEC");
    assert_eq!(cmd(&mut two, &["SELECT", "3"]), Value::Okay);
    assert_eq!(cmd(&mut two, &["GET", "m"]), bulk("3"));

    // Limits and refusals.
    assert!(err(&mut two, &["SELECT", "16"]).contains("DB index is out of range"));
    assert!(err(&mut two, &["SWAPDB", "0", "1"]).contains("SWAPDB is not supported"));
    let reserved = redis::cmd("SET").arg(&b"\xff\xfewaymark-db\x01k"[..]).arg("v").query::<Value>(&mut one);
    assert!(reserved.is_ok(), "in database 2 the prefix is an ordinary key's start: {reserved:?}");
    assert_eq!(cmd(&mut one, &["SELECT", "0"]), Value::Okay);
    let refused = redis::cmd("SET").arg(&b"\xff\xfewaymark-db\x01k"[..]).arg("v").query::<Value>(&mut one);
    assert!(refused.is_err_and(|e| e.to_string().contains("Waymark stores databases")), "database 0 refuses it");

    // INFO keyspace lists each database that holds keys; FLUSHALL empties them all.
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut one).expect("INFO");
    for line in ["db0:keys=1,expires=0,avg_ttl=0", "db1:keys=1,expires=0,", "db2:keys=2,expires=1,", "db3:keys=1,"] {
        assert!(info.contains(line), "{line} in {info}");
    }
    // j moved to database 2 with 100 s to live: the mean time left of its one expiring key.
    let db2 = info.lines().find(|l| l.starts_with("db2:")).expect("db2's line");
    let avg_ttl: u64 = db2.rsplit("avg_ttl=").next().and_then(|t| t.trim().parse().ok()).expect("avg_ttl");
    assert!((80_000..=100_000).contains(&avg_ttl), "{db2}");
    assert_eq!(cmd(&mut one, &["FLUSHALL"]), Value::Okay);
    for db in ["0", "1", "2", "3", "4"] {
        assert_eq!(cmd(&mut one, &["SELECT", db]), Value::Okay);
        assert_eq!(cmd(&mut one, &["DBSIZE"]), int(0), "database {db} after FLUSHALL");
    }
}
