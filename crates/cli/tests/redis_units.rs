//! Redis 7.0.15's own test units (`third_party/redis-tests`, external mode) against a 3-host
//! cluster, with its 16 databases (no `SINGLEDB`): the units Waymark passes stay passing (issue
//! 34). Each unit must run to the end and pass at least its figure below — 90% of what Redis
//! itself passes (`BASELINE.md`), rounded up — except where marked *floor*: a unit still below
//! 90% (its failures need lists and sorted sets, issue 35, or assert Redis's internal
//! encodings), held at what Waymark passes now so that it does not fall back.
//!
//! Waymark's figures when this was written (2026-12-07, with lists): `unit/expire` 58 of Redis's
//! 58, `unit/type/incr` 23 of 23, `unit/info-command` 3 of 3, `unit/quit` 3 of 3,
//! `unit/type/string` 74 of 75 (the one left asserts `OBJECT ENCODING int`, which Waymark does
//! not store), `unit/protocol` 15 (Redis itself passes 5 before it stalls in external mode),
//! `unit/multi` 25 of 35 (sorted sets and `SORT`, Lua scripts, `SAVE`, `SHUTDOWN`, `SWAPDB`).
//!
//! The cluster writes with fsync `never`: these units test what Waymark answers, and Redis's own
//! runs of them keep no fsynced log either (`unit/type/list-2` alone sends ~70 000 commands).

mod common;

use common::{wait_bounded, Cluster, Spec};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A unit, and the fewest of its tests that must pass.
const UNITS: [(&str, u32); 7] = [
    ("unit/expire", 53),
    ("unit/type/incr", 21),
    ("unit/info-command", 3),
    ("unit/quit", 3),
    ("unit/protocol", 5),
    ("unit/type/string", 68),
    ("unit/multi", 25), // floor: 90% is 32
];
/// The units of collections (issue 35), run with the suite's `--ignore-encoding`: Waymark keeps
/// a collection as records, never as a listpack or hash table, and a test that asserts an
/// encoding outside its `test` block would end the whole unit. The figures count the tests that
/// assert nothing but an encoding, which pass without checking anything (`type/hash`: 2, "Is the
/// small hash encoded with a listpack?" and "Is the big hash encoded with an hash table?";
/// `type/set`: 2): each minimum is 90% of what Redis passes plus those.
///
/// Waymark's figures when this was written (2026-12-07): `unit/type/hash` 70 of Redis's 72, the
/// two left need `DUMP`; `unit/type/set` 92 of Redis's 95 (2 assert only an encoding, "Generated
/// sets must be encoded as intset|hashtable"), the three left push onto lists or sorted sets;
/// `unit/keyspace` 47 of 52 (the `COPY`s of sorted sets and streams, and `MOVE basic usage`,
/// which counts keys a failed one left), its `COPY`s of collections comparing a dummy digest
/// without `DEBUG DIGEST-VALUE`; `unit/type/list` 203–204 of Redis's 220 in 4 runs — `SORT …
/// STORE`, `SWAPDB`, `CLIENT UNBLOCK` and `DUMP` (7 tests) are not built, and the rest wait on
/// what Redis does within one event loop: a pushed element moved on through a chain of blocked
/// `BLMOVE`s before the next command ("Linked LMOVEs", "Circular BRPOPLPUSH", "PUSH resulting from
/// BRPOPLPUSH affect WATCH"; a blocked client here looks again within 20 ms), and the tests
/// after those that count blocked clients, which find the earlier ones still there;
/// `unit/type/list-2` 2 of 2 and `unit/type/list-3` 11 of 11.
const COLLECTION_UNITS: [(&str, u32); 6] = [
    ("unit/type/hash", 65 + 2),
    ("unit/type/set", 86 + 2),
    ("unit/keyspace", 47),
    ("unit/type/list", 198),
    ("unit/type/list-2", 2),
    ("unit/type/list-3", 10),
];
/// How long all the units of one run may take (each takes seconds, `type/list-2` and
/// `type/list-3` about 90 s each on a test build).
const UNITS_WITHIN: Duration = Duration::from_secs(900);

fn run_units_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../third_party/redis-tests/run-units.sh")
}

/// `unit/expire               57     1     10  done …` → (ok, status) of `unit`'s row.
fn row(table: &str, unit: &str) -> Option<(u32, String)> {
    let line = table.lines().find(|l| l.split_whitespace().next() == Some(unit))?;
    let cols: Vec<&str> = line.split_whitespace().collect();
    Some((cols.get(1)?.parse().ok()?, cols.get(4)?.to_string()))
}

/// Runs `units` against `cluster`'s node1 with `extra` runtest arguments; returns the table.
fn run_units(cluster: &Cluster, units: &[(&str, u32)], extra: &str) -> String {
    let addr = cluster.host("node1").redis_addr();
    let mut cmd = Command::new("bash");
    cmd.arg(run_units_script()).arg(addr.ip().to_string()).arg(addr.port().to_string());
    cmd.args(units.iter().map(|(unit, _)| *unit));
    cmd.env("UNIT_TIMEOUT", "300")
        .env("STALL_TIMEOUT", "150")
        .env("EXTRA_ARGS", extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("bash runs run-units.sh (tclsh: scripts/test installs tcl)");
    let out = wait_bounded(child, UNITS_WITHIN, "run-units.sh");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{table}\n{}", String::from_utf8_lossy(&out.stderr));
    table
}

#[test]
fn redis_units_of_strings_counters_expiry_and_collections_pass_against_three_hosts() {
    let cluster = Cluster::start(&Spec::new(3, 2).fsync_never());
    let mut table = run_units(&cluster, &UNITS, "");
    table.push_str(&run_units(&cluster, &COLLECTION_UNITS, "--ignore-encoding"));
    for (unit, at_least) in UNITS.into_iter().chain(COLLECTION_UNITS) {
        let (ok, status) = row(&table, unit).unwrap_or_else(|| panic!("no row for {unit} in:\n{table}"));
        assert_eq!(status, "done", "{unit} did not run to the end");
        assert!(ok >= at_least, "{unit}: {ok} tests passed, fewer than {at_least}");
    }
}
