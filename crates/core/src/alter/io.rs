//! The alteration role's inputs, outputs, messages and timers: the whole surface between an
//! `AlterNode` and its host (a store vnode's `TreeRole`, a `ManagerVnode`, the simulator), the way
//! `crate::io` is the vnode's. Also its configuration: where the vnode sits in the tree and its
//! timing.

use super::metadata::{AlterRecord, Md5Sum, Metadata, ProposalId, View};
use super::node::AlterNode;
use super::order::{AlterSeq, MetaVersion, Term};
use crate::ids::VnodeId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug)]
pub struct AlterConfig {
    pub id: VnodeId,
    /// The primary parent (empty at the root). A secondary parent, started by an assisting child
    /// when the primary dies, is learnt at run time and follows it in the queue.
    pub parents: Vec<VnodeId>,
    /// The primary parent's children in election priority order, this vnode among them.
    pub siblings: Vec<VnodeId>,
    /// Whether this vnode may replace a dead parent with a secondary one (the root's children
    /// too: a secondary root must then win a term, `root.rs`).
    pub failover: bool,
    /// Set on a secondary parent: the primary parent it stands in for.
    pub secondary_of: Option<VnodeId>,
    /// Whether this vnode proposes its children's state changes (`state/<child>`) itself.
    pub reports: bool,
    pub children: Vec<VnodeId>,
    /// Levels of the tree below this vnode: 0 at a store vnode, the tree's depth at the root. Each
    /// level adds at most half a heartbeat timeout to how stale a copy can be while it serves
    /// (`AlterNode::fresh`), so a root's promotion waits in proportion (`alter::promote`).
    pub height: u64,
    /// How long this vnode waits for its branch (children) to confirm; grows with subtree height.
    pub confirm_timeout_us: u64,
    /// How long an initiator waits for an outcome before it retries.
    pub propose_timeout_us: u64,
    pub retries_max: u32,
    pub retry_backoff_us: u64,
    pub heartbeat_interval_us: u64,
    /// A parent or child not heard from for this long is not working.
    pub heartbeat_timeout_us: u64,
    /// Keeps only what a store vnode needs (`View::Leaf`). Never on a voter of the root: a root's
    /// catch-up needs whole copies.
    pub leaf_view: bool,
    /// Only `skip_md5`, `root_without_quorum` and `long_lease` apply here (the simulator's proof that the md5
    /// check and the root's majority matter).
    pub breaks: crate::Breaks,
}

impl AlterConfig {
    /// A vnode at this place in the tree with default timing (20 ms heartbeats, 60 ms timeout,
    /// 10 ms per branch, 50 ms per proposal attempt, 2 retries), no failover, whole metadata.
    pub fn new(id: VnodeId, parents: Vec<VnodeId>, children: Vec<VnodeId>) -> Self {
        AlterConfig {
            id,
            parents,
            siblings: vec![],
            failover: false,
            secondary_of: None,
            reports: false,
            height: u64::from(!children.is_empty()),
            children,
            confirm_timeout_us: 10_000,
            propose_timeout_us: 50_000,
            retries_max: 2,
            retry_backoff_us: 1_000,
            heartbeat_interval_us: 20_000,
            heartbeat_timeout_us: 60_000,
            leaf_view: false,
            breaks: Default::default(),
        }
    }

    /// The configuration of a secondary parent `id` standing in for the vnode this configures:
    /// the same place in the tree, no failover of its own.
    pub fn secondary(&self, id: VnodeId) -> AlterConfig {
        AlterConfig { id, secondary_of: Some(self.id.clone()), failover: false, ..self.clone() }
    }

