//! Sets (issue 35): clients add and remove members, move them between sets, pop them, read sets
//! whole, store unions and intersections, and delete and expire whole sets, on a few keys — so
//! that members race their sets being dropped and replaced, failovers, catch-ups and cuts
//! (checker `collections`).

use super::{Batch, Next, Plan, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::command::{ExpireIf, Expiry as Deadline, SetCmd, SetOp};
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

pub const KEYS: usize = 4;
pub const MEMBERS: i64 = 6;

fn key(i: usize) -> Key {
    format!("set{i}").into_bytes()
}

#[derive(Default)]
pub struct Sets;

impl Workload for Sets {
    fn setup(&self) -> Vec<(Key, Value)> {
        vec![]
    }

    /// `params`: [operation, member, milliseconds]; `target_keys`: three sets, not all distinct.
    fn plan(&mut self, _client: usize, rng: &mut ChaCha8Rng) -> Plan {
        let op = rng.gen_range(0..100);
        let m = rng.gen_range(0..MEMBERS);
        let ms = rng.gen_range(5..300);
        let target_keys = (0..3).map(|_| key(rng.gen_range(0..KEYS))).collect();
        Plan { kind: "sets", read_keys: vec![], params: vec![op, m, ms], target_keys }
    }

    fn next(&mut self, plan: &Plan, done: usize, _last: Option<&Answer>) -> Next {
        if done > 0 {
            return None;
        }
        let [a, b, c] = [0, 1, 2].map(|i| plan.target_keys[i].clone());
        let (member, ms) = (format!("m{}", plan.params[1]).into_bytes(), plan.params[2] as u64);
        let on = |k: Key, sc: SetCmd| DataCmd::Members(k, sc);
        let cmd = match plan.params[0] {
            0..=29 => on(a, SetCmd::Add(vec![member])),
            30..=44 => on(a, SetCmd::Rem(vec![member])),
            45..=59 => DataCmd::SMove { from: a, to: b, member },
            60..=64 => on(a, SetCmd::Pop(Some(2))),
            65..=74 => on(a, SetCmd::Members),
            75..=79 => DataCmd::Algebra { op: SetOp::Union, keys: vec![a, b], store: Some(c), card: None },
            80..=84 => DataCmd::Algebra { op: SetOp::Inter, keys: vec![a, b], store: Some(c), card: None },
            85..=89 => DataCmd::Del(vec![a]),
            90..=94 => DataCmd::Expire(a, Deadline::In(ms), ExpireIf::Always),
            _ => {
                let batch = vec![on(a.clone(), SetCmd::Add(vec![member.clone()])), on(a, SetCmd::Card)];
                return Some(("sets", Batch::Exec(batch)));
            }
        };
        Some(("sets", Batch::Command(cmd)))
    }
}
