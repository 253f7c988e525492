//! Bank: N accounts, transfers across partitions guarded by `WATCH` (read, check, write both), or
//! `INCRBY` pairs guarded by a `WATCH` on the source; and audits that read every account in one
//! transaction. Money is neither made nor lost, and no account goes negative.

use super::{parse_i64, values_of, Batch, Next, Plan, Workload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use waymark_core::client::{Answer, DataCmd};
use waymark_core::{Key, Value};

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
    fn setup(&self) -> Vec<(Key, Value)> {
        (0..ACCOUNTS).map(|i| (account(i), INITIAL_BALANCE.to_string().into_bytes())).collect()
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

    /// An audit is one `MGET` of every account. A transfer `WATCH`es what it reads, reads it with
    /// `MGET`, and — if the payer has the money — sets both balances (`transfer`) or moves the
    /// amount with `DECRBY`/`INCRBY` (`incrby`) between `MULTI` and `EXEC`.
    fn next(&mut self, plan: &Plan, done: usize, last: Option<&Answer>) -> Next {
        if plan.kind == "audit" {
            return (done == 0).then(|| ("audit", Batch::Command(DataCmd::MGet(plan.read_keys.clone()))));
        }
        match done {
            0 => Some(("watch", Batch::Watch(plan.read_keys.clone()))),
            1 if matches!(last, Some(Answer::Replies(_))) => {
                Some(("read", Batch::Command(DataCmd::MGet(plan.read_keys.clone()))))
            }
            2 => self.transfer(plan, &values_of(last)?).map(|cmds| (plan.kind, Batch::Exec(cmds))),
            _ => None,
        }
    }
}

impl Bank {
    fn transfer(&self, plan: &Plan, balances: &[Option<Value>]) -> Option<Vec<DataCmd>> {
        let amount = plan.params[0];
        let from_balance = parse_i64(balances.first()?);
        if from_balance < amount {
            return None;
        }
        let (a, b) = (plan.target_keys[0].clone(), plan.target_keys[1].clone());
        if plan.kind == "transfer" {
            let to_balance = parse_i64(balances.get(1)?);
            return Some(vec![
                DataCmd::Set(a, (from_balance - amount).to_string().into_bytes()),
                DataCmd::Set(b, (to_balance + amount).to_string().into_bytes()),
            ]);
        }
        Some(vec![DataCmd::IncrBy(a, -amount), DataCmd::IncrBy(b, amount)])
    }
}
