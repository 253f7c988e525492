//! `waymark cluster init/start/stop` as a user runs them, and `waymark node` refusing a bad config
//! with a message that names the field and the file.

mod common;

use common::{alive, key_with_primary, poll, run_waymark, temp_dir, Cluster, PidFileGuard, Spec};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const INIT_WITHIN: Duration = Duration::from_secs(30);
/// `cluster start` itself gives up after 60 s.
const START_WITHIN: Duration = Duration::from_secs(90);
/// `cluster stop` waits 20 s for SIGTERM before SIGKILL.
const STOP_WITHIN: Duration = Duration::from_secs(60);
const EXIT_WITHIN: Duration = Duration::from_secs(20);

fn args(words: &[&str], dir: &Path) -> Vec<String> {
    words.iter().map(|w| w.to_string()).chain(["--dir".to_string(), dir.display().to_string()]).collect()
}

/// With a client password: `cluster start` must authenticate to see that the hosts serve.
/// `--insecure` (plaintext, `tls.rs` has TLS): the test's Redis client speaks plaintext.
#[test]
fn cluster_start_serves_every_host_and_cluster_stop_ends_them_all() {
    let dir = temp_dir();
    let words = ["cluster", "init", "--hosts", "3", "--insecure", "--password"];
    let init = run_waymark(&args(&words, dir.path()), INIT_WITHIN);
    assert!(init.status.success(), "cluster init: {}", String::from_utf8_lossy(&init.stderr));
    let cluster = Cluster::open(dir);
    let mut guard = PidFileGuard::new(&cluster);

    let start = run_waymark(&args(&["cluster", "start"], cluster.dir()), START_WITHIN);
    let pids = guard.read();
    let printed = String::from_utf8_lossy(&start.stdout);
    assert!(start.status.success(), "cluster start: {}{printed}", String::from_utf8_lossy(&start.stderr));
    for h in &cluster.hosts {
        let shown = format!("redis-cli -h 127.0.0.1 -p {} --no-auth-warning -a", h.redis_addr().port());
        assert!(printed.contains(&shown), "cluster start does not show `{shown}`:\n{printed}");
    }
    assert_eq!(pids.len(), 3, "pid files after cluster start: {pids:?}");
    assert!(pids.iter().all(|p| alive(*p)), "a node of {pids:?} is not running");

    // Written on one host, read on another.
    let mut node1 = cluster.redis("node1");
    let mut node2 = cluster.redis("node2");
    redis::cmd("SET").arg("greeting").arg("hello").exec(&mut node1).expect("SET on node1");
    assert_eq!(redis::cmd("GET").arg("greeting").query::<String>(&mut node2).unwrap(), "hello");

    // One transaction over keys whose primaries are on the three hosts.
    let topology = cluster.topology();
    let keys: Vec<String> =
        cluster.hosts.iter().map(|h| key_with_primary(&topology, "multi", &format!("store0@{}", h.name))).collect();
    let added: (i64, i64, i64) = redis::pipe()
        .atomic()
        .incr(&keys[0], 5)
        .incr(&keys[1], 6)
        .incr(&keys[2], 7)
        .query(&mut node2)
        .expect("MULTI/EXEC on node2");
    assert_eq!(added, (5, 6, 7));
    let read: (i64, i64, i64) = redis::cmd("MGET").arg(&keys).query(&mut node1).expect("MGET on node1");
    assert_eq!(read, (5, 6, 7));

    let stop = run_waymark(&args(&["cluster", "stop"], cluster.dir()), STOP_WITHIN);
    assert!(stop.status.success(), "cluster stop: {}", String::from_utf8_lossy(&stop.stderr));
    let running: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(running.is_empty(), "still running after cluster stop: {running:?}");
}

