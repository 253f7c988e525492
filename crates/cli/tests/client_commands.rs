//! The connection commands Redis clients and tools send (issue 34): `CLIENT LIST`, `CLIENT INFO`,
//! `CLIENT KILL` (both forms), `CLIENT SETINFO`, `CLIENT NO-EVICT`, `RESET` and `OBJECT ENCODING`,
//! on a real host with a password.

mod common;

use common::{Cluster, Spec};
use redis::{Connection, Value};

fn text(con: &mut Connection, words: &[&str]) -> String {
    let mut c = redis::cmd(words[0]);
    for w in &words[1..] {
        c.arg(*w);
    }
    c.query::<String>(con).unwrap_or_else(|e| panic!("{words:?}: {e}"))
}

fn value(con: &mut Connection, words: &[&str]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(words[0]);
    for w in &words[1..] {
        c.arg(*w);
    }
    c.query::<Value>(con)
}

/// The `key=value` fields of the line of `CLIENT LIST` whose `name` is `name`.
fn line_named<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines().find(|l| l.split(' ').any(|f| f == format!("name={name}")))
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ').find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn client_list_shows_each_connection_and_client_kill_closes_the_one_named() {
    let cluster = Cluster::start(&Spec::new(1, 1).with_password());
    let mut a = cluster.redis("node1");
    let mut b = cluster.redis("node1");
    assert_eq!(text(&mut a, &["CLIENT", "SETNAME", "alpha"]), "OK");
    assert_eq!(text(&mut b, &["CLIENT", "SETNAME", "beta"]), "OK");
    assert_eq!(text(&mut a, &["CLIENT", "SETINFO", "LIB-NAME", "waymark-test"]), "OK");
    assert_eq!(text(&mut a, &["CLIENT", "NO-EVICT", "on"]), "OK");

    let list = text(&mut a, &["CLIENT", "LIST"]);
    let alpha = line_named(&list, "alpha").unwrap_or_else(|| panic!("alpha in {list}"));
    let beta = line_named(&list, "beta").unwrap_or_else(|| panic!("beta in {list}"));
    assert_eq!(field(alpha, "cmd"), Some("client|list"), "{alpha}");
    assert_eq!(field(alpha, "lib-name"), Some("waymark-test"), "{alpha}");
    assert_eq!(field(beta, "user"), Some("default"), "{beta}");
    let info = text(&mut a, &["CLIENT", "INFO"]);
    assert_eq!(field(&info, "id"), field(alpha, "id"), "CLIENT INFO is the caller's line: {info}");
    assert_eq!(field(&info, "cmd"), Some("client|info"));

    // The filter form skips the caller and counts what it killed; the killed connection is closed.
    let beta_id = field(beta, "id").expect("an id").to_string();
    assert_eq!(value(&mut a, &["CLIENT", "KILL", "ID", &beta_id]).expect("kill"), Value::Int(1));
    assert!(value(&mut b, &["PING"]).is_err(), "beta's connection was closed");
    let list = text(&mut a, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(line_named(&list, "beta").is_none(), "beta is gone from the list: {list}");
    assert_eq!(text(&mut a, &["CLIENT", "LIST", "TYPE", "pubsub"]), "");

    // The old form names an address: an error when none matches.
    let mut c = cluster.redis("node1");
    assert_eq!(text(&mut c, &["CLIENT", "SETNAME", "gamma"]), "OK");
    let gamma_addr = field(line_named(&text(&mut a, &["CLIENT", "LIST"]), "gamma").expect("gamma"), "addr")
        .expect("an addr")
        .to_string();
    assert_eq!(text(&mut a, &["CLIENT", "KILL", &gamma_addr]), "OK");
    assert!(value(&mut c, &["PING"]).is_err(), "gamma's connection was closed");
    let none = value(&mut a, &["CLIENT", "KILL", "127.0.0.1:1"]).expect_err("no such client");
    assert!(none.to_string().contains("No such client"), "{none}");

    // INFO counts what it saw: `a` alone is connected now, of the connections received.
    let info = text(&mut a, &["INFO", "clients"]);
    assert!(info.contains("connected_clients:1\r\n"), "{info}");
    let stats = text(&mut a, &["INFO", "stats"]);
    let received = stats.lines().find_map(|l| l.strip_prefix("total_connections_received:")).expect("received");
    assert!(received.trim().parse::<u64>().expect("a number") >= 3, "{stats}");
    let replication = text(&mut a, &["INFO", "replication"]);
    assert!(replication.contains("role:master"), "{replication}");
}

#[test]
fn reset_returns_the_connection_to_how_it_opened_and_object_encoding_says_raw() {
    let cluster = Cluster::start(&Spec::new(1, 1).with_password());
    let mut con = cluster.redis("node1");
    assert_eq!(text(&mut con, &["SET", "k", "12345"]), "OK");
    assert_eq!(text(&mut con, &["OBJECT", "ENCODING", "k"]), "raw", "Waymark keeps the bytes given");
    assert_eq!(value(&mut con, &["OBJECT", "ENCODING", "missing"]).expect("nil"), Value::Nil);
    let freq = value(&mut con, &["OBJECT", "FREQ", "k"]).expect_err("not kept");
    assert!(freq.to_string().contains("not supported"), "{freq}");

    assert_eq!(text(&mut con, &["CLIENT", "SETNAME", "before"]), "OK");
    assert_eq!(text(&mut con, &["MULTI"]), "OK");
    assert_eq!(text(&mut con, &["RESET"]), "RESET");
    // Out of MULTI, nameless, and no longer authenticated: the node asks for a password.
    let refused = value(&mut con, &["CLIENT", "GETNAME"]).expect_err("not authenticated after RESET");
    assert!(refused.to_string().contains("NOAUTH"), "{refused}");
    let password = cluster.password();
    assert_eq!(text(&mut con, &["AUTH", &password]), "OK");
    assert_eq!(value(&mut con, &["CLIENT", "GETNAME"]).expect("a name or nil"), Value::Nil);
    assert_eq!(text(&mut con, &["GET", "k"]), "12345", "a command runs at once: no MULTI is open");
}
