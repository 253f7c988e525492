//! The admin API's status page and metrics on a 3-host cluster of real processes (issue 10,
//! items 4 and 5): headless Chromium loads `/` after a snapshot was taken, and the DOM it dumps
//! holds the tree's vnodes in `#tree` and the snapshot in `#snapshots`; `/metrics` counts the
//! commits of a few SETs and, after a cut, the time of each of its phases.
//!
//! Chromium is required, not optional: CI installs it (`.ci/run`), and a missing browser fails
//! the test rather than skipping what it checks.

mod common;

use common::{http_get, run_waymark, Cluster, Spec};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long Chromium may take to load the page and run its first refreshes (a cold start on 2
/// busy cores); it is killed past that.
const BROWSER_WITHIN: Duration = Duration::from_secs(90);
const BROWSER_POLL: Duration = Duration::from_millis(50);
const SNAPSHOT_NAME: &str = "page-test";

/// `chromium` or `chromium-browser`, from PATH.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file());
    found.unwrap_or_else(|| panic!("no chromium or chromium-browser on PATH: install Debian's chromium (.ci/run does)"))
}

/// The DOM of `url` after the page's scripts ran for a few seconds of virtual time. Chromium and
/// its helpers run in their own process group, killed as a whole on timeout and after the dump
/// (a renderer left behind would outlive the test).
fn dump_dom(url: &str, profile: &Path) -> String {
    let mut command = Command::new(chromium());
    command
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start chromium: {e}"));
    let group = child.id() as i32;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || std::io::read_to_string(&mut stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(&mut stderr).unwrap_or_default());
    let deadline = Instant::now() + BROWSER_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait on chromium") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(BROWSER_POLL);
    };
    // SAFETY: kill(2) on the process group this test created; no memory is involved.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    let status = status.unwrap_or_else(|| panic!("chromium did not finish within {BROWSER_WITHIN:?}"));
    let (dom, log) = (out.join().expect("stdout reader"), err.join().expect("stderr reader"));
    assert!(status.success(), "chromium failed ({status}):\n{log}");
    dom
}

/// The markup of the element `id="…"` up to the next `</section>` (the page's elements that the
/// tests read each sit in their own section).
fn element<'a>(dom: &'a str, id: &str) -> &'a str {
    let from = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in the page:\n{dom}"));
    let rest = &dom[from..];
    &rest[..rest.find("</section>").unwrap_or(rest.len())]
}

fn post(cluster: &Cluster, host: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let token = std::fs::read_to_string(cluster.dir().join("admin-token")).expect("the admin token");
    let url = format!("http://{}{path}", cluster.host(host).admin_addr());
    let answer = ureq::post(&url)
        .set("Authorization", &format!("Bearer {}", token.trim()))
        .timeout(Duration::from_secs(60))
        .send_json(body)
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    answer.into_json().unwrap_or_else(|e| panic!("POST {path}: not JSON: {e}"))
}

/// The host of the tree's root, as `/topology` shows it.
fn root_host(cluster: &Cluster) -> String {
    let topology = http_get(cluster.host("node1").admin_addr(), "/topology").expect("GET /topology");
    let topology: serde_json::Value = serde_json::from_str(&topology).expect("/topology is JSON");
    let tree = topology["tree"].as_array().expect("the tree");
    let root = tree.iter().find(|v| v["parents"].as_array().is_some_and(Vec::is_empty)).expect("a root");
    root["host"].as_str().expect("the root's host").to_string()
}

#[test]
fn the_status_page_shows_the_tree_and_a_snapshot() {
    let cluster = Cluster::start(&Spec::new(3, 2).fsync_never());
    let dir = cluster.dir().display().to_string();
    let args = ["snapshot", "create", SNAPSHOT_NAME, "--dir", &dir].map(String::from);
    let created = run_waymark(&args, Duration::from_secs(60));
    assert!(created.status.success(), "snapshot create: {}", String::from_utf8_lossy(&created.stderr));

    let profile = common::temp_dir();
    let url = format!("http://{}/", cluster.host("node2").admin_addr());
    let dom = dump_dom(&url, profile.path());

    let tree = element(&dom, "tree");
    for vnode in ["store0@node1", "store0@node2", "store0@node3"] {
        assert!(tree.contains(vnode), "{vnode} missing from #tree:\n{tree}");
    }
    // The root runs on another host than the one serving the page: its state came from there.
    assert!(tree.contains("root, term"), "#tree shows no root with its term:\n{tree}");
    assert!(!tree.contains("no answer"), "a vnode did not answer:\n{tree}");
    let snapshots = element(&dom, "snapshots");
    assert!(snapshots.contains(SNAPSHOT_NAME), "{SNAPSHOT_NAME} missing from #snapshots:\n{snapshots}");
    assert!(snapshots.contains("cut "), "#snapshots shows no cut id:\n{snapshots}");
    assert!(dom.contains("id=\"throughput\""), "no #throughput canvas in the page");
}

