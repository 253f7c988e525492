//! Issue 34: node-redis and ioredis, from the npm registry (`tests/js/package.json`, locked in
//! `package-lock.json`; scripts/test runs `npm ci` there), connect to every host of a 3-host
//! cluster with their default settings and run what applications use Redis for: a cache-aside
//! cache with expiry (`SET … NX PX`, reads on every host, the key gone everywhere after its
//! deadline) and a fixed-window rate limiter (`INCR` + `PEXPIRE … NX` in `MULTI`, 30 requests
//! from three hosts at once, exactly the limit let through, a new window once it expires).

mod common;

use common::{wait_bounded, Cluster, Spec};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long one library's run may take (its waits for expiry are about 3 s).
const RUN_WITHIN: Duration = Duration::from_secs(90);

fn js_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/js")
}

/// Runs the script with `library` against the cluster's hosts; returns what it printed.
fn run_library(cluster: &Cluster, library: &str) -> String {
    let dir = js_dir();
    assert!(
        dir.join("node_modules/redis").is_dir() && dir.join("node_modules/ioredis").is_dir(),
        "{} has no node_modules: run scripts/test (it runs `npm ci` there)",
        dir.display()
    );
    let hosts: Vec<String> =
        ["node1", "node2", "node3"].iter().map(|h| cluster.host(h).redis_addr().to_string()).collect();
    let child = Command::new("node")
        .current_dir(&dir)
        .args(["cache_and_rate_limiter.mjs", library, &hosts.join(","), library])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node.js is on the machine)");
    let out = wait_bounded(child, RUN_WITHIN, library);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{library} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

#[test]
fn node_redis_and_ioredis_run_a_cache_and_a_rate_limiter_on_three_hosts() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    for library in ["node-redis", "ioredis"] {
        let said = run_library(&cluster, library);
        println!("{said}");
        let seen: serde_json::Value = serde_json::from_str(said.trim()).unwrap_or_else(|e| panic!("{e}: {said}"));
        assert_eq!(seen["hosts"], 3, "{said}");
        assert_eq!(seen["rate_limiter"]["allowed"], 10, "{said}");
        assert!(seen["cache"]["gone_after_ms"].as_u64().is_some(), "{said}");
    }
}
