//! List-append: transactions read a few lists and append unique elements to a few others, in one
//! `MULTI … EXEC`, for the Elle-style dependency check.

use super::{Batch, Next, Plan, Workload};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

pub const KEYS: usize = 6;

pub fn list_key(i: usize) -> Key {
    format!("list{i}").into_bytes()
}

/// Key index of a list key (`list3` → 3).
pub fn list_index(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key.strip_prefix(b"list")?).ok()?.parse().ok()
}

/// Elements are stored as `e1,e2,…,` (each append adds `e,`).
pub fn parse_list(value: &Option<Value>) -> Vec<u64> {
    let Some(bytes) = value else { return vec![] };
    let text = String::from_utf8_lossy(bytes);
    text.split(',').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap_or(u64::MAX)).collect()
}

#[derive(Default)]
pub struct Append {
    next_elem: u64,
}

impl Workload for Append {
    fn setup(&self) -> Vec<(Key, Value)> {
        vec![]
    }

    fn plan(&mut self, _client: usize, rng: &mut ChaCha8Rng) -> Plan {
        let mut keys: Vec<usize> = (0..KEYS).collect();
        keys.shuffle(rng);
        let reads = rng.gen_range(0..=2);
        let appends = rng.gen_range(1..=2);
        let read_keys = keys[..reads].iter().map(|&i| list_key(i)).collect();
        let target_keys: Vec<Key> = keys[reads.min(1)..reads.min(1) + appends].iter().map(|&i| list_key(i)).collect();
        let params = target_keys
            .iter()
            .map(|_| {
                self.next_elem += 1;
                self.next_elem as i64
            })
            .collect();
        Plan { kind: "append", read_keys, params, target_keys }
    }

    /// One `MULTI`: a `GET` of each list read, then an `APPEND` of one unique element to each
    /// list written, and `EXEC`.
    fn next(&mut self, plan: &Plan, done: usize, _last: Option<&Answer>) -> Next {
        if done > 0 {
            return None;
        }
        let gets = plan.read_keys.iter().map(|k| DataCmd::Get(k.clone()));
        let appends = plan
            .target_keys
            .iter()
            .zip(&plan.params)
            .map(|(k, e)| DataCmd::Append(k.clone(), format!("{e},").into_bytes()));
        Some(("append", Batch::Exec(gets.chain(appends).collect())))
    }
}
