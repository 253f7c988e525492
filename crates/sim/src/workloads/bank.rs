//! Bank: N accounts, transfers across partitions guarded by `WATCH` (read, check, write both), or
//! `INCRBY` pairs guarded by a `WATCH` on the source; and audits that read every account in one
//! transaction. Money is neither made nor lost, and no account goes negative.

use super::{parse_i64, Plan, Workload};
use crate::history::ClientRead;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::{Key, Write, WriteOp};

pub const ACCOUNTS: usize = 8;
pub const INITIAL_BALANCE: i64 = 100;

pub fn account(i: usize) -> Key {
    format!("acct{i}").into_bytes()
}

pub fn total() -> i64 {
    ACCOUNTS as i64 * INITIAL_BALANCE
}

pub fn is_account(key: &[u8]) -> bool {
    key.starts_with(b"acct")
}

#[derive(Default)]
pub struct Bank;

impl Workload for Bank {
    fn setup(&self) -> Vec<Write> {
        (0..ACCOUNTS)
            .map(|i| Write { key: account(i), op: WriteOp::Set(INITIAL_BALANCE.to_string().into_bytes()) })
            .collect()
    }

    fn plan(&mut self, _client: usize, rng: &mut ChaCha8Rng) -> Plan {
        let roll = rng.gen_range(0..10);
        if roll == 0 {
            let keys: Vec<Key> = (0..ACCOUNTS).map(account).collect();
            return Plan { kind: "audit", read_keys: keys, params: vec![], target_keys: vec![] };
        }
        let a = rng.gen_range(0..ACCOUNTS);
        let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
        let amount = rng.gen_range(1..=30);
        let (kind, read_keys) =
            if roll < 6 { ("transfer", vec![account(a), account(b)]) } else { ("incrby", vec![account(a)]) };
        Plan { kind, read_keys, params: vec![amount], target_keys: vec![account(a), account(b)] }
    }

    fn build(&mut self, plan: &Plan, reads: &[ClientRead]) -> Option<Vec<Write>> {
        if plan.kind == "audit" {
            return Some(vec![]);
        }
        let amount = plan.params[0];
        let from_balance = parse_i64(&reads[0].value);
        if from_balance < amount {
            return None;
        }
        let (a, b) = (plan.target_keys[0].clone(), plan.target_keys[1].clone());
        if plan.kind == "transfer" {
            let to_balance = parse_i64(&reads[1].value);
            return Some(vec![
                Write { key: a, op: WriteOp::Set((from_balance - amount).to_string().into_bytes()) },
                Write { key: b, op: WriteOp::Set((to_balance + amount).to_string().into_bytes()) },
            ]);
        }
        Some(vec![Write { key: a, op: WriteOp::IncrBy(-amount) }, Write { key: b, op: WriteOp::IncrBy(amount) }])
    }
}
