//! The exhaustive interleaving explorer over Ignite's `IncrementalSnapshotMessagesBlockingTest`
//! matrix: every schedule of every case keeps the cut consistent and transactions atomic, and a
//! deliberately broken protocol is caught.

use std::time::Instant;
use waymark_core::Breaks;
use waymark_sim::explore::{explore, report_line, single_tx_matrix, totals_line, two_tx_matrix, Case, CaseReport};

fn run_all(cases: &[Case]) -> Vec<CaseReport> {
    let start = Instant::now();
    let reports: Vec<CaseReport> = cases
        .iter()
        .map(|c| {
            let t = Instant::now();
            let r = explore(c);
            eprintln!("{} ({:.2}s)", report_line(&r), t.elapsed().as_secs_f64());
            r
        })
        .collect();
    eprintln!("{} in {:.1}s", totals_line(&reports), start.elapsed().as_secs_f64());
    reports
}

fn assert_clean(reports: &[CaseReport]) {
    for r in reports {
        assert!(!r.truncated, "{}: truncated at max_states", r.name);
        let found: Vec<String> = r.violations.iter().map(|v| format!("{v:#}")).collect();
        assert!(found.is_empty(), "{}: {}", r.name, found.join("\n"));
        assert!(r.terminal_states > 0, "{}: no terminal state", r.name);
    }
}

/// 2PC over two partitions of three replicas each: the largest single-transaction cases.
fn is_big(c: &Case) -> bool {
    c.replicas == 3 && c.txs.iter().any(|t| t.partitions.len() == 2)
}

/// The single-transaction matrix, split in two tests so that they run in parallel.
#[test]
fn single_transaction_matrix_is_clean() {
    let cases: Vec<Case> = single_tx_matrix().into_iter().filter(|c| !is_big(c)).collect();
    assert_clean(&run_all(&cases));
}

#[test]
fn single_transaction_2pc_over_three_replicas_is_clean() {
    let cases: Vec<Case> = single_tx_matrix().into_iter().filter(is_big).collect();
    assert_clean(&run_all(&cases));
}

#[test]
fn two_transaction_matrix_is_clean() {
    assert_clean(&run_all(&two_tx_matrix()));
}

/// The cheap cases of the whole matrix (no 2PC over three replicas), cheapest topologies first.
fn cheap_cases(breaks: Breaks) -> Vec<Case> {
    let mut cases: Vec<Case> = single_tx_matrix().into_iter().chain(two_tx_matrix()).collect();
    cases.retain(|c| c.replicas < 3 || c.txs.iter().all(|t| t.partitions.len() == 1));
    cases.sort_by_key(|c| (c.txs.len(), c.replicas, c.vnodes));
    for c in &mut cases {
        c.breaks = breaks;
        c.max_states = 200_000;
    }
    cases
}

/// The first case on which the explorer reports a violation under break `name`.
fn first_caught(name: &str) -> Option<(String, String)> {
    let mut breaks = Breaks::default();
    assert!(breaks.enable(name), "unknown break {name}");
    cheap_cases(breaks).iter().find_map(|c| {
        let r = explore(c);
        r.violations.first().map(|v| (r.name.clone(), v.to_string()))
    })
}

fn assert_caught(name: &str) {
    match first_caught(name) {
        Some((case, v)) => eprintln!("--break {name}: caught on {case}: {v}"),
        None => panic!("--break {name} went unnoticed by the explorer"),
    }
}

#[test]
fn no_tx_cut_is_caught() {
    assert_caught("no-tx-cut");
}

#[test]
fn color_after_handle_is_caught() {
    assert_caught("color-after-handle");
}

#[test]
#[ignore]
fn survey_breaks() {
    for name in Breaks::NAMES {
        match first_caught(name) {
            Some((case, v)) => eprintln!("--break {name}: caught on {case}: {v}"),
            None => eprintln!("--break {name}: NOT caught"),
        }
    }
}

/// The largest single-transaction case (2PC over two 3-replica partitions): a benchmark.
#[test]
#[ignore]
fn largest_single_case() {
    let mut cases = single_tx_matrix();
    cases.retain(|c| c.name == "3v/2b n0:[p1,p2]");
    assert_clean(&run_all(&cases));
}
