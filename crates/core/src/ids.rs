//! Names of the things the protocols talk about: vnodes, transactions, cuts, clients, log positions.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A logical node `kind@host`, e.g. `store0@node003` (DESIGN §1). Ordered by host, then kind,
/// so that iteration over vnodes is deterministic and groups a host's vnodes together.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VnodeId {
    pub host: String,
    pub kind: String,
}

impl VnodeId {
    pub fn new(kind: impl Into<String>, host: impl Into<String>) -> Self {
        VnodeId { host: host.into(), kind: kind.into() }
    }

    /// Parses `kind@host`; both parts must be non-empty.
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, host) = s.split_once('@')?;
        if kind.is_empty() || host.is_empty() || host.contains('@') {
            return None;
        }
        Some(VnodeId::new(kind, host))
    }
}

impl fmt::Display for VnodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.kind, self.host)
    }
}

impl fmt::Debug for VnodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A transaction, named by the near vnode that coordinates it, that vnode's incarnation and a
/// sequence number within the incarnation.
///
/// Invariant: a `TxId` is never issued twice. The incarnation is the count of `Boot` records in
/// the near vnode's log, and no message naming a transaction leaves the vnode before the `Boot`
/// record of its incarnation is durable, so a crash can never make an incarnation repeat.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxId {
    pub near: VnodeId,
    pub incarnation: u32,
    pub seq: u32,
}

impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tx({}#{}.{})", self.near, self.incarnation, self.seq)
    }
}

impl fmt::Debug for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A transaction's branch at one participant: the transaction, the vnode that asked this one to
/// prepare it, and in which role. A vnode can hold several branches of one transaction — primary
/// of one partition and backup of another, both asked by the same vnode — and each is prepared,
/// logged and finished on its own.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct Branch {
    pub tx: TxId,
    pub upstream: VnodeId,
    pub role: Role,
}

/// A participant's role in a transaction branch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub enum Role {
    /// Asked by the near: locks, validates, evaluates, answers the near.
    Primary,
    /// Asked by a primary (2PC) or the previous hop of a 1PC chain: follows.
    Backup,
}

/// A cluster-wide, increasing consistent-cut id (seed 000: ConsistentCutId).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct CutId(pub u64);

impl fmt::Display for CutId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cut{}", self.0)
    }
}

/// `hash(key) % P`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct PartitionId(pub u32);

/// A client connection as the driver names it; replies are addressed to it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug)]
pub struct ClientId(pub u64);

/// A client's request as its reply names it (`Output::Reply { client, req, .. }`): the client and
/// the number it gave the request. Invariant: unique among the client's requests in flight (the
/// client numbers them), so one reply answers one request.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ClientRequest {
    pub client: ClientId,
    pub req: u64,
}

/// The number of records a vnode has appended to its log: record `n` (0-based) ends at `Lsn(n+1)`.
/// The driver maps it to a WAL position; the core only counts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Debug, Default)]
pub struct Lsn(pub u64);

pub type Key = Vec<u8>;
pub type Value = Vec<u8>;
/// Per key: 0 when never written, +1 per committed write (a delete is a write).
pub type Version = u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnode_id_round_trips_through_its_name() {
        let v = VnodeId::parse("store0@node003").unwrap();
        assert_eq!(v.to_string(), "store0@node003");
        assert!(VnodeId::parse("store0").is_none());
        assert!(VnodeId::parse("@node").is_none());
        assert!(VnodeId::parse("a@b@c").is_none());
    }
}
