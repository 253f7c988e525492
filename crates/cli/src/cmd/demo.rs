//! `waymark demo --simulated`: Waymark's main job — consistent cuts of a cluster under load and
//! faults, each restored and verified — on an embedded, simulated cluster.

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use waymark_core::cut::restore::{find_finish, restore_to_cut, Checkpoint};
use waymark_sim::run::{reproduce, Summary};
use waymark_sim::world::World;
use waymark_sim::{checkers, SimConfig, WorkloadKind};

pub fn simulated(runs: u64, first: u64, duration_ms: u64) -> Result<()> {
    if runs == 0 || duration_ms < 200 {
        bail!("--runs must be at least 1 and --duration-ms at least 200 (got {runs} and {duration_ms})");
    }
    println!("Waymark demo: 3 store vnodes, 8 partitions, 2 replicas each; bank workload (8 accounts, 800 in total);");
    println!("crashes, torn log tails, partitions and broken connections injected; a consistent cut every ~70 ms.");
    println!("Every cut the cut process declares successful is restored on every vnode and checked.\n");
    let bar = ProgressBar::new(runs);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs  {msg}").expect("valid template"));
    let mut summary = Summary::default();
    let mut example = None;
    for seed in first..first + runs {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Bank);
        cfg.cuts = true;
        cfg.duration_us = duration_ms * 1000;
        let mut world = World::new(cfg.clone());
        world.run();
        let report = waymark_sim::run::report(&world);
        for v in &report.violations {
            bar.println(format!("seed {seed}: VIOLATION {v}\n  reproduce: {}", reproduce(&cfg)));
        }
        if example.is_none() {
            example = restored_example(&world);
        }
        summary.add(&report, &cfg);
        bar.set_message(format!(
            "cuts ok {} failed {} verified {}",
            summary.cuts_ok, summary.cuts_failed, summary.cuts_verified
        ));
        bar.inc(1);
    }
    bar.finish();
    print_result(&summary, example);
    if summary.failed > 0 {
        bail!("{} of {runs} runs found a violation", summary.failed);
    }
    Ok(())
}

/// The balances of the last successful cut of a run, as restored from the vnodes' logs.
fn restored_example(world: &World) -> Option<(u64, Vec<i64>)> {
    let cut = world.declared_cuts().into_iter().rev().find(|d| d.ok)?.cut;
    let mut restored = vec![];
    for node in &world.nodes {
        let finish = find_finish(&node.log, cut)?;
        restored.push(restore_to_cut(Checkpoint::default(), &node.log, finish).ok()?);
    }
    let balances = checkers::bank::balances_from(world, |n, k| restored[n].store.get(k).value);
    Some((cut.0, balances))
}

fn print_result(s: &Summary, example: Option<(u64, Vec<i64>)>) {
    let f = &s.faults;
    println!("\n{} runs, {} transfers committed", s.seeds, s.committed);
    println!(
        "faults injected: {} crashes ({} torn tails), {} partitions, {} broken connections, {} clogged links",
        f.crashes, f.torn, f.partitions, f.breaks, f.clogs
    );
    println!(
        "cuts: {} succeeded, {} failed safely (a vnode crashed or was cut off), {} restored on every vnode and verified",
        s.cuts_ok, s.cuts_failed, s.cuts_verified
    );
    if let Some((cut, balances)) = example {
        let sum: i64 = balances.iter().sum();
        println!("example: cut {cut} of the first run restored to balances {balances:?}, total {sum}");
    }
    println!("violations: {}", s.violations);
    println!("{} passed, {} failed", s.passed, s.failed);
}
