//! The cut process under a crash of its coordinator: the cut in flight fails, and the operator
//! takes the next ones as usual.

use waymark_sim::faults::Fault;
use waymark_sim::world::{Event, World};
use waymark_sim::{SimConfig, WorkloadKind};

/// Seed 3 of the bank workload with cuts and no random faults; `crash` places the coordinator's
/// crash (and its restart) relative to when the first cut began.
fn run(crash: Option<(u64, u64)>) -> World {
    let mut cfg = SimConfig::new(3, WorkloadKind::Bank);
    (cfg.cuts, cfg.faults) = (true, false);
    let mut w = World::new(cfg);
    if let Some((at_us, back_us)) = crash {
        w.schedule(at_us, Event::Fault(Fault::Crash(0)));
        w.schedule(back_us, Event::Fault(Fault::Restart(0)));
    }
    w.run();
    w
}

#[test]
fn a_crash_of_the_cut_coordinator_during_a_cut_does_not_stop_the_cuts_after_it() {
    let first = run(None);
    let begun_us = first.history.cut_windows.values().next().expect("a first cut").begun_us;
    // 5 ms in: `CutBegin` is durable and the `Start`s are out, the cut is under way.
    let (crash_us, back_us) = (begun_us + 5_000, begun_us + 50_000);
    let w = run(Some((crash_us, back_us)));
    let report = waymark_sim::run::report(&w);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let crashed = w.history.cut_windows.iter().find(|(_, win)| win.begun_us == begun_us).map(|(c, _)| *c);
    let declared = w.declared_cuts();
    assert!(
        crashed.is_some_and(|c| !declared.iter().any(|d| d.cut == c && d.ok)),
        "the cut in flight must not succeed"
    );
    let later: Vec<_> = w.history.cuts.iter().filter(|c| c.begun_us > back_us).collect();
    assert!(later.iter().any(|c| c.ok), "no cut succeeded after the coordinator came back: {later:?}");
}