/// Another program takes a port `cluster init` gave a host before the host first starts (the
/// race of tests and demos run side by side): `cluster start` moves the whole cluster to new ports
/// and serves, rather than failing or talking to the other program. `--insecure`: the test's
/// Redis client speaks plaintext.
#[test]
fn cluster_start_moves_the_cluster_to_new_ports_when_another_program_holds_one() {
    let dir = temp_dir();
    let words = ["cluster", "init", "--hosts", "3", "--fsync", "never", "--insecure"];
    let init = run_waymark(&args(&words, dir.path()), INIT_WITHIN);
    assert!(init.status.success(), "cluster init: {}", String::from_utf8_lossy(&init.stderr));
    let mut cluster = Cluster::open(dir);
    let mut guard = PidFileGuard::new(&cluster);
    let held_peer = std::net::TcpListener::bind(cluster.host("node2").peer_addr()).expect("node2's peer port is free");
    let held_redis = std::net::TcpListener::bind(cluster.host("node3").redis_addr()).expect("node3's port is free");

    let start = run_waymark(&args(&["cluster", "start"], cluster.dir()), START_WITHIN);
    guard.read();
    let printed = String::from_utf8_lossy(&start.stdout);
    assert!(start.status.success(), "cluster start: {}{printed}", String::from_utf8_lossy(&start.stderr));
    assert!(printed.contains("moving the cluster to new ports"), "cluster start did not say it moved:\n{printed}");

    cluster.reload_configs();
    let held = [held_peer.local_addr().unwrap(), held_redis.local_addr().unwrap()];
    for h in &cluster.hosts {
        for addr in [h.peer_addr(), h.redis_addr(), h.admin_addr()] {
            assert!(!held.contains(&addr), "{} still has the held port {addr}", h.name);
        }
    }
    let mut node3 = cluster.redis("node3");
    redis::cmd("SET").arg("moved").arg("yes").exec(&mut node3).expect("SET on node3");
    let mut node2 = cluster.redis("node2");
    assert_eq!(redis::cmd("GET").arg("moved").query::<String>(&mut node2).unwrap(), "yes");

    let stop = run_waymark(&args(&["cluster", "stop"], cluster.dir()), STOP_WITHIN);
    assert!(stop.status.success(), "cluster stop: {}", String::from_utf8_lossy(&stop.stderr));
}

#[test]
fn cluster_init_refuses_a_directory_that_is_not_empty() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let out = run_waymark(&args(&["cluster", "init", "--hosts", "3"], dir.path()), INIT_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "cluster init wrote into a directory that was not empty");
    assert!(stderr.contains(&format!("{} is not empty", dir.path().display())), "unclear message: {stderr}");
    assert!(!dir.path().join("secret").exists(), "cluster init wrote a secret before refusing");
}

