//! Clients that break the protocol against a real host: each gets Redis's protocol error and its
//! connection closed, the server allocates nothing for lengths it refuses, and every other
//! connection goes on as if nothing happened. A client that has not authenticated may ask for
//! nothing but `AUTH`, and only in small requests.

mod common;

use common::{poll, resp_command, Cluster, RawClient, Spec};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Redis's limit on an inline line without a newline (`PROTO_INLINE_MAX_SIZE`).
const INLINE_MAX_BYTES: usize = 64 * 1024;
/// Loop bound of the client that keeps working meanwhile.
const NORMAL_ROUNDS_MAX: u64 = 100_000;
const NORMAL_ROUND_WITHIN: Duration = Duration::from_secs(10);

/// Sends `request` on a fresh connection, and checks the server answers `expected` and closes.
fn refused_and_closed(cluster: &Cluster, request: &[u8], expected: &str) {
    let mut raw = RawClient::connect(cluster.host("node1").redis_addr()).expect("connect");
    raw.send(request).expect("send the request");
    let line = raw.read_line().unwrap_or_else(|e| panic!("no answer to a request refused with {expected:?}: {e}"));
    assert_eq!(line, expected);
    assert!(raw.is_closed_by_server(), "the server kept the connection open after {expected:?}");
}

/// Peak virtual memory of a process (`VmPeak`), in KiB.
fn vm_peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the node's /proc status");
    let line = status.lines().find(|l| l.starts_with("VmPeak:")).expect("a VmPeak line");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmPeak in kB")
}

