//! Faults drawn from the seed: crashes (with torn tails) and restarts, connection breaks,
//! partitions (symmetric and one-way) that heal, and FoundationDB-style swizzle clogging — several
//! links clogged one by one, unclogged in random order. Duplicated and long-delayed messages are
//! drawn per message in `World::send` (`net::Mishap`).

use crate::slot::{Direction, Resident, Slot};
use crate::tree::host::TreeHost;
use crate::world::{Event, World};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Hash)]
pub enum Fault {
    /// Store vnode `i` crashes.
    Crash(usize),
    /// Store vnode `i` comes back.
    Restart(usize),
    Break(Slot, Slot),
    Partition {
        id: u32,
        links: Vec<Direction>,
        one_way: bool,
    },
    Heal {
        id: u32,
    },
    Clog {
        from: Slot,
        to: Slot,
        until_us: u64,
    },
    CrashManager {
        m: usize,
        down_us: u64,
    },
    /// Every vnode of `host` at once, store vnodes and managers (the root's host too); secondary
    /// parents it runs stop. All come back after `down_us`, by boot loading.
    CrashHost {
        host: String,
        down_us: u64,
    },
    /// The next alteration read back on tree vnode `node` is damaged.
    Corrupt {
        node: Slot,
    },
    /// `--failover`: every link between `host`'s vnodes and other hosts' is cut, both ways, while
    /// they keep running and their clients keep reaching them (the old primary alive behind a
    /// partition), until `Rejoin`.
    Isolate {
        host: String,
    },
    Rejoin {
        host: String,
    },
}

#[derive(Clone, Debug, Default)]
pub struct FaultCounts {
    pub crashes: u64,
    /// Whole hosts down at once (`--tree`): every store vnode and manager on them.
    pub host_crashes: u64,
    pub torn: u64,
    pub partitions: u64,
    pub one_way: u64,
    pub breaks: u64,
    pub clogs: u64,
    /// Messages delivered twice, and messages held 0.5–3 s (`net::Mishap`).
    pub duplicates: u64,
    pub long_delays: u64,
    /// `--failover`: hosts cut off from all others while running (those struck after a decision
    /// too), and hosts killed or cut off right after one of their nears decided a commit.
    pub isolated_hosts: u64,
    pub nears_struck: u64,
}

impl FaultCounts {
    pub fn add(&mut self, o: &FaultCounts) {
        self.crashes += o.crashes;
        self.host_crashes += o.host_crashes;
        self.torn += o.torn;
        self.partitions += o.partitions;
        self.one_way += o.one_way;
        self.breaks += o.breaks;
        self.clogs += o.clogs;
        self.duplicates += o.duplicates;
        self.long_delays += o.long_delays;
        self.isolated_hosts += o.isolated_hosts;
        self.nears_struck += o.nears_struck;
    }
}

#[derive(Debug, Default)]
pub struct Faults {
    pub counts: FaultCounts,
    active: BTreeMap<u32, Vec<Direction>>,
    next_id: u32,
}

/// Draws this seed's fault schedule inside the workload's window.
pub fn plan(w: &mut World) {
    let n = w.nodes.len();
    let (from_us, to_us) = (100_000, w.cfg.duration_us * 9 / 10);
    let at = |w: &mut World| w.rng.gen_range(from_us..to_us.max(from_us + 1));
    for _ in 0..w.rng.gen_range(0..=2) {
        let (t, node) = (at(w), w.rng.gen_range(0..n));
        w.schedule(t, Event::Fault(Fault::Crash(node)));
        let back = t + w.rng.gen_range(10_000..300_000);
        w.schedule(back, Event::Fault(Fault::Restart(node)));
    }
    for _ in 0..w.rng.gen_range(0..=5) {
        let (t, a, b) = (at(w), w.rng.gen_range(0..n), w.rng.gen_range(0..n));
        w.schedule(t, Event::Fault(Fault::Break(Slot::store(a), Slot::store(b))));
    }
    for _ in 0..w.rng.gen_range(0..=2) {
        let t = at(w);
        plan_partition(w, t);
    }
    if w.rng.gen_bool(0.5) {
        let t = at(w);
        plan_swizzle(w, t);
    }
    if w.cfg.tree {
        plan_tree(w, from_us, to_us.max(from_us + 1));
    }
    if w.cfg.tree && w.cfg.failover && w.cfg.aimed_faults {
        plan_failover(w, from_us, to_us.max(from_us + 1));
    }
}

