//! Whether the replicas of every partition agree, read from every host's `/status`: each store
//! vnode's digest of each partition it holds (keys, versions, values), compared among the vnodes
//! that route by the partition's newest chain. A host back after a failover, its copy stale and
//! its chain older, is left out: it holds no copy until it catches up.

use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};

/// One replica's word on one partition.
struct Copy {
    epoch: u64,
    vnode: String,
    digest: String,
}

/// Every partition whose current replicas hold different data, with their digests, from the
/// `/status` of the hosts at `admins` (every host must answer).
pub fn disagreements(admins: &[String]) -> Result<Vec<String>> {
    let mut statuses = vec![];
    for admin in admins {
        let status: serde_json::Value = ureq::get(&format!("http://{admin}/status"))
            .timeout(std::time::Duration::from_secs(10))
            .call()?
            .into_json()?;
        statuses.push(status);
    }
    disagreements_in(&statuses)
}

/// `disagreements` over the hosts' `/status` answers.
fn disagreements_in(statuses: &[serde_json::Value]) -> Result<Vec<String>> {
    let mut copies: BTreeMap<u64, Vec<Copy>> = BTreeMap::new();
    for v in statuses.iter().flat_map(|s| s["vnodes"].as_array().into_iter().flatten()) {
        let vnode = v["id"].as_str().unwrap_or_default().to_string();
        for (p, digest) in v["partitions"].as_object().into_iter().flatten() {
            let epoch = v["epochs"][p].as_u64().unwrap_or(0);
            let digest = digest.as_str().unwrap_or_default().to_string();
            copies.entry(p.parse()?).or_default().push(Copy { epoch, vnode: vnode.clone(), digest });
        }
    }
    let mut out = vec![];
    for (p, copies) in copies {
        let newest = copies.iter().map(|c| c.epoch).max().unwrap_or(0);
        let current: Vec<&Copy> = copies.iter().filter(|c| c.epoch == newest).collect();
        let digests: BTreeSet<&str> = current.iter().map(|c| c.digest.as_str()).collect();
        if digests.len() > 1 {
            let each: Vec<String> = current.iter().map(|c| format!("{} {}", c.vnode, c.digest)).collect();
            out.push(format!("partition {p} (epoch {newest}): {}", each.join(", ")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(vnode: &str, digest: &str, epoch: u64) -> serde_json::Value {
        json!({ "vnodes": [{ "id": vnode, "partitions": { "3": digest }, "epochs": { "3": epoch } }] })
    }

    #[test]
    fn current_replicas_that_differ_are_reported() {
        let found = disagreements_in(&[host("store0@node1", "aa/2", 1), host("store0@node2", "bb/2", 1)]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("partition 3 (epoch 1)"), "{found:?}");
    }

    #[test]
    fn a_copy_on_an_older_chain_is_left_out() {
        let statuses =
            [host("store0@node1", "aa/2", 1), host("store0@node2", "aa/2", 1), host("store0@node3", "old/1", 0)];
        assert!(disagreements_in(&statuses).unwrap().is_empty());
    }
}
