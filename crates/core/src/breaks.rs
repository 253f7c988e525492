//! Deliberate protocol bugs, switched on only by the simulator's `--break` to prove that its
//! checkers can fail. Every field defaults to `false`; a real cluster never sets one.

use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breaks {
    /// The near commits on the first `PrepareAck` instead of waiting for every participant.
    pub commit_before_all_prepared: bool,
    /// A primary takes no lock at prepare.
    pub skip_lock: bool,
    /// Promises leave before the records they promise are durable.
    pub ack_before_durable: bool,
    /// A vnode starts a cut after handling the coloured message that announced it.
    pub color_after_handle: bool,
    /// The first committer does not stamp `tx_cut`.
    pub no_tx_cut: bool,
    /// Responses are sent without the running cut's colour.
    pub uncoloured_responses: bool,
    /// `CutFinish` is written at `CutStart`, without waiting for in-flight transactions.
    pub finish_early: bool,
    /// An alteration read back with a wrong md5 is applied anyway.
    pub skip_md5: bool,
    /// A root needs no majority: it wins a term on claiming it and answers `ok` without a
    /// majority of the voters holding the alteration.
    pub root_without_quorum: bool,
    /// A checkpoint's image leaves out the tombstones of rolled-back transactions.
    pub checkpoint_without_tombstones: bool,
    /// The restore filter replays only the cut's own window (from `CutStart`), without the base
    /// it stands on — a restore of an increment that forgot to load the snapshot before it.
    pub restore_without_base: bool,
    /// A GET that returns a value written after a cut not yet started everywhere is answered at
    /// once (commit acknowledgements are still held).
    pub unheld_reads: bool,
    /// An abort for a failed `WATCH` is answered at once, even when the write that moved the key
    /// is after a cut not yet started everywhere.
    pub unheld_watch_failures: bool,
    /// A first committer commits a pipelined 1PC transaction without checking that the ones it
    /// was evaluated after committed.
    pub no_dependency_check: bool,
    /// The restore filter gives a key written by a transaction the cut includes from its window
    /// (between `CutStart` and `CutFinish`) the write's version but keeps the value it had.
    pub restore_stale_values: bool,
    /// Every local cut fails instead of writing its `CutFinish`, so no cut ever succeeds.
    pub fail_every_cut: bool,
    /// The root answers every alteration failed, so the cluster's metadata never changes for
    /// whoever asked (the root's copy still moves on).
    pub fail_every_alteration: bool,
    /// A GET at a primary is answered from the committed store at once, even while a prepared
    /// branch — perhaps already acknowledged to its client — writes the key.
    pub reads_ignore_prepared: bool,
    /// A tree vnode below the root confirms an alteration to its parent once it applied it
    /// itself, without waiting for its children's confirmations.
    pub confirm_before_children: bool,
    /// `versions` strategy, seed 002 problem 1 without its mitigation (b): a near does not collect
    /// the transactions registered after `snp_version` was fixed with a smaller version, so the
    /// skip set is empty and the restore includes them by their version.
    pub versions_no_skip: bool,
    /// `versions` strategy, seed 002 problem 2 unfixed: a near forgets a one-phase transaction it
    /// timed out on (as a primary-sync near forgets a transaction its backups have not committed),
    /// so phase 1 can end while its chain still commits.
    pub versions_forget_one_phase: bool,
    /// `versions` strategy as seed 002 writes it: a primary lets a transaction created before its
    /// near fixed `snp_version` read or overwrite the write of one created after another near
    /// fixed its own (`cut::versions`, the guard).
    pub versions_no_guard: bool,
    /// `blocking` strategy without its refusal: a vnode that wrote its marker still takes
    /// prepares until END, so a transaction its near gave up on can commit before the marker on
    /// its primary and after it on a backup that drained first.
    pub blocking_prepare_after_marker: bool,
    /// A 1PC primary passes its `Prepare` down the chain before its own `TxPrepared` is durable,
    /// as a 2PC primary may (`txn/participant.rs`, `forward_prepare`): the first committer can
    /// commit what the primary then forgets in a crash.
    pub one_phase_forward_before_durable: bool,
    /// The tree's operator sends `StartedEverywhere` with START instead of STARTED: store vnodes
    /// release held replies before every one of them started the cut.
    pub started_notice_at_start: bool,
    /// A root that wins a campaign queues its `root` record behind the proposals queued during
    /// the campaign instead of ordering it first in its term (`alter/root.rs`, `maybe_win`).
    pub root_record_queued: bool,
    /// `versions` strategy: a hop of a one-phase chain takes a transaction below the running
    /// cut's map that reached it after the map did (its near crashed and forgot it), so it can
    /// commit after this hop's map and before the map of the hops before it.
    pub versions_late_one_phase: bool,
    /// A primary answers a near's GET at once, before the records it appended are durable: with one
    /// replica it is the first committer, and a crash can lose a value a client was shown.
    pub reads_before_commit_durable: bool,
    /// A vnode takes a `Prepare` routed by another epoch of the placement than the one it holds
    /// (`txn::participant`): a primary the root replaced, cut off but alive, can still commit.
    pub accept_stale_epoch: bool,
    /// A vnode promoted to primary serves the keys of the branches it holds in doubt without
    /// locking them (`txn::promotion`): a read can miss a commit its old primary acknowledged.
    pub promoted_unlocked: bool,
    /// A store vnode routes by a placement as soon as its copy of the metadata applies it, before
    /// a majority of the root's voters holds it (`txn::promotion`): a change of root can undo it.
    pub adopt_uncommitted: bool,
    /// The near's own host commits a 2PC transaction as soon as the near decides, before another
    /// host holds the commit (`txn::orphan`): a later transaction can read it, and a recovery
    /// without the near (its host recorded dead) can then abort it under that reader.
    pub near_commits_first: bool,
    /// A store vnode applies a phase of a cut started over the live hosts without comparing the
    /// view it names with its own (`cut::tree_process`): a vnode the operator did not count can
    /// stand in for one it did, and the cut is declared without it.
    pub cut_counts_any_vnode: bool,
    /// A store vnode counts itself caught up for a hundred heartbeat timeouts after it last heard a
    /// fresh parent, not half of one (`AlterNode::synced`): a lease longer than the promotion's
    /// wait, so a primary cut off from the tree still serves after its replacement does.
    pub long_lease: bool,
    /// The transaction client answers every read-only batch from its reads, without the commit
    /// whose read checks make reads of several keys one snapshot (`client::run`, `reads_suffice`).
    pub client_skips_read_only_commit: bool,
    /// After a conflict the transaction client reads again but keeps the replies and writes of
    /// its first evaluation: the retry commits values computed from reads it no longer checks.
    pub client_retries_stale_evaluation: bool,
    /// `EXEC` commits without the `WATCH`ed versions as read checks.
    pub client_ignores_watch: bool,
    /// A vnode's kept tallies (`tally.rs`) add an overwritten key's new entry without taking out
    /// its old one: `DBSIZE` and the memory limit drift from the data with every overwrite.
    pub tally_keeps_overwritten: bool,
    /// A primary's page of a partition scan drops the first key after the cursor (`txn::scan`).
    pub scan_skips_first: bool,
    /// A learner proposes itself a copy as soon as it joins, without copying (`catch_up`).
    pub switch_before_copied: bool,
    /// A primary serves a learner's pages while branches from before it joined are open.
    pub copy_ignores_fence: bool,
    /// A vnode asked what it held at a cut (for a snapshot's export) answers what it holds now:
    /// a learner switched in since the cut is read for a partition it had not finished copying.
    pub export_holdings_now: bool,
    /// A primary answers a read of a key whose deadline has passed with its value, without
    /// waiting for the key's expiry (`expiry`).
    pub serve_expired: bool,
    /// A primary serves a learner's page while a `versions` cut is open here: the page may hold
    /// writes of a transaction the cut leaves out, with nothing to tell them apart by.
    pub copy_during_versions_cut: bool,
    /// A primary that deletes or replaces a collection's head keeps its elements (`collection`):
    /// they outlive it, and a collection made later under the key finds them.
    pub elements_outlive_collection: bool,
    /// A list's pop moves its head past the elements it takes but leaves them stored
    /// (`client::list`): they lie outside the positions the head names.
    pub list_pop_leaves_element: bool,
}