/// `--failover`'s aimed faults, each in 7 seeds of 10: a host cut off from the others for 0.4–2 s
/// while it runs (a primary that must stop serving before its replacement starts: the lease), and
/// a host killed or cut off within 2 ms of one of its nears deciding a commit, for 0.4–2 s (the
/// branches left in doubt without their coordinator). Drawn from their own generator, so that the schedule the
/// seeds drew before these faults existed is unchanged where neither is drawn.
fn plan_failover(w: &mut World, from_us: u64, to_us: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(w.cfg.seed ^ 0x6661_696c_6f76);
    let hosts: Vec<String> = w.nodes.iter().map(|n| n.cfg.id.host.clone()).collect();
    if rng.gen_bool(0.7) {
        let (t, host) = (rng.gen_range(from_us..to_us), hosts[rng.gen_range(0..hosts.len())].clone());
        let back = t + rng.gen_range(400_000..2_000_000);
        w.schedule(t, Event::Fault(Fault::Isolate { host: host.clone() }));
        w.schedule(back, Event::Fault(Fault::Rejoin { host }));
    }
    if rng.gen_bool(0.7) {
        let from_us = rng.gen_range(from_us..to_us);
        let (delay_us, for_us) = (rng.gen_range(0..2_000), rng.gen_range(400_000..2_000_000));
        let isolate = rng.gen_bool(0.5);
        w.after_decision = Some(AfterDecision { from_us, delay_us, for_us, isolate });
    }
}

/// Armed by `plan_failover`: the first near to decide a commit at `from_us` or later has its host
/// killed, or cut off while it runs (`isolate`), `delay_us` after, for `for_us`. Cut off, the
/// decision's `Finish` messages still in flight are lost, while the host's own clients still read
/// what it committed.
#[derive(Clone, Copy, Debug)]
pub struct AfterDecision {
    pub from_us: u64,
    pub delay_us: u64,
    pub for_us: u64,
    pub isolate: bool,
}

/// Store vnode `node` appended a near's commit decision: strike its host if the fault is armed.
pub fn decided(w: &mut World, node: usize) {
    let Some(d) = w.after_decision.filter(|d| w.now_us >= d.from_us && !w.is_stopping()) else { return };
    w.after_decision = None;
    w.faults.counts.nears_struck += 1;
    let (host, at) = (w.nodes[node].cfg.id.host.clone(), w.now_us + d.delay_us);
    if d.isolate {
        w.schedule(at, Event::Fault(Fault::Isolate { host: host.clone() }));
        w.schedule(at + d.for_us, Event::Fault(Fault::Rejoin { host }));
    } else {
        w.schedule(at, Event::Fault(Fault::CrashHost { host, down_us: d.for_us }));
    }
}

/// Manager crashes (the root included) and one damaged alteration record.
fn plan_tree(w: &mut World, from_us: u64, to_us: u64) {
    let managers = w.managers.len();
    for _ in 0..w.rng.gen_range(1..=2) {
        let (t, m) = (w.rng.gen_range(from_us..to_us), w.rng.gen_range(0..managers));
        let down_us = w.rng.gen_range(50_000..400_000);
        w.schedule(t, Event::Fault(Fault::CrashManager { m, down_us }));
    }
    if w.rng.gen_bool(0.5) {
        let (t, node) = (w.rng.gen_range(from_us..to_us), Slot::random(&mut w.rng, w.nodes.len() + managers));
        w.schedule(t, Event::Fault(Fault::Corrupt { node }));
    }
    if w.rng.gen_bool(0.3) {
        let t = w.rng.gen_range(from_us..to_us);
        let host = w.nodes[w.rng.gen_range(0..w.nodes.len())].cfg.id.host.clone();
        let down_us = w.rng.gen_range(50_000..400_000);
        w.schedule(t, Event::Fault(Fault::CrashHost { host, down_us }));
    }
    if w.cfg.failover && w.rng.gen_bool(0.5) {
        // A host down long past the grace — often for the rest of the run (the end heals it).
        let t = w.rng.gen_range(from_us..to_us);
        let host = w.nodes[w.rng.gen_range(0..w.nodes.len())].cfg.id.host.clone();
        let down_us = w.rng.gen_range(400_000..2_000_000);
        w.schedule(t, Event::Fault(Fault::CrashHost { host, down_us }));
    }
}

/// A whole host goes down with every vnode it runs.
fn crash_host(w: &mut World, host: &str, down_us: u64) {
    w.faults.counts.host_crashes += 1;
    w.host_downs.push((host.to_string(), w.now_us));
    let stores: Vec<usize> = (0..w.nodes.len()).filter(|n| w.nodes[*n].cfg.id.host == host).collect();
    for node in stores {
        crash(w, node);
        w.schedule(w.now_us + down_us, Event::Fault(Fault::Restart(node)));
    }
    let managers: Vec<usize> = (0..w.managers.len()).filter(|m| w.managers[*m].cfg.id.host == host).collect();
    for m in managers {
        match w.managers[m].cfg.secondary_of {
            Some(_) => w.stop_secondary(&w.managers[m].cfg.id.clone()),
            None => w.crash_manager(m, down_us),
        }
    }
}

