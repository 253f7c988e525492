//! Hashes (issue 35): clients add to fields, delete them, read hashes whole, and delete, replace,
//! rename and expire whole hashes, on a few keys — so that a collection's elements race its head
//! being dropped, failovers, catch-ups and cuts (checker `collections`).

use super::{Batch, Next, Plan, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::command::{ExpireIf, Expiry as Deadline, HashCmd};
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

pub const KEYS: usize = 4;
pub const FIELDS: usize = 5;

fn key(i: usize) -> Key {
    format!("hash{i}").into_bytes()
}

fn field(i: i64) -> Vec<u8> {
    format!("f{i}").into_bytes()
}

#[derive(Default)]
pub struct Hashes;

impl Workload for Hashes {
    fn setup(&self) -> Vec<(Key, Value)> {
        vec![]
    }

    /// `params`: [operation, field, milliseconds]; `target_keys`: the hash, and another.
    fn plan(&mut self, _client: usize, rng: &mut ChaCha8Rng) -> Plan {
        let op = rng.gen_range(0..100);
        let f = rng.gen_range(0..FIELDS as i64);
        let ms = rng.gen_range(5..300);
        let target_keys = vec![key(rng.gen_range(0..KEYS)), key(rng.gen_range(0..KEYS))];
        Plan { kind: "hash", read_keys: vec![], params: vec![op, f, ms], target_keys }
    }

    fn next(&mut self, plan: &Plan, done: usize, _last: Option<&Answer>) -> Next {
        if done > 0 {
            return None;
        }
        let (k, other) = (plan.target_keys[0].clone(), plan.target_keys[1].clone());
        let (f, ms) = (field(plan.params[1]), plan.params[2] as u64);
        let hash = |c: HashCmd| DataCmd::Hash(k.clone(), c);
        let cmd = match plan.params[0] {
            0..=29 => hash(HashCmd::IncrBy(f, 1)),
            30..=39 => hash(HashCmd::Set { pairs: vec![(f, b"7".to_vec())], ok: false }),
            40..=49 => hash(HashCmd::Del(vec![f])),
            50..=64 => hash(HashCmd::GetAll),
            65..=69 => DataCmd::Del(vec![k]),
            // A blind write: the primary, not the client, finds the hash it replaces.
            70..=74 => DataCmd::Set(k, b"text".to_vec()),
            75..=79 => DataCmd::Rename { from: k, to: other, nx: false },
            80..=84 => DataCmd::Expire(k, Deadline::In(ms), ExpireIf::Always),
            _ => {
                let batch = vec![hash(HashCmd::IncrBy(f.clone(), 1)), hash(HashCmd::Len), hash(HashCmd::Get(f))];
                return Some(("hash", Batch::Exec(batch)));
            }
        };
        Some(("hash", Batch::Command(cmd)))
    }
}
