//! GETs at a primary wait for prepared writes on their key, so reads are linearizable.
//!
//! A transaction is acknowledged once its first committer decided it, before its other
//! participants heard (their `Finish` is on its way). A GET served from the committed store in
//! that window returns the value from before a write its client — or anyone who heard of the
//! acknowledgement — knows committed. So a GET of a key that a prepared branch writes waits until
//! every such branch that held the key when the GET arrived has finished (committed or rolled
//! back). Branches that come later are not waited for, so reads of a hot key cannot starve.
//!
//! Invariant: a waiting read waits only for branches that held its key's lock when it arrived,
//! and it is answered as soon as the last of them finished here.

use crate::collection::{element_prefix, Head};
use crate::ids::{Branch, ClientId, Key, VnodeId};
use crate::io::{Element, Member, Pick, Response, ELEMENTS_PAGE_BYTES_MAX, ELEMENTS_PAGE_MAX};
use crate::message::TxnMsg;
use crate::vnode::Vnode;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Who asked for a read at this primary.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Reader {
    /// A client of this vnode (it is the key's primary and the client's near).
    Client { client: ClientId, req: u64 },
    /// Another vnode, the client's near, read number `req`.
    Near { from: VnodeId, req: u64 },
    /// `Client`, asking for a collection's elements with its head (`Request::Elements`).
    ClientElements { client: ClientId, req: u64, pick: Pick },
    /// `Near`, asking for a collection's elements with its head (`TxnMsg::ReadElements`).
    NearElements { from: VnodeId, req: u64, pick: Pick },
}

#[derive(Debug, Hash)]
struct WaitingRead {
    reader: Reader,
    /// Invariant: not empty while the read waits.
    waits: BTreeSet<Branch>,
}

/// Reads waiting for prepared writes, by key.
#[derive(Debug, Default, Hash)]
pub struct ReadWaits {
    by_key: BTreeMap<Key, Vec<WaitingRead>>,
}

