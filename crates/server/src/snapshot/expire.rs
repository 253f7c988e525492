//! Expiring snapshots (DESIGN §5: expiry refuses to break the restorability of what it keeps).
//! A chain — a full snapshot and its increments — is the unit: increment K restores only with the
//! full snapshot and increments 1..K-1, so nothing a kept member needs is ever removed. Removing a
//! snapshot removes its own directory only; its segments are hard links, so a live log that still
//! names the same files keeps them.

use super::catalog::{Catalog, ChainListing, Listed, State};
use super::manifest::{increment_dir_name, MANIFEST_FILE};
use std::path::{Path, PathBuf};

/// Which chains to remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Keep the N chains whose newest member is newest.
    KeepLast(usize),
    /// Remove chains whose newest member is older than this.
    OlderThan { cutoff_unix_ms: u64 },
}

/// What expiry does with one chain (or one member of it), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub name: String,
    /// `None`: the whole chain; `Some(k)`: increment k only.
    pub increment: Option<u32>,
    pub dir: PathBuf,
    pub remove: bool,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ExpireError {
    #[error("no snapshot {name} under {root}")]
    NoSuchSnapshot { root: PathBuf, name: String },
    #[error("{name} has no increment {increment}")]
    NoSuchIncrement { name: String, increment: u32 },
    #[error("refusing to remove {what} of {name}: it is the base of {dependents} (remove the whole chain with --name {name} alone)")]
    Dependents { name: String, what: String, dependents: String },
    #[error("refusing to remove {dir}: it is not a snapshot directory under {root}")]
    Outside { dir: PathBuf, root: PathBuf },
    #[error("{path}: removing: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Decides, chain by chain, what `rule` removes and what it keeps.
pub fn plan(catalog: &Catalog, rule: Rule) -> Vec<Decision> {
    let mut complete: Vec<&ChainListing> = catalog.chains.iter().filter(|c| c.is_complete()).collect();
    complete.sort_by_key(|c| std::cmp::Reverse(c.newest_unix_ms()));
    let mut out = vec![];
    for (rank, chain) in complete.iter().enumerate() {
        let (remove, reason) = match rule {
            Rule::KeepLast(n) if rank < n => (false, format!("one of the {n} newest chains")),
            Rule::KeepLast(n) => (true, format!("not one of the {n} newest chains")),
            Rule::OlderThan { cutoff_unix_ms } => older(chain.newest_unix_ms(), cutoff_unix_ms, "its newest member"),
        };
        out.push(whole(chain, remove, reason));
    }
    for chain in catalog.chains.iter().filter(|c| !c.is_complete()) {
        let (remove, reason) = match rule {
            // Possibly being written right now: only age says it was abandoned.
            Rule::KeepLast(_) => (false, "incomplete (no full manifest; may be in progress)".to_string()),
            Rule::OlderThan { cutoff_unix_ms } => {
                older(chain.newest_unix_ms(), cutoff_unix_ms, "incomplete, last modified")
            }
        };
        out.push(whole(chain, remove, reason));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn older(newest_ms: u64, cutoff_ms: u64, what: &str) -> (bool, String) {
    let when = super::catalog::format_unix_ms(newest_ms);
    match newest_ms < cutoff_ms {
        true => (true, format!("{what} is from {when}, older than the cutoff")),
        false => (false, format!("{what} is from {when}, within the cutoff")),
    }
}

fn whole(chain: &ChainListing, remove: bool, reason: String) -> Decision {
    Decision { name: chain.name.clone(), increment: None, dir: chain.dir.clone(), remove, reason }
}

/// The removal of one named chain (`increment: None`) or one member of it, refused when a member
/// that stays would need it.
pub fn plan_one(catalog: &Catalog, name: &str, increment: Option<u32>) -> Result<Decision, ExpireError> {
    let chain = catalog
        .chains
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| ExpireError::NoSuchSnapshot { root: catalog.root.clone(), name: name.into() })?;
    let Some(k) = increment else {
        return Ok(whole(chain, true, "asked for by name".into()));
    };
    let member = chain
        .members
        .iter()
        .find(|m| m.increment == k)
        .ok_or_else(|| ExpireError::NoSuchIncrement { name: name.into(), increment: k })?;
    let dependents = chain.dependents(k);
    if !dependents.is_empty() {
        let what = if k == 0 { "the full snapshot".into() } else { increment_dir_name(k) };
        let names: Vec<String> = dependents.iter().map(|m| increment_dir_name(m.increment)).collect();
        return Err(ExpireError::Dependents { name: name.into(), what, dependents: names.join(", ") });
    }
    let reason = "asked for by name; no increment depends on it".to_string();
    Ok(Decision { name: name.into(), increment: Some(k), dir: member.dir.clone(), remove: true, reason })
}

/// Carries out a removal decision. A chain's manifests go first, newest member first, so a crash
/// part-way leaves a restorable prefix of the chain (the rest incomplete), never an increment
/// whose base is gone.
pub fn remove(catalog: &Catalog, decision: &Decision) -> Result<(), ExpireError> {
    debug_assert!(decision.remove);
    let chain_dir = catalog.root.join(&decision.name);
    let inside = catalog.chains.iter().any(|c| c.dir == chain_dir) && decision.dir.starts_with(&chain_dir);
    if !inside {
        return Err(ExpireError::Outside { dir: decision.dir.clone(), root: catalog.root.clone() });
    }
    let chain = catalog.chains.iter().find(|c| c.dir == chain_dir).expect("checked above");
    let doomed: Vec<&Listed> = match decision.increment {
        None => chain.members.iter().rev().collect(),
        Some(k) => chain.members.iter().filter(|m| m.increment == k).collect(),
    };
    for member in doomed.iter().filter(|m| matches!(m.state, State::Complete(_))) {
        remove_file(&member.dir.join(MANIFEST_FILE))?;
    }
    remove_tree(&decision.dir)
}

fn remove_file(path: &Path) -> Result<(), ExpireError> {
    std::fs::remove_file(path).map_err(|source| ExpireError::Io { path: path.into(), source })
}

fn remove_tree(path: &Path) -> Result<(), ExpireError> {
    std::fs::remove_dir_all(path).map_err(|source| ExpireError::Io { path: path.into(), source })
}
