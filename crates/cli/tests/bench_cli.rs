//! `waymark bench` on real processes, short: it starts a 3-host cluster, runs the bank for two
//! measured seconds with a cut every 500 ms, stops the cluster, and leaves a JSON report with
//! transfers and cuts in it and a PNG chart.

mod common;

use common::{run_waymark, temp_dir};
use std::path::Path;
use std::time::Duration;

const BENCH_WITHIN: Duration = Duration::from_secs(90);
const CLI_WITHIN: Duration = Duration::from_secs(30);
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Stops the benchmark's cluster when the test ends, even by a panic (the benchmark stops it
/// itself, but not if it is killed).
struct StopCluster<'a>(&'a Path);

impl Drop for StopCluster<'_> {
    fn drop(&mut self) {
        if self.0.exists() {
            let args = ["cluster", "stop", "--dir", &self.0.to_string_lossy()].map(String::from);
            let _ = run_waymark(&args, CLI_WITHIN);
        }
    }
}

#[test]
fn bench_runs_the_bank_with_cuts_and_reports_json_and_a_chart() {
    let tmp = temp_dir();
    let cluster = tmp.path().join("cluster");
    let (json, chart) = (tmp.path().join("bench.json"), tmp.path().join("bench.png"));
    let _stop = StopCluster(&cluster);
    let args = [
        "bench",
        "--start-hosts",
        "3",
        "--dir",
        &cluster.to_string_lossy(),
        "--seconds",
        "2",
        "--warmup",
        "500ms",
        "--clients",
        "4",
        "--workload",
        "bank",
        "--cut-every",
        "500ms",
        "--json",
        &json.to_string_lossy(),
        "--chart",
        &chart.to_string_lossy(),
    ]
    .map(String::from);
    let out = run_waymark(&args, BENCH_WITHIN);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "waymark bench failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("cuts 500ms"), "{stdout}");

    let text = std::fs::read_to_string(&json).expect("the JSON report");
    let report: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let run = &report["runs"][0];
    assert!(run["throughput_per_s"].as_f64().unwrap_or(0.0) > 0.0, "no throughput: {text}");
    assert!(run["cuts"]["count"].as_u64().unwrap_or(0) > 0, "no cut: {text}");
    assert_eq!(run["cuts"]["failed"].as_u64(), Some(0), "{text}");
    assert_eq!(run["per_second"].as_array().map(Vec::len), Some(2), "{text}");

    let png = std::fs::read(&chart).expect("the chart");
    assert!(png.starts_with(PNG_MAGIC), "the chart is not a PNG");
    // The cluster the benchmark started is stopped: no host of it runs.
    for host in ["node1", "node2", "node3"] {
        let pid = std::fs::read_to_string(cluster.join(host).join("node.pid")).unwrap_or_default();
        let alive = pid.trim().parse::<u32>().is_ok_and(|p| Path::new(&format!("/proc/{p}")).exists());
        assert!(!alive, "{host} (pid {}) still runs", pid.trim());
    }
}

/// `--rounds 2 --compare-cuts`: four runs on one cluster, the second round in reverse order, and
/// the median of the rounds' ratios in the report.
#[test]
fn bench_repeats_a_comparison_in_alternating_rounds_and_reports_the_median_ratio() {
    let tmp = temp_dir();
    let json = tmp.path().join("bench.json");
    let args = ["bench", "--start-hosts", "3", "--seconds", "1", "--warmup", "200ms", "--clients", "2"];
    let more = ["--workload", "set", "--cut-every", "500ms", "--compare-cuts", "--rounds", "2", "--json"];
    let args: Vec<String> =
        args.iter().chain(&more).map(|s| s.to_string()).chain([json.display().to_string()]).collect();
    let out = run_waymark(&args, BENCH_WITHIN);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "waymark bench failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("cuts every 500ms, 2 rounds: throughput"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON")).expect("valid");
    let runs = report["runs"].as_array().expect("runs");
    let shape: Vec<(u64, bool)> =
        runs.iter().map(|r| (r["round"].as_u64().unwrap_or(0), r["cut_every_ms"].is_null())).collect();
    assert_eq!(shape, vec![(1, true), (1, false), (2, false), (2, true)], "rounds and order");
    assert_eq!(report["ratios"].as_array().map(Vec::len), Some(2), "one ratio a round");
    assert_eq!(report["over_rounds"][0]["rounds"].as_u64(), Some(2));
}

#[test]
fn bench_refuses_rounds_without_a_comparison() {
    let args = ["bench", "--start-hosts", "3", "--rounds", "2"].map(String::from);
    let out = run_waymark(&args, CLI_WITHIN);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rounds"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--tls`: the cluster is secure (TLS on every port, a password) and the bank runs through TLS
/// with `AUTH`; a cut goes over HTTPS. Its transfers commit as on a plaintext cluster.
#[test]
fn bench_runs_the_bank_over_tls_against_a_secure_cluster() {
    let tmp = temp_dir();
    let cluster = tmp.path().join("cluster");
    let json = tmp.path().join("bench.json");
    let _stop = StopCluster(&cluster);
    let args = ["bench", "--start-hosts", "3", "--tls", "--seconds", "1", "--warmup", "200ms", "--clients", "2"];
    let more = ["--workload", "bank", "--cut-every", "500ms", "--dir", &cluster.to_string_lossy(), "--json"];
    let args: Vec<String> =
        args.iter().chain(&more).map(|s| s.to_string()).chain([json.display().to_string()]).collect();
    let out = run_waymark(&args, BENCH_WITHIN);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "waymark bench --tls failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(cluster.join("ca.pem").exists() && cluster.join("password").exists(), "the cluster is not secure");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON")).expect("valid");
    let run = &report["runs"][0];
    assert!(run["throughput_per_s"].as_f64().unwrap_or(0.0) > 0.0, "no transfer over TLS: {report}");
    assert!(run["cuts"]["count"].as_u64().unwrap_or(0) > 0, "no cut over HTTPS: {report}");
    assert_eq!(run["cuts"]["failed"].as_u64(), Some(0), "{report}");
    assert!(run["held"].is_object(), "the hosts' /metrics were not read over HTTPS: {report}");
}
