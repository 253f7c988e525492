//! `waymark bench` on real processes, short: it starts a 3-host cluster, runs the bank for two
//! measured seconds with a cut every 500 ms, stops the cluster, and leaves a JSON report with
//! transfers and cuts in it and a PNG chart. And `waymark bench chart`, the chart of
//! `bench/strategies.sh`'s JSON, from a small synthetic one.

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

/// The width and height in a PNG's header (the IHDR chunk follows the 8-byte signature).
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if !png.starts_with(PNG_MAGIC) || png.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |at: usize| png.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
    Some((be(16)?, be(20)?))
}

/// `bench/strategies.sh`'s JSON, small: two rounds of three strategies at 1 s and 100 ms, and the
/// runs without cuts; rounds of unequal length.
fn strategies_json() -> serde_json::Value {
    let mut runs = vec![];
    for round in 1..=2u32 {
        let seconds = 3 + round as usize;
        let per_second = |base: f64| (0..seconds).map(|s| base + (s * 7 % 5) as f64 * 10.0).collect::<Vec<_>>();
        runs.push(serde_json::json!({"strategy": "consistent", "cut_every": "none", "round": round,
            "per_second": per_second(1000.0), "cut_at_s": []}));
        for (every, step) in [("1s", 1.0), ("100ms", 0.1)] {
            for (i, strategy) in ["consistent", "blocking", "versions"].iter().enumerate() {
                let cuts: Vec<f64> = (0..(seconds as f64 / step) as usize).map(|k| k as f64 * step).collect();
                runs.push(serde_json::json!({"strategy": strategy, "cut_every": every, "round": round,
                    "per_second": per_second(900.0 + 20.0 * i as f64), "cut_at_s": cuts}));
            }
        }
    }
    serde_json::json!({"date": "2026-12-07T12:00:00Z", "clients": 8, "seconds": 5, "rounds": 2, "runs": runs})
}

#[test]
fn bench_chart_draws_the_strategies_json_as_a_png() {
    let tmp = temp_dir();
    let (json, png) = (tmp.path().join("strategies.json"), tmp.path().join("strategies.png"));
    std::fs::write(&json, strategies_json().to_string()).expect("the JSON written");
    let args = ["bench", "chart", "--from", &json.to_string_lossy(), "--out", &png.to_string_lossy()].map(String::from);
    let out = run_waymark(&args, CLI_WITHIN);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "waymark bench chart failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("chart: {}", png.display())), "{stdout}");
    let bytes = std::fs::read(&png).expect("the chart");
    assert_eq!(png_size(&bytes), Some((1200, 900)), "not a 1200x900 PNG");
}

#[test]
fn bench_chart_refuses_a_json_that_is_not_the_scripts() {
    let tmp = temp_dir();
    let (json, png) = (tmp.path().join("bench.json"), tmp.path().join("out.png"));
    std::fs::write(&json, r#"{"setup": {}, "runs": []}"#).expect("the JSON written");
    let args = ["bench", "chart", "--from", &json.to_string_lossy(), "--out", &png.to_string_lossy()].map(String::from);
    let out = run_waymark(&args, CLI_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a chart of nothing");
    assert!(stderr.contains("is not the JSON of bench/strategies.sh"), "{stderr}");
    assert!(!png.exists(), "a PNG was written anyway");
}
