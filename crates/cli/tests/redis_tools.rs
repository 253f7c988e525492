//! Redis's own tools against a 3-host cluster: `redis-cli` runs a `MULTI`/`EXEC` transaction and
//! sees one host's write from the others, and `redis-benchmark` runs its standard tests without a
//! single error. The tools come from Debian's `redis-tools`; without them this test fails (it does
//! not skip), since CI installs them.

mod common;

use common::{wait_bounded, Cluster, Spec};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const CLI_WITHIN: Duration = Duration::from_secs(20);
const BENCHMARK_WITHIN: Duration = Duration::from_secs(100);

/// The path of `name` on PATH; fails the test if it is missing.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("{name} is not on PATH: install Debian's redis-tools (`apt-get install redis-tools`); CI installs it")
    })
}

/// Runs `redis-cli -p PORT ARGS`, with `stdin` as its input.
fn redis_cli(port: u16, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(tool("redis-cli"))
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redis-cli");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write redis-cli's input");
    let out = wait_bounded(child, CLI_WITHIN, "redis-cli");
    assert!(out.status.success(), "redis-cli {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn redis_cli_and_redis_benchmark_work_against_a_three_host_cluster() {
    let (cli, benchmark) = (tool("redis-cli"), tool("redis-benchmark"));
    let cluster = Cluster::start(&Spec::new(3, 2).fsync_never());
    let port = |name: &str| cluster.host(name).redis_addr().port();

    // A transaction typed into redis-cli: each command queued, then EXEC's replies in order.
    let out = redis_cli(port("node1"), &[], "MULTI\nINCRBY tools:a 1\nINCRBY tools:b 2\nEXEC\n");
    assert_eq!(lines(&out), ["OK", "QUEUED", "QUEUED", "1", "2"], "from {}", cli.display());

    // Written on one host, read on each of the others.
    for (writer, readers) in
        [("node1", ["node2", "node3"]), ("node2", ["node3", "node1"]), ("node3", ["node1", "node2"])]
    {
        let key = format!("tools:from-{writer}");
        assert_eq!(lines(&redis_cli(port(writer), &["SET", &key, writer], "")), ["OK"]);
        for reader in readers {
            assert_eq!(lines(&redis_cli(port(reader), &["GET", &key], "")), [writer], "GET {key} on {reader}");
        }
    }

    // Without `-r`: its 50 clients all write the same key (`key:__rand_int__`), a hot key.
    let args = ["-t", "ping,set,get,incr,mset", "-n", "20000", "-q"];
    let child = Command::new(&benchmark)
        .arg("-p")
        .arg(port("node1").to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redis-benchmark");
    let out = wait_bounded(child, BENCHMARK_WITHIN, "redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "\n") + &String::from_utf8_lossy(&out.stderr);
    let results: Vec<&str> = text.lines().filter(|l| l.contains("requests per second")).collect();
    eprintln!("redis-benchmark {}:\n{}", args.join(" "), results.join("\n"));
    assert!(out.status.success(), "redis-benchmark exited with {}:\n{text}", out.status);
    assert!(!text.contains("Error") && !text.contains("ERR"), "redis-benchmark met errors:\n{text}");
    for test in ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET"] {
        assert!(results.iter().any(|l| l.starts_with(test)), "redis-benchmark has no result for {test}:\n{text}");
    }
}
