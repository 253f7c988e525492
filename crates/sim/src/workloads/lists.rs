//! Lists (issue 35): clients push unique elements onto a few lists, pop them off either end, move
//! them between lists, trim, remove and insert, read lists whole and by index, delete and expire
//! lists, and block on them (`BLPOP`, `BLMOVE` with a short time-out) — so that pushes and pops
//! race lists being dropped and replaced, failovers, catch-ups and cuts (checker `collections`:
//! a list's head names exactly the positions its elements are at).

use super::{Batch, Next, Plan, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::command::{End, ExpireIf, Expiry as Deadline, ListCmd};
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

pub const KEYS: usize = 3;

fn key(i: usize) -> Key {
    format!("list{i}").into_bytes()
}

#[derive(Default)]
pub struct Lists {
    /// Elements pushed so far: each element is pushed once (`e<client>.<n>`).
    pushed: u64,
}

impl Workload for Lists {
    fn setup(&self) -> Vec<(Key, Value)> {
        vec![]
    }

    /// `params`: [operation, element number, milliseconds, index]; `target_keys`: two lists,
    /// not always distinct.
    fn plan(&mut self, client: usize, rng: &mut ChaCha8Rng) -> Plan {
        self.pushed += 1;
        let params = vec![rng.gen_range(0..100), self.pushed as i64, rng.gen_range(5..200), rng.gen_range(-3..3)];
        let target_keys = (0..2).map(|_| key(rng.gen_range(0..KEYS))).collect();
        Plan { kind: "lists", read_keys: vec![client.to_string().into_bytes()], params, target_keys }
    }

    fn next(&mut self, plan: &Plan, done: usize, _last: Option<&Answer>) -> Next {
        if done > 0 {
            return None;
        }
        let [a, b] = [0, 1].map(|i| plan.target_keys[i].clone());
        let client = String::from_utf8_lossy(&plan.read_keys[0]).into_owned();
        let element = format!("e{client}.{}", plan.params[1]).into_bytes();
        let (ms, index) = (plan.params[2] as u64, plan.params[3]);
        let on = |k: Key, lc: ListCmd| DataCmd::List(k, lc);
        let push = |end, values: Vec<Value>| ListCmd::Push { end, values, only_existing: false };
        let cmd = match plan.params[0] {
            0..=19 => on(a, push(End::Right, vec![element])),
            20..=29 => on(a, push(End::Left, vec![element.clone(), [&element[..], b"'"].concat()])),
            30..=39 => on(a, ListCmd::Pop(End::Left, None)),
            40..=44 => on(a, ListCmd::Pop(End::Right, Some(2))),
            45..=52 => DataCmd::LMove { from: a, to: b, from_end: End::Right, to_end: End::Left },
            53..=57 => on(a, ListCmd::Range(0, -1)),
            58..=60 => on(a, ListCmd::Index(index)),
            61..=63 => on(a, ListCmd::Trim(1, -2)),
            64..=66 => on(a, ListCmd::Set(index, element)),
            67..=69 => on(a, ListCmd::Insert { before: index < 0, pivot: b"e0.1".to_vec(), value: element }),
            70..=72 => on(a, ListCmd::Rem(index, b"e1.2".to_vec())),
            73..=76 => DataCmd::Del(vec![a]),
            77..=80 => DataCmd::Expire(a, Deadline::In(ms), ExpireIf::Always),
            81..=86 => {
                let blpop = DataCmd::LMPop { keys: vec![a, b], end: End::Left, count: None };
                return Some(("lists", Batch::Blocking(blpop, ms)));
            }
            87..=90 => {
                let blmove = DataCmd::LMove { from: a, to: b, from_end: End::Left, to_end: End::Right };
                return Some(("lists", Batch::Blocking(blmove, ms)));
            }
            _ => {
                let batch = vec![on(a.clone(), ListCmd::Pop(End::Left, None)), on(a, push(End::Right, vec![element]))];
                return Some(("lists", Batch::Exec(batch)));
            }
        };
        Some(("lists", Batch::Command(cmd)))
    }
}