impl Breaks {
    pub const NAMES: [&'static str; 46] = [
        "commit-before-all-prepared",
        "skip-lock",
        "ack-before-durable",
        "color-after-handle",
        "no-tx-cut",
        "uncoloured-responses",
        "finish-early",
        "skip-md5",
        "root-without-quorum",
        "checkpoint-without-tombstones",
        "restore-without-base",
        "unheld-reads",
        "unheld-watch-failures",
        "no-dependency-check",
        "restore-stale-values",
        "fail-every-cut",
        "reads-ignore-prepared",
        "confirm-before-children",
        "fail-every-alteration",
        "versions-no-skip",
        "versions-forget-one-phase",
        "versions-no-guard",
        "blocking-prepare-after-marker",
        "one-phase-forward-before-durable",
        "started-notice-at-start",
        "root-record-queued",
        "versions-late-one-phase",
        "reads-before-commit-durable",
        "accept-stale-epoch",
        "promoted-unlocked",
        "adopt-uncommitted",
        "near-commits-first",
        "cut-counts-any-vnode",
        "long-lease",
        "client-skips-read-only-commit",
        "client-retries-stale-evaluation",
        "client-ignores-watch",
        "tally-keeps-overwritten",
        "scan-skips-first",
        "switch-before-copied",
        "copy-ignores-fence",
        "export-holdings-now",
        "serve-expired",
        "copy-during-versions-cut",
        "elements-outlive-collection",
        "list-pop-leaves-element",
    ];