impl ReadWaits {
    pub fn len(&self) -> usize {
        self.by_key.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

impl Vnode {
    /// A read of `key` at its primary: answered now, or once the prepared writes on it finished.
    pub(crate) fn read_at_primary(&mut self, reader: Reader, key: Key) {
        if !self.leads(&key) {
            return self.refuse_read(reader, "TRYAGAIN the key's partition moved");
        }
        let waits = self.prepared_writers_of(&key);
        if waits.is_empty() || self.cfg.breaks.reads_ignore_prepared {
            return self.answer_read(reader, &key);
        }
        self.read_waits.by_key.entry(key).or_default().push(WaitingRead { reader, waits });
    }

    /// A read this vnode cannot answer: its near answers `TRYAGAIN`; a client here is told `why`.
    pub(crate) fn refuse_read(&mut self, reader: Reader, why: &'static str) {
        match reader {
            Reader::Near { from, req } | Reader::NearElements { from, req, .. } => {
                self.send_txn(&from, TxnMsg::ReadRefused { req })
            }
            Reader::Client { client, req } | Reader::ClientElements { client, req, .. } => {
                self.reply(client, req, Response::Unavailable { why })
            }
        }
    }

    /// The branches prepared here that hold `key`'s lock and write it.
    pub(crate) fn prepared_writers_of(&self, key: &Key) -> BTreeSet<Branch> {
        let writes_key = |b: &&Branch| {
            self.part.prepared.get(*b).is_some_and(|p| !p.read_only && p.rec.writes.iter().any(|w| &w.key == key))
        };
        self.locks.holders(key).iter().filter(writes_key).cloned().collect()
    }

    fn answer_read(&mut self, reader: Reader, key: &Key) {
        if self.read_waits_for_expiry(&reader, key) {
            return;
        }
        let e = self.store.get(key);
        let (deadline_ms, now_ms) = (e.deadline_ms.filter(|_| e.value.is_some()), self.clock_ms());
        let writer_cut = self.rt.read_reveals(key, &self.cfg.breaks);
        // Break `reads-before-commit-durable` answers without waiting for this vnode's log.
        let unheld = self.cfg.breaks.reads_before_commit_durable;
        match reader {
            Reader::Client { client, req } => {
                let response = Response::Value { value: e.value, version: e.version, deadline_ms, now_ms };
                match unheld {
                    true => self.reply_revealing_unheld(writer_cut, client, req, response),
                    false => self.reply_revealing(writer_cut, client, req, response),
                }
            }
            Reader::Near { from, req } => {
                let (value, version) = (e.value, e.version);
                let reply = TxnMsg::ReadReply { req, value, version, writer_cut, deadline_ms, now_ms };
                match unheld {
                    true => self.send_txn_unheld(&from, reply),
                    false => self.send_txn(&from, reply),
                }
            }
            Reader::ClientElements { client, req, pick } => {
                let (elements, next) = self.elements(key, e.value.as_deref(), &pick);
                let (value, version) = (e.value, e.version);
                let response = Response::Elements { value, version, deadline_ms, now_ms, elements, next };
                self.reply_revealing(writer_cut, client, req, response)
            }
            Reader::NearElements { from, req, pick } => {
                let (elements, next) = self.elements(key, e.value.as_deref(), &pick);
                let (value, version) = (e.value, e.version);
                let reply =
                    TxnMsg::ElementsReply { req, value, version, writer_cut, deadline_ms, now_ms, elements, next };
                self.send_txn(&from, reply)
            }
        }
    }

    /// The elements `pick` asks for of the collection whose head `key` holds `head` (none if it
    /// holds a string or nothing), and the member a page goes on after. Read from the committed
    /// store: the head's read waited for every prepared branch writing it, and every branch that
    /// writes an element writes its head (`collection`).
    fn elements(&self, key: &Key, head: Option<&[u8]>, pick: &Pick) -> (Vec<Element>, Option<Member>) {
        let Some(head) = head.and_then(Head::decode) else { return (vec![], None) };
        let prefix = element_prefix(key, head.kind);
        let live = |k: &[u8]| self.store.entry(k).and_then(|e| e.value.clone());
        match pick {
            Pick::Members(members) => {
                let mut key = prefix.clone();
                let element = |m: &Member| {
                    key.truncate(prefix.len());
                    key.extend_from_slice(m);
                    Element { member: m.clone(), value: live(&key) }
                };
                (members.iter().map(element).collect(), None)
            }
            Pick::Page { after, count } => {
                let count = (*count).clamp(1, ELEMENTS_PAGE_MAX) as usize;
                let from = match after {
                    Some(m) => Bound::Excluded([&prefix[..], m].concat()),
                    None => Bound::Included(prefix.clone()),
                };
                let (mut elements, mut bytes) = (vec![], 0usize);
                let in_collection = self.store.range(from.as_ref().map(Vec::as_slice));
                for (k, e) in in_collection.take_while(|(k, _)| k.starts_with(&prefix)) {
                    if elements.len() >= count || bytes >= ELEMENTS_PAGE_BYTES_MAX {
                        let next = elements.last().map(|e: &Element| e.member.clone());
                        return (elements, next);
                    }
                    let Some(value) = &e.value else { continue };
                    bytes = bytes.saturating_add(k.len() + value.len());
                    elements.push(Element { member: k[prefix.len()..].to_vec(), value: Some(value.clone()) });
                }
                (elements, None)
            }
        }
    }

    /// `branch` finished here and released `keys`: answer the reads that waited only for it.
    pub(crate) fn reads_after_finish(&mut self, branch: &Branch, keys: &[Key]) {
        for key in keys {
            let Some(waiting) = self.read_waits.by_key.get_mut(key) else { continue };
            for r in waiting.iter_mut() {
                r.waits.remove(branch);
            }
            let (ready, still): (Vec<WaitingRead>, Vec<WaitingRead>) =
                std::mem::take(waiting).into_iter().partition(|r| r.waits.is_empty());
            if still.is_empty() {
                self.read_waits.by_key.remove(key);
            } else {
                self.read_waits.by_key.insert(key.clone(), still);
            }
            for r in ready {
                self.answer_read(r.reader, key);
            }
        }
    }
}
