//! Issue 36, item 4: ACL users, kept in the cluster metadata so every host agrees. A user made on
//! one host of a 3-host cluster, limited to `~app:*` and `+@read`, reads `app:x` on every host
//! and is refused `SET` and other keys there with Redis's errors; a wrong password is WRONGPASS;
//! the user outlives a restart of the whole cluster, and `ACL DELUSER` on one host removes it from
//! the others.

mod common;

use common::{poll, resp_command, Cluster, RawClient, Spec};
use std::time::Duration;

/// How long a host may take to apply an alteration another host's client asked for.
const APPLIED_WITHIN: Duration = Duration::from_secs(20);

/// One request on a fresh connection to `host`, after `AUTH user password`: the AUTH reply line,
/// then the first line of each reply.
fn as_user(cluster: &Cluster, host: &str, user: &str, password: &str, requests: &[&[&str]]) -> Vec<String> {
    let mut c = RawClient::connect(cluster.host(host).redis_addr()).expect("connect");
    c.send(&resp_command(&["AUTH", user, password])).expect("send AUTH");
    let mut lines = vec![c.read_line().expect("the AUTH reply")];
    for r in requests {
        c.send(&resp_command(r)).expect("send");
        let line = c.read_line().expect("a reply");
        // A bulk string's body follows its length line.
        let line = match line.strip_prefix('$') {
            Some(len) if len != "-1" => c.read_line().expect("the bulk's body"),
            _ => line,
        };
        lines.push(line);
    }
    lines
}

fn ok(s: &str) -> Vec<String> {
    vec![s.to_string()]
}

#[test]
fn an_acl_user_made_on_one_host_is_held_by_every_host_and_outlives_a_restart() {
    let mut cluster = Cluster::start(&Spec::new(3, 2).fsync_never().with_password());
    let mut admin = cluster.redis("node1");
    let set: String = redis::cmd("SET").arg("app:x").arg("hello").query(&mut admin).expect("SET as default");
    assert_eq!(set, "OK");
    let made: String = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">apppw", "~app:*", "+@read"])
        .query(&mut admin)
        .expect("ACL SETUSER");
    assert_eq!(made, "OK");

    let expected = [
        "+OK",
        "hello",
        "-NOPERM this user has no permissions to run the 'set' command",
        "-NOPERM No permissions to access a key",
        "-NOPERM No permissions to access a key",
    ];
    let requests: &[&[&str]] = &[&["GET", "app:x"], &["SET", "app:x", "1"], &["GET", "other"], &["GET", "appx"]];
    for host in ["node1", "node2", "node3"] {
        // Another host applies the alteration a moment later: asked again until it has.
        let heard = poll(&format!("{host} knows user app"), APPLIED_WITHIN, || {
            let heard = as_user(&cluster, host, "app", "apppw", requests);
            if heard[0] == "+OK" {
                Ok(heard)
            } else {
                Err(heard.join(" | "))
            }
        });
        assert_eq!(heard, expected, "{host}");
        let wrong = as_user(&cluster, host, "app", "wrong", &[]);
        assert_eq!(wrong, ok("-WRONGPASS invalid username-password pair or user is disabled."), "{host}");
        let nobody = as_user(&cluster, host, "nobody", "x", &[]);
        assert_eq!(nobody, ok("-WRONGPASS invalid username-password pair or user is disabled."), "{host}");
    }

    // HELLO 3 AUTH user pass, on another host: RESP3 from then on.
    let mut c = RawClient::connect(cluster.host("node3").redis_addr()).expect("connect");
    c.send(&resp_command(&["HELLO", "3", "AUTH", "app", "apppw"])).unwrap();
    assert!(c.read_line().unwrap().starts_with('%'), "HELLO 3 answers a map");
    let getuser: Vec<redis::Value> =
        redis::cmd("ACL").arg(&["GETUSER", "app"]).query(&mut cluster.redis("node3")).expect("ACL GETUSER");
    let text = format!("{getuser:?}");
    assert!(text.contains("~app:*") && text.contains("-@all +@read"), "ACL GETUSER on node3: {text}");

    // The whole cluster down and up again: the user is in every host's metadata log.
    for host in ["node1", "node2", "node3"] {
        cluster.kill(host);
    }
    for host in ["node1", "node2", "node3"] {
        cluster.spawn(host);
    }
    for host in ["node1", "node2", "node3"] {
        cluster.wait_serving(host);
    }
    for host in ["node1", "node2", "node3"] {
        let heard = as_user(&cluster, host, "app", "apppw", &[&["GET", "app:x"], &["SET", "app:y", "1"]]);
        assert_eq!(heard[..2], ["+OK", "hello"], "{host} after the restart");
        assert!(heard[2].starts_with("-NOPERM"), "{host} after the restart: {heard:?}");
    }

    // Deleted on one host, gone on the others.
    let deleted: i64 =
        redis::cmd("ACL").arg(&["DELUSER", "app"]).query(&mut cluster.redis("node2")).expect("ACL DELUSER");
    assert_eq!(deleted, 1);
    for host in ["node1", "node3"] {
        poll(&format!("{host} forgets user app"), APPLIED_WITHIN, || {
            let heard = as_user(&cluster, host, "app", "apppw", &[]);
            if heard[0].starts_with("-WRONGPASS") {
                Ok(())
            } else {
                Err(heard.join(" | "))
            }
        });
    }
}

/// Bad rules and the default user get Redis's errors, and change nothing.
#[test]
fn bad_acl_rules_are_refused_with_redis_errors() {
    let cluster = Cluster::start(&Spec::new(1, 1).fsync_never().with_password());
    let mut con = cluster.redis("node1");
    let e = redis::cmd("ACL").arg(&["SETUSER", "u", "+nosuch"]).query::<String>(&mut con).unwrap_err();
    assert!(e.to_string().contains("Unknown command or category name in ACL"), "{e}");
    let e = redis::cmd("ACL").arg(&["DELUSER", "default"]).query::<i64>(&mut con).unwrap_err();
    assert!(e.to_string().contains("'default' user"), "{e}");
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut con).unwrap();
    assert_eq!(users, ["default"], "a refused SETUSER made no user");
    let whoami: String = redis::cmd("ACL").arg("WHOAMI").query(&mut con).unwrap();
    assert_eq!(whoami, "default");
}