    /// Switches on the break called `name`; `false` if there is no such break.
    pub fn enable(&mut self, name: &str) -> bool {
        let flag = match name {
            "commit-before-all-prepared" => &mut self.commit_before_all_prepared,
            "skip-lock" => &mut self.skip_lock,
            "ack-before-durable" => &mut self.ack_before_durable,
            "color-after-handle" => &mut self.color_after_handle,
            "no-tx-cut" => &mut self.no_tx_cut,
            "uncoloured-responses" => &mut self.uncoloured_responses,
            "finish-early" => &mut self.finish_early,
            "skip-md5" => &mut self.skip_md5,
            "root-without-quorum" => &mut self.root_without_quorum,
            "checkpoint-without-tombstones" => &mut self.checkpoint_without_tombstones,
            "restore-without-base" => &mut self.restore_without_base,
            "unheld-reads" => &mut self.unheld_reads,
            "unheld-watch-failures" => &mut self.unheld_watch_failures,
            "no-dependency-check" => &mut self.no_dependency_check,
            "restore-stale-values" => &mut self.restore_stale_values,
            "fail-every-cut" => &mut self.fail_every_cut,
            "reads-ignore-prepared" => &mut self.reads_ignore_prepared,
            "confirm-before-children" => &mut self.confirm_before_children,
            "fail-every-alteration" => &mut self.fail_every_alteration,
            "versions-no-skip" => &mut self.versions_no_skip,
            "versions-forget-one-phase" => &mut self.versions_forget_one_phase,
            "versions-no-guard" => &mut self.versions_no_guard,
            "blocking-prepare-after-marker" => &mut self.blocking_prepare_after_marker,
            "one-phase-forward-before-durable" => &mut self.one_phase_forward_before_durable,
            "started-notice-at-start" => &mut self.started_notice_at_start,
            "root-record-queued" => &mut self.root_record_queued,
            "versions-late-one-phase" => &mut self.versions_late_one_phase,
            "reads-before-commit-durable" => &mut self.reads_before_commit_durable,
            "accept-stale-epoch" => &mut self.accept_stale_epoch,
            "promoted-unlocked" => &mut self.promoted_unlocked,
            "adopt-uncommitted" => &mut self.adopt_uncommitted,
            "near-commits-first" => &mut self.near_commits_first,
            "cut-counts-any-vnode" => &mut self.cut_counts_any_vnode,
            "long-lease" => &mut self.long_lease,
            "client-skips-read-only-commit" => &mut self.client_skips_read_only_commit,
            "client-retries-stale-evaluation" => &mut self.client_retries_stale_evaluation,
            "client-ignores-watch" => &mut self.client_ignores_watch,
            "tally-keeps-overwritten" => &mut self.tally_keeps_overwritten,
            "scan-skips-first" => &mut self.scan_skips_first,
            "switch-before-copied" => &mut self.switch_before_copied,
            "copy-ignores-fence" => &mut self.copy_ignores_fence,
            "export-holdings-now" => &mut self.export_holdings_now,
            "serve-expired" => &mut self.serve_expired,
            "copy-during-versions-cut" => &mut self.copy_during_versions_cut,
            "elements-outlive-collection" => &mut self.elements_outlive_collection,
            "list-pop-leaves-element" => &mut self.list_pop_leaves_element,
            _ => return false,
        };
        *flag = true;
        true
    }
}

impl fmt::Display for Breaks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = [
            self.commit_before_all_prepared,
            self.skip_lock,
            self.ack_before_durable,
            self.color_after_handle,
            self.no_tx_cut,
            self.uncoloured_responses,
            self.finish_early,
            self.skip_md5,
            self.root_without_quorum,
            self.checkpoint_without_tombstones,
            self.restore_without_base,
            self.unheld_reads,
            self.unheld_watch_failures,
            self.no_dependency_check,
            self.restore_stale_values,
            self.fail_every_cut,
            self.reads_ignore_prepared,
            self.confirm_before_children,
            self.fail_every_alteration,
            self.versions_no_skip,
            self.versions_forget_one_phase,
            self.versions_no_guard,
            self.blocking_prepare_after_marker,
            self.one_phase_forward_before_durable,
            self.started_notice_at_start,
            self.root_record_queued,
            self.versions_late_one_phase,
            self.reads_before_commit_durable,
            self.accept_stale_epoch,
            self.promoted_unlocked,
            self.adopt_uncommitted,
            self.near_commits_first,
            self.cut_counts_any_vnode,
            self.long_lease,
            self.client_skips_read_only_commit,
            self.client_retries_stale_evaluation,
            self.client_ignores_watch,
            self.tally_keeps_overwritten,
            self.scan_skips_first,
            self.switch_before_copied,
            self.copy_ignores_fence,
            self.export_holdings_now,
            self.serve_expired,
            self.copy_during_versions_cut,
            self.elements_outlive_collection,
            self.list_pop_leaves_element,
        ];
        let names: Vec<&str> = Self::NAMES.iter().zip(on).filter(|(_, b)| *b).map(|(n, _)| *n).collect();
        if names.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", names.join(","))
        }
    }
}
