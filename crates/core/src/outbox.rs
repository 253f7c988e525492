//! The write-ahead contract (DESIGN §2): a message or reply leaves only after every record the
//! vnode appended before it is durable. The core enforces it itself, so no driver can get it wrong.

use crate::ids::Lsn;
use crate::io::Output;
use crate::record::Record;
use std::collections::VecDeque;

/// Holds a step's outputs, and the sends and replies still waiting for durability.
///
/// Invariant: `durable <= appended`, `hold_line <= appended`, and every entry of `held` waits for
/// an `Lsn` in `(durable, hold_line]`, in non-decreasing order.
#[derive(Debug, Default, Hash)]
pub struct Outbox {
    ready: Vec<Output>,
    held: VecDeque<Held>,
    appended: Lsn,
    durable: Lsn,
    /// The last record that promises must wait for (see `append_unheld`).
    hold_line: Lsn,
    /// Break mode `ack-before-durable`: release promises at once.
    pub release_early: bool,
}

/// A send or reply waiting until the log is durable up to `after`.
#[derive(Debug, Hash)]
struct Held {
    after: Lsn,
    output: Output,
}

impl Outbox {
    /// Starts from a log of `len` records, all durable (a vnode rebuilt from its log).
    pub fn from_log_len(len: u64) -> Self {
        Outbox { appended: Lsn(len), durable: Lsn(len), hold_line: Lsn(len), ..Outbox::default() }
    }

    pub fn append(&mut self, record: Record) -> Lsn {
        self.append_unheld(record);
        self.hold_line = self.appended;
        self.appended
    }

    /// Appends a record that promises nothing to anyone, so later messages need not wait for it
    /// (`CutStart`: every record that could depend on it comes after it in the log, and promises
    /// wait for those). Keeps a cut from adding an fsync to the path of every message.
    pub fn append_unheld(&mut self, record: Record) -> Lsn {
        self.appended = Lsn(self.appended.0 + 1);
        self.ready.push(Output::Append(record));
        self.appended
    }

    /// The next promises wait for every record appended so far, unheld ones included: the answer
    /// to the cut process's START promises that `CutStart` is durable (a vnode that acknowledged a
    /// cut and lost its `CutStart` in a crash would start it again late, with transactions inside
    /// that clients sent after seeing *after* ones — `tests/vnode_story.rs`).
    pub fn hold_all(&mut self) {
        self.hold_line = self.appended;
    }

    /// A send or a reply: released once everything appended so far is durable.
    pub fn promise(&mut self, output: Output) {
        assert!(matches!(output, Output::Send(_) | Output::Reply { .. }));
        if self.release_early || (self.durable >= self.hold_line && self.held.is_empty()) {
            self.ready.push(output);
        } else {
            self.held.push_back(Held { after: self.hold_line, output });
        }
    }

    /// A send or reply that promises nothing about this vnode's records, so it need not wait for
    /// them: a near's `Prepare`, a 2PC primary's `Prepare` to its backups (`txn/participant.rs`
    /// says why), a near's answer to a 1PC transaction (`txn/near.rs`). Out at once.
    pub fn unheld(&mut self, output: Output) {
        assert!(matches!(output, Output::Send(_) | Output::Reply { .. }), "only a message or reply leaves unheld");
        self.ready.push(output);
    }

    /// A promise about the records up to `upto` only, not those appended after it: out at once
    /// when they are durable, else held like any promise (behind everything appended so far —
    /// coarser than needed, and never wrong).
    pub fn promise_upto(&mut self, upto: Lsn, output: Output) {
        assert!(upto <= self.appended, "a promise about {upto:?}, beyond appended {:?}", self.appended);
        if self.durable >= upto {
            return self.unheld(output);
        }
        self.promise(output);
    }

    /// Outputs that promise nothing to anyone (timers, host actions): out at once.
    pub fn timer(&mut self, output: Output) {
        assert!(!matches!(output, Output::Send(_) | Output::Reply { .. } | Output::Append(_)));
        self.ready.push(output);
    }

    pub fn durable(&mut self, upto: Lsn) {
        // A driver that reports more than was appended would release promises early: the
        // write-ahead contract is broken, so stop rather than lie.
        assert!(upto <= self.appended, "durable {upto:?} beyond appended {:?}", self.appended);
        if upto <= self.durable {
            return;
        }
        self.durable = upto;
        while self.held.front().is_some_and(|h| h.after <= upto) {
            let held = self.held.pop_front().expect("front exists");
            self.ready.push(held.output);
        }
    }

    pub fn appended(&self) -> Lsn {
        self.appended
    }

    /// Whether a send or reply waits for records to become durable. While none does, a driver may
    /// put off syncing (a bounded while): what is appended then promises nothing to anyone yet,
    /// and any promise made later waits behind it.
    pub fn awaits_durable(&self) -> bool {
        !self.held.is_empty()
    }

    pub fn is_durable(&self) -> bool {
        self.durable >= self.appended
    }

    pub fn take(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClientId, CutId};
    use crate::io::Response;

    fn reply() -> Output {
        Output::Reply {
            client: ClientId(1),
            req: 1,
            response: Response::CutDone {
                cut: CutId(1),
                ok: true,
                phases_us: vec![],
                metadata_md5: None,
                failure: None,
                left_out: vec![],
            },
        }
    }

    #[test]
    fn a_promise_waits_for_the_records_before_it() {
        let mut o = Outbox::default();
        o.append(Record::Boot { incarnation: 0 });
        o.promise(reply());
        assert_eq!(o.take(), vec![Output::Append(Record::Boot { incarnation: 0 })]);
        o.durable(Lsn(1));
        assert_eq!(o.take(), vec![reply()]);
        o.promise(reply());
        assert_eq!(o.take(), vec![reply()], "nothing pending: leaves at once");
    }

    #[test]
    fn a_promise_about_durable_records_does_not_wait_for_later_ones() {
        let mut o = Outbox::default();
        o.append(Record::Boot { incarnation: 0 });
        o.durable(Lsn(1));
        o.take();
        o.append(Record::Boot { incarnation: 1 });
        o.promise_upto(Lsn(1), reply());
        o.promise_upto(Lsn(2), reply());
        assert_eq!(o.take(), vec![Output::Append(Record::Boot { incarnation: 1 }), reply()], "only the first leaves");
        o.durable(Lsn(2));
        assert_eq!(o.take(), vec![reply()]);
    }

    #[test]
    fn records_nothing_waits_for_can_wait_and_a_later_promise_waits_behind_them() {
        let mut o = Outbox::default();
        o.append(Record::Boot { incarnation: 0 });
        assert!(!o.awaits_durable(), "a record alone promises nothing yet: its sync may wait");
        o.promise(reply());
        assert!(o.awaits_durable(), "a promise behind it: the sync is due");
        o.durable(Lsn(1));
        assert!(!o.awaits_durable());
        assert_eq!(o.take(), vec![Output::Append(Record::Boot { incarnation: 0 }), reply()]);
    }

    #[test]
    fn an_unheld_record_does_not_delay_promises() {
        let mut o = Outbox::default();
        o.append_unheld(Record::CutStart { cut: CutId(1) });
        o.promise(reply());
        assert_eq!(o.take(), vec![Output::Append(Record::CutStart { cut: CutId(1) }), reply()]);
    }
}
