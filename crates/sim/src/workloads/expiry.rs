//! A cache: clients set values with a deadline (`SET … PX`) or without, read them, give them a
//! deadline (`PEXPIRE`) or take it away (`PERSIST`), on a few keys — so that reads race deadlines,
//! the primaries' lazy and active expiries, failovers and cuts (checker `expiry`).

use super::{Batch, Next, Plan, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::command::{ExpireIf, Expiry as Deadline, SetTtl};
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

pub const KEYS: usize = 6;

fn key(i: usize) -> Key {
    format!("cache{i}").into_bytes()
}

#[derive(Default)]
pub struct Expiry {
    next_value: u64,
}

impl Workload for Expiry {
    fn setup(&self) -> Vec<(Key, Value)> {
        vec![]
    }

    /// `params`: [operation, milliseconds, value number].
    fn plan(&mut self, _client: usize, rng: &mut ChaCha8Rng) -> Plan {
        self.next_value += 1;
        let op = rng.gen_range(0..100);
        let ms = rng.gen_range(5..300);
        let target_keys = vec![key(rng.gen_range(0..KEYS))];
        Plan { kind: "expiry", read_keys: vec![], params: vec![op, ms, self.next_value as i64], target_keys }
    }

    fn next(&mut self, plan: &Plan, done: usize, _last: Option<&Answer>) -> Next {
        if done > 0 {
            return None;
        }
        let (k, ms) = (plan.target_keys[0].clone(), plan.params[1] as u64);
        let value = format!("v{}", plan.params[2]).into_bytes();
        let cmd = match plan.params[0] {
            0..=34 => DataCmd::SetEx(k, value, Deadline::In(ms)),
            35..=44 => DataCmd::Set(k, value),
            45..=74 => DataCmd::Get(k),
            75..=84 => DataCmd::Expire(k, Deadline::In(ms), ExpireIf::Always),
            85..=89 => DataCmd::Persist(k),
            // A read and a conditional write in one transaction: the value must still be live.
            _ => {
                let keep = DataCmd::SetIf {
                    key: k.clone(),
                    value,
                    only: waymark_core::client::command::Existing::Present,
                    get: true,
                    ttl: SetTtl::Keep,
                };
                return Some(("expiry", Batch::Exec(vec![DataCmd::Get(k), keep])));
            }
        };
        Some(("expiry", Batch::Command(cmd)))
    }
}
