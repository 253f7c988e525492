//! A vnode's inputs and outputs: the whole surface between the core and a driver.

use crate::cut::operator::CutFailure;
use crate::ids::{Branch, ClientId, CutId, Key, Lsn, TxId, Value, Version, VnodeId};
use crate::message::{AbortReason, Envelope};
use crate::record::Record;
use crate::store::{ReadCheck, ResolvedWrite, Write};

// Why allowed: inputs are built and consumed one at a time on the stack of a
// vnode's step; boxing the large variant would add an allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// The vnode was just created, fresh or from its durable log. Must come first.
    Restarted,
    Message(Envelope),
    Client {
        client: ClientId,
        req: u64,
        request: Request,
    },
    Timer(Timer),
    /// Every record up to `Lsn` is durable.
    WalDurable(Lsn),
    /// The driver read back the durable `Record::Alteration` of `seq` (seed 004 point 4).
    AlterPersisted {
        seq: crate::alter::AlterSeq,
        bytes: Vec<u8>,
    },
    /// The host's data reached its memory limit (`reached`), or fell back below it. While it is
    /// reached, this vnode's primary branches refuse writes that store a value
    /// (`AbortReason::OutOfMemory`); its replicas still apply what their primaries commit.
    MemoryLimit {
        reached: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Append to the log; it gets the next `Lsn`. Becomes durable later (`Input::WalDurable`).
    Append(Record),
    Send(Envelope),
    Reply {
        client: ClientId,
        req: u64,
        response: Response,
    },
    SetTimer {
        timer: Timer,
        at_us: u64,
    },
    /// Seed 004: this vnode is the assisting child; start secondary parent `id` (standing in for
    /// `of`) on this host with this metadata.
    StartSecondaryParent {
        id: VnodeId,
        of: VnodeId,
        metadata: crate::alter::Metadata,
        /// The assisting child's promised root term (a secondary root claims the next one).
        term: crate::alter::Term,
    },
    /// The primary parent is back: stop the secondary parent `id` on this host.
    StopSecondaryParent {
        id: VnodeId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    Get {
        key: Key,
    },
    /// `WATCH`ed reads plus `MULTI … EXEC` writes.
    Txn {
        reads: Vec<ReadCheck>,
        writes: Vec<Write>,
    },
    /// Start a consistent cut (only the cut coordinator accepts it).
    Cut,
    /// One page of a scan of the keyspace, at most `count` keys, from `cursor` (`txn::scan`).
    Scan {
        cursor: ScanCursor,
        count: u32,
    },
    /// Sets ACL user `user` cluster-wide: an alteration of `acl/<user>` to `stored`
    /// (`acl::User::encode`; empty deletes the user). Answered `Altered` (`acl::proposals`).
    SetUser {
        user: String,
        stored: Vec<u8>,
    },
    /// A collection's head with some of its elements (`collection`), read at the partition's
    /// primary as a `Get` of the head is; answered `Elements`. On a string or a missing key, the
    /// value alone and no element.
    Elements {
        key: Key,
        pick: Pick,
    },
}

/// Where a scan of the keyspace stands: the partition it reads and the last key it examined there
/// (`None`: from the partition's first key). Partitions are scanned in order, each in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ScanCursor {
    pub partition: u32,
    pub after: Option<Key>,
}

/// Which elements of a collection a read returns with its head.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Pick {
    /// These members, each answered with its value or as absent.
    Members(Vec<Member>),
    /// The members after `after` (from the first when `None`) in order, at most `count` of them
    /// and about [`ELEMENTS_PAGE_BYTES_MAX`] bytes.
    Page { after: Option<Member>, count: u32 },
}

/// A collection's member (a hash's field, a set's member).
pub type Member = Vec<u8>;

/// The most elements one page returns, whatever the client asks.
pub const ELEMENTS_PAGE_MAX: u32 = 10_000;
/// About the most element bytes one page returns (the page ends after the element that passes it).
pub const ELEMENTS_PAGE_BYTES_MAX: usize = 4 << 20;

/// One element a read returned: its member and value (`None`: an asked member that is absent).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Element {
    #[serde(with = "crate::bytes::vec")]
    pub member: Member,
    pub value: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Response {
    /// A read's answer: the value, its version and its deadline, and the primary's expiry clock
    /// when it answered (so the client can say how long a key has left, `TTL`, and compare
    /// deadlines, `EXPIRE … GT`, without a clock of its own).
    Value {
        value: Option<Value>,
        version: Version,
        deadline_ms: Option<u64>,
        now_ms: u64,
    },
    Committed {
        tx: TxId,
        writes: Vec<ResolvedWrite>,
    },
    Aborted {
        tx: Option<TxId>,
        reason: AbortReason,
    },
    /// The near lost track of a 1PC transaction: it may or may not have committed.
    Unknown {
        tx: TxId,
    },
    CutDone {
        cut: CutId,
        ok: bool,
        /// How long each phase took, START first (empty where phases are not timed).
        phases_us: Vec<u64>,
        /// md5 of the cluster metadata when the cut process ended, where it ran over the tree.
        metadata_md5: Option<[u8; 16]>,
        /// Why it failed, where the cut process ran over the tree (`None` when `ok`).
        failure: Option<CutFailure>,
        /// Hosts the metadata recorded dead when the cut started: it did not reach their vnodes,
        /// and covers their partitions by the live replicas (`alter::cluster::cut_members`).
        left_out: Vec<String>,
    },
    /// The request could not be served here (e.g. not the coordinator, or still booting).
    Unavailable {
        why: &'static str,
    },
    /// How an alteration a client asked for ended: `ok` once the root ordered it and a majority
    /// of its voters confirmed it (this vnode may apply it a moment later).
    Altered {
        ok: bool,
    },
    /// A page of a scan: keys in key order, and where the scan goes on (`None`: it is over).
    Keys {
        keys: Vec<Key>,
        next: Option<ScanCursor>,
    },
    /// A `Request::Elements`' answer: the head as `Value` gives it, the elements picked (in member
    /// order for a page), and the member a page goes on after (`None`: no more).
    Elements {
        value: Option<Value>,
        version: Version,
        deadline_ms: Option<u64>,
        now_ms: u64,
        elements: Vec<Element>,
        next: Option<Member>,
    },
}

/// Timers a vnode sets. A timer that fires after its reason is gone is ignored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Timer {
    /// The near gives up waiting for prepare acks.
    PrepareTimeout(TxId),
    /// A participant asks the first committer what became of a prepared transaction.
    InDoubt(Branch),
    /// A forwarded GET that got no answer.
    ReadTimeout(u64),
    /// The cut coordinator's deadline for the current phase.
    CutPhase(CutId, u8),
    /// The cut coordinator sends the current phase again to the vnodes that have not confirmed it.
    CutPhaseResend(CutId, u8),
    /// Replies held for real-time safety on this cut have waited long enough.
    HeldReplies(CutId),
    Alter(crate::alter::AlterTimer),
    /// A manager's cut operator checks that its cut process is not stuck.
    CutOperator,
    /// A blocking cut of the tree has kept this vnode paused for `Timeouts::pause_max_us`.
    BlockingPause(CutId),
    /// A learner asks again for a page, or proposes again (`catch_up`).
    CatchUp(crate::ids::PartitionId),
    /// The active expiry looks for keys past their deadline (`expiry`).
    Expiry,
}