fn plan_partition(w: &mut World, t: u64) {
    let n = w.slots();
    let mut ids: Vec<Slot> = Slot::all(n).collect();
    ids.shuffle(&mut w.rng);
    let side = w.rng.gen_range(1..n.max(2));
    let (a, b) = ids.split_at(side.min(n));
    let one_way = w.rng.gen_bool(0.5);
    let mut links = vec![];
    for &x in a {
        for &y in b {
            links.push(Direction { from: x, to: y });
            if !one_way {
                links.push(Direction { from: y, to: x });
            }
        }
    }
    let id = w.faults.next_id;
    w.faults.next_id += 1;
    w.schedule(t, Event::Fault(Fault::Partition { id, links, one_way }));
    let heal = t + w.rng.gen_range(10_000..300_000);
    w.schedule(heal, Event::Fault(Fault::Heal { id }));
}

/// Clog up to four links one after another; each unclogs at its own random time.
fn plan_swizzle(w: &mut World, t: u64) {
    let n = w.nodes.len();
    let mut t = t;
    for _ in 0..w.rng.gen_range(1..=4) {
        let (from, to) = (Slot::random(&mut w.rng, n), Slot::random(&mut w.rng, n));
        let until_us = t + w.rng.gen_range(10_000..200_000);
        w.schedule(t, Event::Fault(Fault::Clog { from, to, until_us }));
        t += w.rng.gen_range(1_000..20_000);
    }
}

pub fn apply(w: &mut World, f: Fault) {
    if w.is_stopping() {
        return;
    }
    match f {
        Fault::Crash(node) => crash(w, node),
        Fault::Restart(node) if w.cfg.tree => w.host_back(Slot::store(node)),
        Fault::Restart(node) => w.restart(node),
        Fault::Break(a, b) => {
            w.faults.counts.breaks += 1;
            w.net.break_connection(a, b);
        }
        Fault::Partition { id, links, one_way } => {
            w.faults.counts.partitions += 1;
            w.faults.counts.one_way += one_way as u64;
            for d in &links {
                w.net.block(d.from, d.to);
            }
            w.faults.active.insert(id, links);
        }
        Fault::Heal { id } => heal(w, id),
        Fault::Isolate { host } => {
            w.faults.counts.isolated_hosts += 1;
            *w.isolated.entry(host).or_insert(0) += 1;
        }
        Fault::Rejoin { host } => rejoin(w, &host),
        Fault::Clog { from, to, until_us } => {
            w.faults.counts.clogs += 1;
            w.net.clog(from, to, until_us);
        }
        Fault::CrashManager { m, down_us } => w.crash_manager(m, down_us),
        Fault::CrashHost { host, down_us } => crash_host(w, &host, down_us),
        Fault::Corrupt { node } => {
            w.tree_stats.md5_corruptions += 1;
            match w.resident(node) {
                Resident::Manager(m) => w.managers[m].corrupt_next = true,
                Resident::Store(i) => w.nodes[i].corrupt_next = true,
            }
        }
    }
}

fn crash(w: &mut World, node: usize) {
    if w.nodes[node].vnode.is_none() {
        return;
    }
    w.faults.counts.crashes += 1;
    if w.nodes[node].crash(&mut w.rng) {
        w.faults.counts.torn += 1;
    }
    w.net.break_all_of(Slot::store(node), w.slots());
    w.coordinator_crashed(node);
}

fn heal(w: &mut World, id: u32) {
    if let Some(links) = w.faults.active.remove(&id) {
        for d in links {
            w.net.unblock(d.from, d.to);
        }
    }
}

fn rejoin(w: &mut World, host: &str) {
    if let Some(n) = w.isolated.get_mut(host) {
        *n -= 1;
        if *n == 0 {
            w.isolated.remove(host);
        }
    }
}

/// The end of the run: every partition heals, every clog clears, every crashed vnode restarts.
pub fn heal_all(w: &mut World) {
    let ids: Vec<u32> = w.faults.active.keys().copied().collect();
    for id in ids {
        heal(w, id);
    }
    w.net.unclog_all(w.now_us);
    w.isolated.clear();
    for node in 0..w.nodes.len() {
        w.restart(node);
    }
}