#[test]
fn malformed_oversized_and_endless_requests_close_only_their_own_connection() {
    let mut cluster = Cluster::start(&Spec::new(1, 1).fsync_never());
    let mut normal = cluster.redis("node1");
    redis::cmd("SET").arg("before").arg("1").exec(&mut normal).expect("SET before the abuse");
    assert_eq!(redis::cmd("GET").arg("before").query::<String>(&mut normal).unwrap(), "1");

    // Another client keeps writing and reading its own key while the abusers connect.
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let worker = {
        let (stop, rounds, mut con) = (stop.clone(), rounds.clone(), cluster.redis("node1"));
        std::thread::spawn(move || -> Result<(), String> {
            for n in 0..NORMAL_ROUNDS_MAX {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                redis::cmd("SET").arg("meanwhile").arg(n).exec(&mut con).map_err(|e| e.to_string())?;
                let got: u64 = redis::cmd("GET").arg("meanwhile").query(&mut con).map_err(|e| e.to_string())?;
                if got != n {
                    return Err(format!("GET meanwhile answered {got} after SET {n}"));
                }
                rounds.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    let rounds_past = |after: u64| {
        poll("the normal client completes a round", NORMAL_ROUND_WITHIN, || match rounds.load(Ordering::Relaxed) {
            n if n > after => Ok(n),
            n => Err(format!("{n} rounds")),
        })
    };
    rounds_past(0);

    refused_and_closed(&cluster, b"*abc\r\n", "-ERR Protocol error: invalid multibulk length");

    // 600 MB announced, above the 512 MiB default: refused on the header, nothing reserved for it.
    let pid = cluster.pid("node1");
    let peak_before_kib = vm_peak_kib(pid);
    refused_and_closed(&cluster, b"*1\r\n$600000000\r\n", "-ERR Protocol error: invalid bulk length");
    let grown_kib = vm_peak_kib(pid).saturating_sub(peak_before_kib);
    assert!(grown_kib < 256 << 10, "the node's peak virtual memory grew by {grown_kib} KiB on a refused bulk length");

    // One byte more than an inline line may hold, and no newline: refused once all of it is read
    // (so that the server closes with nothing unread, which would reset instead).
    let endless = vec![b'a'; INLINE_MAX_BYTES + 1];
    refused_and_closed(&cluster, &endless, "-ERR Protocol error: too big inline request");

    // It goes on after them, too.
    rounds_past(rounds.load(Ordering::Relaxed));
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("the normal client's thread").expect("the normal client kept working");
    redis::cmd("SET").arg("after").arg("2").exec(&mut normal).expect("SET after the abuse");
    assert_eq!(redis::cmd("GET").arg("before").query::<String>(&mut normal).unwrap(), "1");
    assert_eq!(redis::cmd("GET").arg("after").query::<String>(&mut normal).unwrap(), "2");
    cluster.assert_running("node1");
}

#[test]
fn a_client_that_has_not_authenticated_may_only_authenticate() {
    let cluster = Cluster::start(&Spec::new(1, 1).fsync_never().with_password());
    let addr = cluster.host("node1").redis_addr();

    let mut client = RawClient::connect(addr).expect("connect");
    client.send(&resp_command(&["GET", "a"])).unwrap();
    assert_eq!(client.read_line().unwrap(), "-NOAUTH Authentication required.");

    // Twenty arguments are more than an anonymous client may send (Redis allows 10).
    let twenty: Vec<String> = std::iter::once("MSET".to_string()).chain((1..20).map(|i| format!("k{i}"))).collect();
    let twenty: Vec<&str> = twenty.iter().map(String::as_str).collect();
    let mut anonymous = RawClient::connect(addr).expect("connect");
    anonymous.send(&resp_command(&twenty)).unwrap();
    assert_eq!(anonymous.read_line().unwrap(), "-ERR Protocol error: unauthenticated multibulk length");
    assert!(anonymous.is_closed_by_server(), "the server kept an anonymous oversized request's connection");

    client.send(&resp_command(&["AUTH", "not-the-password"])).unwrap();
    assert_eq!(client.read_line().unwrap(), "-WRONGPASS invalid username-password pair or user is disabled.");
    client.send(&resp_command(&["GET", "a"])).unwrap();
    assert_eq!(client.read_line().unwrap(), "-NOAUTH Authentication required.");

    client.send(&resp_command(&["AUTH", &cluster.password()])).unwrap();
    assert_eq!(client.read_line().unwrap(), "+OK");
    client.send(&resp_command(&["GET", "a"])).unwrap();
    assert_eq!(client.read_line().unwrap(), "$-1");
    // Authenticated, a request of even more arguments is an ordinary MSET (of ten pairs).
    let twenty_one: Vec<&str> = twenty.iter().copied().chain(["k20"]).collect();
    client.send(&resp_command(&twenty_one)).unwrap();
    assert_eq!(client.read_line().unwrap(), "+OK");
    client.send(&resp_command(&["GET", "k1"])).unwrap();
    assert_eq!(client.read_line().unwrap(), "$2");
    assert_eq!(client.read_line().unwrap(), "k2");
}

/// CVE-2022-36021's shape against `CONFIG GET`: a pattern of stars that a recursive matcher tries
/// every split of, for ever, on a runtime worker. The matcher is linear now: the answer comes at
/// once (within the client's 5 s read timeout), and the node serves on.
#[test]
fn a_config_get_of_many_stars_answers_at_once_and_the_node_goes_on() {
    let mut cluster = Cluster::start(&Spec::new(1, 1).fsync_never());
    let mut con = cluster.redis("node1");
    let pattern = format!("{}x", "*".repeat(63));
    let answer: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(&pattern).query(&mut con).expect("CONFIG GET ***…x");
    assert!(answer.is_empty(), "no setting ends in x: {answer:?}");
    let matched: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("append*").query(&mut con).expect("CONFIG GET append*");
    assert_eq!(matched, ["appendonly", "no", "appendfsync", "no"]);
    redis::cmd("SET").arg("after").arg("1").exec(&mut con).expect("SET after it");
    cluster.assert_running("node1");
}

/// `MGET` of one large value repeated: the reply would be hundreds of MiB copied from one value.
/// It is refused before it is built, that client is disconnected, and another one goes on.
#[test]
fn an_mget_repeating_a_large_value_closes_that_client_and_no_other() {
    let mut cluster = Cluster::start(&Spec::new(1, 1).fsync_never());
    let mut normal = cluster.redis("node1");
    let value = vec![b'v'; 1 << 20];
    redis::cmd("SET").arg("big").arg(&value).exec(&mut normal).expect("SET a 1 MiB value");

    // 300 copies of 1 MiB: past the default limits.reply_max_bytes of 256 MiB.
    let mut args = vec!["MGET"];
    args.extend(std::iter::repeat_n("big", 300));
    let mut raw = RawClient::connect(cluster.host("node1").redis_addr()).expect("connect");
    raw.send(&resp_command(&args)).expect("send the MGET");
    let line = raw.read_line().expect("an answer to the MGET");
    assert!(line.starts_with("-ERR the reply would exceed limits.reply_max_bytes"), "{line}");
    assert!(raw.is_closed_by_server(), "the server kept the connection open after refusing the reply");

    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut normal).expect("GET on another connection");
    assert_eq!(got.len(), value.len());
    let few: Vec<Vec<u8>> = redis::cmd("MGET").arg("big").arg("big").query(&mut normal).expect("a small MGET");
    assert_eq!(few.len(), 2);
    cluster.assert_running("node1");
}

/// Connections that never authenticate (with a password configured) are closed after
/// `node.auth_timeout`, so a few anonymous clients cannot hold every `limits.clients_max` slot.
#[test]
fn anonymous_connections_are_closed_after_the_auth_timeout_and_give_their_slots_back() {
    const SLOTS: usize = 3;
    let mut cluster = Cluster::init(&Spec::new(1, 1).fsync_never().with_password());
    cluster.edit_configs(|text| {
        text.replace("[node]\n", "[node]\nauth_timeout = \"4s\"\n")
            .replace("[limits]\n", &format!("[limits]\nclients_max = {SLOTS}\n"))
    });
    cluster.spawn("node1");
    cluster.wait_serving("node1");
    let addr = cluster.host("node1").redis_addr();

    // Every slot taken by a connection that has not authenticated: its NOAUTH answer shows the
    // server accepted it and counts it. The next connection is refused. The timeout is 4 s (not
    // 1 s) so that a slow machine takes these few round trips well within it (CI once took more
    // than a second between the connects and the check).
    // A connection of the start-up's readiness probe may hold a slot a moment longer: an
    // anonymous connection refused for that is tried again.
    let ping = |raw: &mut RawClient| raw.send(&resp_command(&["PING"])).and_then(|()| raw.read_line());
    let mut anonymous: Vec<RawClient> = (0..SLOTS)
        .map(|_| {
            poll("an anonymous connection holds a slot", Duration::from_secs(5), || {
                let mut raw = RawClient::connect(addr).map_err(|e| e.to_string())?;
                match ping(&mut raw) {
                    Ok(line) if line.starts_with("-NOAUTH") => Ok(raw),
                    other => Err(format!("answered {other:?}")),
                }
            })
        })
        .collect();
    let mut extra = RawClient::connect(addr).expect("connect past the slots");
    let line = ping(&mut extra).expect("a connection past the slots is answered");
    assert!(line.contains("max number of clients"), "a connection past the slots was answered {line}");

    // Each anonymous connection is closed by the server once its time is up ...
    for raw in &mut anonymous {
        assert!(raw.is_closed_by_server(), "an anonymous connection was kept past node.auth_timeout");
    }
    // ... and a client that authenticates gets a slot again.
    let mut con = cluster.redis("node1");
    redis::cmd("SET").arg("k").arg("v").exec(&mut con).expect("SET once the slots are free");
    cluster.assert_running("node1");
}

/// An argument larger than a value can be is refused on its header, before its bytes are read
/// (`limits.bulk_max_bytes` is the value limit, 4 MiB, not Redis's 512 MiB); and a command of many
/// arguments, each within it, is refused once they add up past a frame (64 MiB). Only that client
/// is disconnected.
#[test]
fn arguments_past_what_could_be_stored_are_refused_before_they_are_read() {
    let mut cluster = Cluster::start(&Spec::new(1, 1).fsync_never());
    refused_and_closed(
        &cluster,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000000\r\n",
        "-ERR Protocol error: invalid bulk length",
    );

    // 17 values of 4 MB: the 17th header takes the command past 64 MiB.
    let mut raw = RawClient::connect(cluster.host("node1").redis_addr()).expect("connect");
    raw.send(b"*40\r\n$4\r\nMSET\r\n").expect("send the header");
    let value = vec![b'v'; 4_000_000];
    let mut refused = None;
    for i in 0..17 {
        let sent = raw
            .send(format!("$1\r\n{}\r\n$4000000\r\n", i % 10).as_bytes())
            .and_then(|()| raw.send(&value))
            .and_then(|()| raw.send(b"\r\n"));
        if sent.is_err() {
            refused = Some(i);
            break;
        }
    }
    let line = raw.read_line().expect("an answer to the oversized command");
    assert_eq!(line, "-ERR Protocol error: command too big", "after {refused:?} values");
    let mut con = cluster.redis("node1");
    redis::cmd("SET").arg("after").arg("1").exec(&mut con).expect("SET on another connection");
    cluster.assert_running("node1");
}

/// An `APPEND` its primary evaluates is held to `limits.value_max_bytes` there: alone it answers
/// Redis's error; in `MULTI` that command alone answers it and the others apply; the value stays
/// as it was. (Before, a lone `APPEND` grew a value past the limit.)
#[test]
fn appends_past_the_value_limit_are_refused_at_the_primary() {
    let mut cluster = Cluster::init(&Spec::new(1, 1).fsync_never());
    cluster.edit_configs(|text| text.replace("[limits]\n", "[limits]\nvalue_max_bytes = 1024\n"));
    cluster.spawn("node1");
    cluster.wait_serving("node1");
    let mut con = cluster.redis("node1");
    redis::cmd("SET").arg("k").arg(vec![b'a'; 1000]).exec(&mut con).expect("SET 1000 bytes");

    let alone = redis::cmd("APPEND").arg("k").arg(vec![b'b'; 100]).query::<i64>(&mut con);
    let e = alone.expect_err("an APPEND past 1024 bytes");
    assert!(e.to_string().contains("string exceeds maximum allowed size"), "{e}");

    let mut raw = RawClient::connect(cluster.host("node1").redis_addr()).expect("connect");
    for cmd in [&["MULTI"][..], &["APPEND", "k", &"c".repeat(100)], &["SET", "other", "x"]] {
        raw.send(&resp_command(cmd)).expect("send");
        raw.read_line().expect("OK or QUEUED");
    }
    raw.send(&resp_command(&["EXEC"])).expect("send EXEC");
    assert_eq!(raw.read_line().expect("the EXEC array"), "*2");
    let first = raw.read_line().expect("the APPEND's answer");
    assert!(first.starts_with("-ERR string exceeds maximum allowed size"), "{first}");
    assert_eq!(raw.read_line().expect("the SET's answer"), "+OK");

    let k: Vec<u8> = redis::cmd("GET").arg("k").query(&mut con).expect("GET k");
    assert_eq!(k, vec![b'a'; 1000], "the value stays as it was");
    let other: String = redis::cmd("GET").arg("other").query(&mut con).expect("GET other");
    assert_eq!(other, "x");
    cluster.assert_running("node1");
}
