//! Workloads: what clients ask for. A workload plans an operation (which keys to read first), then
//! turns what was read into the writes of one transaction.

pub mod append;
pub mod bank;

use crate::history::ClientRead;
use rand_chacha::ChaCha8Rng;
use waymark_core::{Key, Value, Write};

/// One client operation: GET `read_keys` one by one, then (maybe) one transaction.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: &'static str,
    pub read_keys: Vec<Key>,
    /// Per-plan data the workload needs to build the writes (amount, elements, …).
    pub params: Vec<i64>,
    pub target_keys: Vec<Key>,
}

pub trait Workload {
    /// Writes of the one transaction that sets up the initial state.
    fn setup(&self) -> Vec<Write>;
    fn plan(&mut self, client: usize, rng: &mut ChaCha8Rng) -> Plan;
    /// The writes of the transaction, or `None` to skip it (e.g. not enough money).
    fn build(&mut self, plan: &Plan, reads: &[ClientRead]) -> Option<Vec<Write>>;
}

pub fn parse_i64(v: &Option<Value>) -> i64 {
    v.as_deref().and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.parse().ok()).unwrap_or(0)
}
