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
        assert!(r.violations.is_empty(), "{}: {}", r.name, r.violations.join("\n"));
        assert!(r.terminal_states > 0, "{}: no terminal state", r.name);
    }
}

#[test]
fn single_transaction_matrix_is_clean() {
    assert_clean(&run_all(&single_tx_matrix()));
}

#[test]
#[ignore]
fn two_transaction_matrix_is_clean() {
    assert_clean(&run_all(&two_tx_matrix()));
}