    /// The parent queue in priority order: the primary parent, then the secondary parent each
    /// sibling's host would start as assisting child, in election order.
    pub fn parent_queue(&self) -> Vec<VnodeId> {
        let Some(primary) = self.parents.first() else { return vec![] };
        let mut queue = vec![primary.clone()];
        for s in &self.siblings {
            let secondary = AlterNode::secondary_name(primary, &s.host);
            if !queue.contains(&secondary) {
                queue.push(secondary);
            }
        }
        queue
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AlterMsg {
    Propose {
        id: ProposalId,
        record: AlterRecord,
    },
    /// Alteration `(term, seq)`, ordered on top of version `(prev_term, seq - 1)`.
    Alter {
        term: Term,
        prev_term: Term,
        seq: AlterSeq,
        id: ProposalId,
        record: AlterRecord,
        md5: Md5Sum,
    },
    /// `applied`: how many leaves (store vnodes) of the branch applied it (the cut process needs
    /// them all).
    Confirm {
        term: Term,
        seq: AlterSeq,
        ok: bool,
        applied: u64,
    },
    Outcome {
        id: ProposalId,
        seq: AlterSeq,
        ok: bool,
        applied: u64,
    },
    /// Parent → children: I am alive, and this is my metadata (its version, its md5 and the md5 of
    /// its leaf view). `lead`: sent by a root, the term it orders in (`Term::ZERO` while it has
    /// none); `None` from other parents.
    Heartbeat {
        term: Term,
        seq: AlterSeq,
        md5: Md5Sum,
        leaf_md5: Md5Sum,
        lead: Option<Term>,
        /// The newest version the sender knows a majority of the root's voters holds
        /// (`AlterNode::committed`): what no later root can lose.
        committed: MetaVersion,
        /// Whether the sender's own copy is known fresh (`AlterNode::fresh`): a child counts
        /// itself caught up only on a fresh parent's word.
        fresh: bool,
        /// The sender's clock when it sent this (`lease.rs`).
        sent_us: u64,
        /// The receiver's clock in the last `Alive` the sender heard from it (`None`: none yet).
        echo_us: Option<u64>,
    },
    /// A root (primary, or secondary standing in for it) asks the root's children to promise
    /// themselves to it for `term`.
    Claim {
        term: Term,
    },
    /// A child's answer to a claim (or to an alteration or heartbeat of an older term): `granted`
    /// with its metadata for the catch-up, or refused with the term it is promised to.
    Promise {
        term: Term,
        granted: bool,
        metadata: Option<Metadata>,
    },
    /// Child → parent: I am alive and you are my parent. `sent_us`: the sender's clock; `echo_us`:
    /// the receiver's clock in the last heartbeat the sender heard from it (`lease.rs`).
    Alive {
        sent_us: u64,
        echo_us: Option<u64>,
    },
    /// Send me your metadata, as a vnode keeping `view` holds it.
    Fetch {
        view: View,
    },
    Clone {
        metadata: Metadata,
    },
    /// Seed 004: a child that lost its parent stands for assisting child (bully election: the
    /// sibling first in priority that is alive wins).
    Elect,
    /// A sibling placed before the sender is alive and takes over the election.
    Defer,
    /// The assisting child started this secondary parent: follow it.
    SecondaryAt {
        parent: VnodeId,
    },
    /// Seed 004, boot loading by parent: a host came alive and asks which vnodes to start.
    HostAlive {
        host: String,
    },
    /// The parent's answer: start these vnodes on the host.
    StartVnodes {
        vnodes: Vec<VnodeId>,
    },
    /// Whom the sender heard from directly, recently (`reach.rs`).
    Reach {
        hears: Vec<VnodeId>,
    },
    /// A message from `origin` carried one hop around a dead link.
    Relay {
        to: VnodeId,
        origin: VnodeId,
        msg: Relayed,
    },
}

/// The message a `Relay` carries, kept encoded until it arrives.
///
/// Why not `Box<AlterMsg>`: a message that holds itself decodes by recursion, and a peer frame of
/// nested relays (a few bytes each, millions of them in one frame) overflowed the decoder's stack
/// and aborted the node. Bytes decode without recursion, and `open` decodes one level only.
///
/// Invariant: a relay never carries a relay (one hop): `wrap` and `open` both refuse one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Relayed(Vec<u8>);

impl Relayed {
    /// `msg`, encoded; `None` for a relay (relays are not relayed again).
    pub fn wrap(msg: &AlterMsg) -> Option<Relayed> {
        if matches!(msg, AlterMsg::Relay { .. }) {
            return None;
        }
        postcard::to_allocvec(msg).ok().map(Relayed)
    }

    /// The message carried; `None` if it does not decode, or is itself a relay (only a hostile or
    /// broken peer sends either: the message is dropped, as a lost one would be).
    pub fn open(&self) -> Option<AlterMsg> {
        match postcard::from_bytes::<AlterMsg>(&self.0) {
            Ok(AlterMsg::Relay { .. }) | Err(_) => None,
            Ok(msg) => Some(msg),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterInput {
    /// Start (or restart) with the metadata and the promised root term recovered from the log.
    /// Must come first.
    Started {
        metadata: Metadata,
        term: Term,
    },
    Message {
        from: VnodeId,
        msg: AlterMsg,
    },
    Timer(AlterTimer),
    /// The host wants this record applied cluster-wide, as its proposal number `n` (the host keeps
    /// `n` unique across its restarts, e.g. with its incarnation in the high bits).
    Propose {
        n: u64,
        record: AlterRecord,
    },
    /// The record of alteration `seq` was written and read back as `bytes`.
    Persisted {
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    /// The host acted on alteration `seq` (e.g. its local cut finished), well or not.
    Applied {
        seq: AlterSeq,
        ok: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOutput {
    Send {
        to: VnodeId,
        msg: AlterMsg,
    },
    /// Write these bytes durably, then read them back and answer `Persisted`.
    Persist {
        seq: AlterSeq,
        bytes: Vec<u8>,
    },
    /// Alteration `(term, seq)` read back intact was applied to the metadata: persist that it was.
    /// A replay applies exactly the alterations persisted so (not every one written: one may be
    /// left for a newer term, or read back damaged). Outputs after this one in the same step —
    /// the confirmation, sooner or later — must not take effect before it is durable.
    PersistApplied {
        term: Term,
        seq: AlterSeq,
        record: AlterRecord,
    },
    /// The metadata was replaced by a clone of the parent's: persist it whole.
    PersistClone {
        metadata: Metadata,
    },
    /// Persist the root term promised (or claimed). Outputs after this one in the same step must
    /// not take effect before it is durable: a promise must survive a crash.
    PersistTerm {
        term: Term,
    },
    /// Seed 004: as assisting child, start a secondary parent `id` on this host in place of the
    /// dead primary parent `of`, with this vnode's copy of the metadata.
    StartSecondaryParent {
        id: VnodeId,
        of: VnodeId,
        metadata: Metadata,
        /// This vnode's promised term: a secondary root claims the next one.
        term: Term,
    },
    /// The primary parent is back: stop the secondary parent this host runs.
    StopSecondaryParent {
        id: VnodeId,
    },
    /// Act on the alteration and answer `Applied`.
    Apply {
        term: Term,
        seq: AlterSeq,
        record: AlterRecord,
    },
    /// This vnode's proposal ended: applied everywhere (`ok`) or given up.
    Done {
        id: ProposalId,
        ok: bool,
        attempts: u32,
        applied: u64,
        /// Where the alteration was ordered when `ok` (a retried proposal may have been ordered
        /// more than once); `ZERO` when given up.
        seq: AlterSeq,
    },
    SetTimer {
        timer: AlterTimer,
        at_us: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlterTimer {
    Confirm(AlterSeq),
    /// Attempt `u32` of a proposal got no outcome in time.
    ProposeTimeout(ProposalId, u32),
    /// The back-off before attempt `u32` is over.
    Resubmit(ProposalId, u32),
    Heartbeat,
    /// No better-placed sibling answered: become the assisting child.
    Election,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(msg: Relayed) -> AlterMsg {
        AlterMsg::Relay { to: VnodeId::new("store0", "node2"), origin: VnodeId::new("store0", "node1"), msg }
    }

    #[test]
    fn a_relay_opens_to_the_message_it_carries_and_never_to_a_relay() {
        let inner = AlterMsg::Reach { hears: vec![VnodeId::new("store0", "node3")] };
        let wrapped = Relayed::wrap(&inner).expect("a reach message is relayed");
        assert_eq!(wrapped.open(), Some(inner));
        let nested = relay(wrapped);
        assert_eq!(Relayed::wrap(&nested), None, "a relay is not relayed again");
        let smuggled = Relayed(postcard::to_allocvec(&nested).expect("encodes"));
        assert_eq!(smuggled.open(), None, "a relay inside a relay is dropped");
        assert_eq!(Relayed(vec![0xff; 8]).open(), None, "bytes that are no message are dropped");
    }

    /// A peer frame of a million relay headers, each where the old layout put the relayed
    /// message: the old `Box<AlterMsg>` decoded them by recursion and overflowed the stack. It
    /// decodes here on a thread with a 256 KiB stack, as a relay of some bytes or as an error.
    #[test]
    fn a_frame_of_nested_relays_decodes_without_recursion() {
        let one = postcard::to_allocvec(&relay(Relayed(vec![]))).expect("encodes");
        // The relay's header: everything before its (empty) payload's length byte.
        let header = &one[..one.len() - 1];
        let hostile: Vec<u8> = header.iter().copied().cycle().take(header.len() * 1_000_000).collect();
        let decoded = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || postcard::from_bytes::<AlterMsg>(&hostile).map(|m| matches!(m, AlterMsg::Relay { .. })))
            .expect("a thread")
            .join()
            .expect("the decoder returned");
        if let Ok(is_relay) = decoded {
            assert!(is_relay);
        }
    }
}
