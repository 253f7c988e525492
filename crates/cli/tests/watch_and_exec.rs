//! `WATCH`, `MULTI` and `EXEC` keep Redis's meaning on a real 3-host cluster, whichever way the
//! session runs them: increments evaluated at the primaries with the watched versions as read
//! checks, reads sent together, and an `MGET` of keys unchanged since their `WATCH` answered
//! without a commit (`resp/session.rs`).

mod common;

use common::{Cluster, Spec};
use redis::Connection;

fn transfer(con: &mut Connection, from: &str, to: &str, amount: i64) -> Option<(i64, i64)> {
    redis::pipe()
        .atomic()
        .cmd("DECRBY")
        .arg(from)
        .arg(amount)
        .cmd("INCRBY")
        .arg(to)
        .arg(amount)
        .query(con)
        .expect("EXEC")
}

fn watch(con: &mut Connection, keys: &[&str]) {
    redis::cmd("WATCH").arg(keys).query::<()>(con).expect("WATCH");
}

fn mget(con: &mut Connection, keys: &[&str]) -> Vec<Option<i64>> {
    redis::cmd("MGET").arg(keys).query(con).expect("MGET")
}

#[test]
fn watch_multi_and_exec_answer_as_redis_does() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let keys = cluster.key_per_primary();
    let (a, b) = (keys[0].as_str(), keys[1].as_str());
    let mut con = cluster.redis("node1");
    let mut other = cluster.redis("node2");
    redis::cmd("MSET").arg(&[(a, 100), (b, 100)]).query::<()>(&mut con).expect("MSET");

    // A watched pair read, then moved: both increments' results come back.
    watch(&mut con, &[a, b]);
    assert_eq!(mget(&mut con, &[a, b]), vec![Some(100), Some(100)]);
    assert_eq!(transfer(&mut con, a, b, 30), Some((70, 130)));
    assert_eq!(mget(&mut other, &[a, b]), vec![Some(70), Some(130)], "seen through another host");

    // A watched key another client wrote: EXEC answers nil and writes nothing.
    watch(&mut con, &[a, b]);
    redis::cmd("SET").arg(b).arg(500).query::<()>(&mut other).expect("SET");
    assert_eq!(transfer(&mut con, a, b, 30), None, "EXEC after a watched key moved");
    assert_eq!(mget(&mut other, &[a, b]), vec![Some(70), Some(500)]);

    // An MGET after the WATCH sees the write that moved a key since (it is not answered from
    // the versions watched), and EXEC then fails.
    watch(&mut con, &[a, b]);
    redis::cmd("INCRBY").arg(a).arg(1).query::<()>(&mut other).expect("INCRBY");
    assert_eq!(mget(&mut con, &[a, b]), vec![Some(71), Some(500)]);
    assert_eq!(transfer(&mut con, a, b, 1), None);

    // A read-only EXEC that does not read every watched key again still checks them all.
    watch(&mut con, &[a, b]);
    redis::cmd("SET").arg(a).arg(5).query::<()>(&mut other).expect("SET");
    let got: Option<(Option<i64>,)> = redis::pipe().atomic().cmd("GET").arg(b).query(&mut con).expect("EXEC");
    assert_eq!(got, None, "EXEC of GET b after the watched a moved");

    // INCRBY on text inside MULTI: that command answers an error, the others still apply.
    redis::cmd("SET").arg(a).arg("text").query::<()>(&mut con).expect("SET");
    redis::cmd("MULTI").query::<()>(&mut con).expect("MULTI");
    redis::cmd("INCRBY").arg(a).arg(1).query::<()>(&mut con).expect("QUEUED");
    redis::cmd("INCRBY").arg(b).arg(1).query::<()>(&mut con).expect("QUEUED");
    // (The client turns an error inside EXEC's array into an error of the whole reply.)
    let replies: redis::RedisResult<redis::Value> = redis::cmd("EXEC").query(&mut con);
    let e = replies.expect_err("INCRBY of text answers an error");
    assert!(e.to_string().contains("not an integer"), "{e}");
    assert_eq!(mget(&mut other, &[b]), vec![Some(501)]);
}
