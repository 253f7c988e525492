//! Per-command counters for `INFO commandstats`, as Redis keeps them: calls, the time they took,
//! and the calls refused before running (`rejected_calls`: a syntax or arity error, a denied
//! permission, no authentication, a full `MULTI` queue) or that answered an error while running
//! (`failed_calls`).
//!
//! Bounded: only the names of commands Waymark knows are counted (a client sending made-up names
//! cannot grow the table), with a container's subcommand (`client|list`) as Redis names it.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// How one call ended, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// It ran and answered something other than an error.
    Done,
    /// Refused before it ran.
    Rejected,
    /// It ran and answered an error.
    Failed,
}

/// One command's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// Subcommands counted per container command: bounded like the names.
const SUBCOMMANDS_MAX: usize = 256;

#[derive(Debug, Default)]
pub struct CommandStats {
    table: Mutex<BTreeMap<String, CommandStat>>,
}

impl CommandStats {
    /// Counts a call of `name` (lower case, `container|sub` for a container's subcommand), if its
    /// base is one of `known`. A rejected call is not a call, as in Redis.
    pub fn record(&self, name: &str, known: impl Fn(&str) -> bool, usec: u64, outcome: CallOutcome) {
        let mut table = self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A name counted before is known: only a new one is looked up (and its key allocated).
        let stat = match table.get_mut(name) {
            Some(stat) => stat,
            None => {
                let base = name.split('|').next().unwrap_or(name);
                if !known(base) || name.contains('|') && table.len() >= SUBCOMMANDS_MAX {
                    return;
                }
                table.entry(name.to_string()).or_default()
            }
        };
        match outcome {
            CallOutcome::Rejected => stat.rejected_calls += 1,
            CallOutcome::Done | CallOutcome::Failed => {
                stat.calls += 1;
                stat.usec += usec;
                stat.failed_calls += u64::from(outcome == CallOutcome::Failed);
            }
        }
    }

    /// Every command counted so far, by name.
    pub fn snapshot(&self) -> BTreeMap<String, CommandStat> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(&self) {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_failures_and_refusals_are_counted_apart_and_unknown_names_not_at_all() {
        let stats = CommandStats::default();
        let known = |n: &str| ["get", "client"].contains(&n);
        stats.record("get", known, 10, CallOutcome::Done);
        stats.record("get", known, 5, CallOutcome::Failed);
        stats.record("get", known, 0, CallOutcome::Rejected);
        stats.record("client|list", known, 7, CallOutcome::Done);
        stats.record("nosuchcommand", known, 1, CallOutcome::Done);
        let table = stats.snapshot();
        let get = CommandStat { calls: 2, usec: 15, rejected_calls: 1, failed_calls: 1 };
        assert_eq!(table.get("get"), Some(&get));
        assert_eq!(table.get("client|list").map(|s| s.calls), Some(1));
        assert_eq!(table.len(), 2, "{table:?}");
    }
}