#[test]
fn cluster_init_refuses_more_replicas_than_hosts_and_leaves_the_directory_empty() {
    let dir = temp_dir();
    let out = run_waymark(&args(&["cluster", "init", "--hosts", "2", "--replicas", "3"], dir.path()), INIT_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "cluster init accepted 3 replicas on 2 hosts");
    assert!(stderr.contains("--replicas"), "the message does not name --replicas: {stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "cluster init left {left:?} behind");
    // So a second try works; a single host keeps one replica unless told otherwise.
    let out = run_waymark(&args(&["cluster", "init", "--hosts", "1"], dir.path()), INIT_WITHIN);
    assert!(out.status.success(), "cluster init --hosts 1: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(Cluster::open(dir).hosts[0].cfg.cluster.replicas, 1);
}

#[test]
fn cluster_init_writes_every_secret_file_readable_by_its_owner_only() {
    let cluster = Cluster::init(&Spec::new(1, 1).secure());
    for name in ["secret", "admin-token", "password", "ca-key.pem", "node1/key.pem"] {
        let mode = std::fs::metadata(cluster.dir().join(name)).expect(name).permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "cluster init wrote {name} with mode {:o}", mode & 0o777);
    }
}

#[test]
fn a_node_refuses_a_secret_file_others_can_read_naming_the_file_and_the_fix() {
    let cluster = Cluster::init(&Spec::new(1, 1).fsync_never());
    let secret = cluster.dir().join("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = &cluster.host("node1").config_file;
    let out = run_waymark(&["node".into(), "--config".into(), file.display().to_string()], EXIT_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "waymark node started with a world-readable secret");
    // The node names the file as its config does (`secret_file = "../secret"`).
    let as_named = file.parent().expect("node1's directory").join("../secret");
    let fix = format!("chmod 600 {}", as_named.display());
    assert!(stderr.contains(&fix), "the message does not say `{fix}`: {stderr}");
}

#[test]
fn the_cli_refuses_an_admin_token_file_others_can_read_naming_the_file_and_the_fix() {
    let dir = temp_dir();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let args: Vec<String> = ["snapshot", "create", "s", "--path", &dir.path().display().to_string()]
        .into_iter()
        .map(String::from)
        .chain(["--admin".into(), "127.0.0.1:9".into(), "--token-file".into(), token.display().to_string()])
        .collect();
    let out = run_waymark(&args, EXIT_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the CLI sent a world-readable token");
    let fix = format!("chmod 600 {}", token.display());
    assert!(stderr.contains(&fix), "the message does not say `{fix}`: {stderr}");
}

/// Runs `waymark node` with node1's config edited by `edit`; it must exit non-zero, and its message
/// must name `field` and the file, and say `problem`.
fn node_refuses(edit: impl FnOnce(String) -> String, field: &str, problem: &str) {
    let cluster = Cluster::init(&Spec::new(3, 2).fsync_never());
    let file = &cluster.host("node1").config_file;
    let text = std::fs::read_to_string(file).unwrap();
    let edited = edit(text.clone());
    assert_ne!(edited, text, "the edit changed nothing");
    std::fs::write(file, edited).unwrap();
    let out = run_waymark(&["node".into(), "--config".into(), file.display().to_string()], EXIT_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "waymark node accepted a config with a bad `{field}`");
    assert!(stderr.contains(field), "the message does not name `{field}`: {stderr}");
    assert!(stderr.contains(&*file.to_string_lossy()), "the message does not name the file: {stderr}");
    assert!(stderr.contains(problem), "the message does not say `{problem}`: {stderr}");
}

#[test]
fn a_node_refuses_a_config_with_zero_replicas_naming_the_field_and_the_file() {
    node_refuses(|t| t.replace("replicas = 2", "replicas = 0"), "cluster.replicas", "must be at least 1");
}

#[test]
fn a_node_refuses_a_config_with_an_unknown_field_naming_the_field_and_the_file() {
    node_refuses(|t| t.replace("[node]\n", "[node]\ncolour = \"blue\"\n"), "colour", "unknown field");
}

/// `cluster status` asks the running hosts: all up and every partition whole, then with node2
/// killed, node2 down and the partitions it held a copy of degraded — named, with the copy that is
/// down — while the root still leads a term (one host of three is not a majority of its voters).
/// A secure cluster: `cluster status` asks over HTTPS with the cluster's CA.
#[test]
fn cluster_status_asks_the_running_cluster_and_shows_a_dead_hosts_partitions_degraded() {
    let dir = temp_dir();
    let init = run_waymark(&args(&["cluster", "init", "--hosts", "3", "--fsync", "never"], dir.path()), INIT_WITHIN);
    assert!(init.status.success(), "cluster init: {}", String::from_utf8_lossy(&init.stderr));
    let cluster = Cluster::open(dir);
    let mut guard = PidFileGuard::new(&cluster);
    let start = run_waymark(&args(&["cluster", "start"], cluster.dir()), START_WITHIN);
    guard.read();
    assert!(start.status.success(), "cluster start: {}", String::from_utf8_lossy(&start.stderr));

    let status = |want: &str| {
        poll(&format!("cluster status shows {want:?}"), Duration::from_secs(30), || {
            let out = run_waymark(&args(&["cluster", "status"], cluster.dir()), EXIT_WITHIN);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            match out.status.success() && text.contains(want) {
                true => Ok(text),
                false => Err(format!("{}{text}", String::from_utf8_lossy(&out.stderr))),
            }
        })
    };
    let all_up = status("hosts: 3 of 3 up");
    assert!(all_up.contains("64 whole, 0 degraded, 0 unavailable"), "{all_up}");
    assert!(all_up.contains("root: manager1@node3 leads term"), "{all_up}");

    let pid: u32 = std::fs::read_to_string(cluster.host("node2").dir.join("node.pid")).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on the pid `cluster start` recorded for this test's node2.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    let one_down = status("hosts: 2 of 3 up");
    assert!(one_down.contains("node2    down"), "{one_down}");
    assert!(one_down.contains("store0@node2 (down)"), "{one_down}");
    assert!(!one_down.contains(" 0 degraded"), "{one_down}");
    assert!(one_down.contains("0 unavailable"), "two copies on three hosts: {one_down}");
    assert!(one_down.contains("root: manager1@node3 leads term"), "{one_down}");

    let stop = run_waymark(&args(&["cluster", "stop"], cluster.dir()), STOP_WITHIN);
    assert!(stop.status.success(), "cluster stop: {}", String::from_utf8_lossy(&stop.stderr));
}
