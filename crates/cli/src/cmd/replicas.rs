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
    let mut copies: BTreeMap<u64, Vec<Copy>> = BTreeMap::new();
    for admin in admins {
        let status: serde_json::Value = ureq::get(&format!("http://{admin}/status"))
            .timeout(std::time::Duration::from_secs(10))
            .call()?
            .into_json()?;
        for v in status["vnodes"].as_array().into_iter().flatten() {
            let vnode = v["id"].as_str().unwrap_or_default().to_string();
            for (p, digest) in v["partitions"].as_object().into_iter().flatten() {
                let epoch = v["epochs"][p].as_u64().unwrap_or(0);
                let digest = digest.as_str().unwrap_or_default().to_string();
                copies.entry(p.parse()?).or_default().push(Copy { epoch, vnode: vnode.clone(), digest });
            }
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