/// The value of the unlabelled sample `name` in a Prometheus text exposition.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn metrics_count_commits_fsyncs_and_cut_phases() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let mut con = cluster.redis("node1");
    let sets = 20;
    for i in 0..sets {
        let _: () = redis::cmd("SET").arg(format!("m{i}")).arg(i).query(&mut con).expect("SET");
    }
    let metrics = http_get(cluster.host("node1").admin_addr(), "/metrics").expect("GET /metrics");
    let committed = sample(&metrics, "waymark_transactions_committed_total");
    assert!(committed.is_some_and(|n| n >= sets as f64), "committed: {committed:?} after {sets} SETs:\n{metrics}");
    assert!(
        sample(&metrics, "waymark_commit_latency_seconds_count").is_some_and(|n| n >= sets as f64),
        "no commit latency histogram:\n{metrics}"
    );
    assert!(metrics.contains("waymark_wal_fsync_duration_seconds_bucket"), "no fsync histogram:\n{metrics}");
    // Nothing is held once the cluster is idle (the gauge is there, per store vnode, at 0).
    assert!(
        metrics.contains("waymark_vnode_held_replies{vnode=\"store0@node1\"} 0"),
        "no held replies gauge:\n{metrics}"
    );

    // A cut is run by the host of the tree's root.
    let root_host = root_host(&cluster);
    let report = post(&cluster, &root_host, "/cuts", serde_json::json!({}));
    assert_eq!(report["ok"], true, "the cut failed: {report}");
    let metrics = http_get(cluster.host(&root_host).admin_addr(), "/metrics").expect("GET /metrics");
    for phase in ["start", "started", "finish", "end"] {
        let count = format!("waymark_cut_phase_duration_seconds_count{{phase=\"{phase}\"}} 1");
        assert!(metrics.contains(&count), "{count} missing:\n{metrics}");
    }
    assert!(metrics.contains("waymark_cuts_total{outcome=\"ok\"} 1"), "no counted cut:\n{metrics}");
    assert!(sample(&metrics, "waymark_last_cut_age_seconds").is_some(), "no last cut age:\n{metrics}");
    // The operator's four phases are alterations its manager proposed and was answered ok for.
    let ok = sample(&metrics, "waymark_alterations_total{outcome=\"ok\"}").unwrap_or(0.0);
    assert!(ok >= 4.0, "the cut's four phases are not counted as alterations ({ok}):\n{metrics}");
}

/// A cut cannot succeed with a host down; the answer says which phase fell short and why, and the
/// failure is counted.
#[test]
fn a_cut_with_a_host_down_fails_and_says_why() {
    let mut cluster = Cluster::start(&Spec::new(3, 2).fsync_never());
    let root = root_host(&cluster);
    // Stop a host that does not run the root, so the cut is not also waiting for a new root.
    let down = ["node3", "node2", "node1"].into_iter().find(|h| root != *h).expect("a host");
    let asked = root.as_str();
    cluster.kill(down);
    let report = post(&cluster, asked, "/cuts", serde_json::json!({}));
    assert_eq!(report["ok"], false, "a cut succeeded with {down} down: {report}");
    let why = report["why"].as_str().unwrap_or_default();
    assert!(why.contains("START"), "the answer does not say which phase fell short: {report}");
    let metrics = http_get(cluster.host(asked).admin_addr(), "/metrics").expect("GET /metrics");
    assert!(metrics.contains("waymark_cuts_total{outcome=\"failed\"} 1"), "the failure is not counted:\n{metrics}");
}
