//! Seed 004 recovery, scripted: a store vnode that votes for the root rebuilds its metadata from
//! its log after a crash, and must rebuild exactly what it had applied — the alterations it
//! confirmed, not every alteration record it wrote. Its roots (the primary `R`, a secondary `S`
//! that won a term while `R` was silent, and a later secondary `S2`) are played by hand; the
//! vnode `A` is the real store vnode with its log.

use std::sync::Arc;
use waymark_core::alter::{
    md5_of, AlterConfig, AlterInput, AlterMsg, AlterNode, AlterRecord, AlterSeq, MetaVersion, Metadata, ProposalId,
    Term,
};
use waymark_core::{Body, Envelope, Input, Lsn, Output, Placement, Record, Vnode, VnodeConfig, VnodeId};

fn id(name: &str) -> VnodeId {
    VnodeId::parse(name).expect("a vnode id")
}

/// A store vnode of the tree with its log; every append is durable at the next `sync`, and the
/// alteration records written are read back only when the test says so.
struct Host {
    cfg: VnodeConfig,
    v: Vnode,
    log: Vec<Record>,
    sent: Vec<(VnodeId, AlterMsg)>,
    unread: Vec<(AlterSeq, Vec<u8>)>,
    now_us: u64,
}

impl Host {
    fn new(cfg: VnodeConfig) -> Host {
        let v = Vnode::new(cfg.clone());
        let mut h = Host { cfg, v, log: vec![], sent: vec![], unread: vec![], now_us: 0 };
        h.input(Input::Restarted);
        h
    }

    fn input(&mut self, input: Input) {
        self.now_us += 1_000;
        let out = self.v.step(self.now_us, input);
        self.take(out);
        let out = self.v.step(self.now_us, Input::WalDurable(Lsn(self.log.len() as u64)));
        self.take(out);
    }

    fn take(&mut self, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Append(r) => {
                    if let Record::Alteration { seq, bytes } = &r {
                        self.unread.push((*seq, bytes.clone()));
                    }
                    self.log.push(r);
                }
                Output::Send(Envelope { to, body: Body::Alter(msg), .. }) => self.sent.push((to, msg)),
                _ => {}
            }
        }
    }

    fn hear(&mut self, from: &VnodeId, msg: AlterMsg) {
        let env = Envelope { from: from.clone(), to: self.cfg.id.clone(), cut: None, body: Body::Alter(msg) };
        self.input(Input::Message(env));
    }

    /// The driver reads back what was written (seed 004 point 4), in order.
    fn read_back(&mut self) {
        for (seq, bytes) in std::mem::take(&mut self.unread) {
            self.input(Input::AlterPersisted { seq, bytes });
        }
    }

    /// The last message sent to `to` that matches.
    fn last_to(&self, to: &VnodeId, pick: impl Fn(&AlterMsg) -> bool) -> Option<AlterMsg> {
        self.sent.iter().rev().find(|(t, m)| t == to && pick(m)).map(|(_, m)| m.clone())
    }

    fn metadata(&self) -> Metadata {
        self.v.tree().expect("a tree vnode").metadata().clone()
    }

    /// A crash that keeps the whole (durable) log, and a restart from it.
    fn crash_and_restart(&mut self) {
        self.v = Vnode::recover(self.cfg.clone(), &self.log);
        self.unread.clear();
        self.input(Input::Restarted);
    }
}

/// Alteration `(term, seq)` ordered on top of `(prev_term, seq - 1)` by `root`.
fn alter(root: &VnodeId, (term, prev_term, seq): (u64, u64, u64), key: &str, value: &str) -> AlterMsg {
    let record = AlterRecord::set(key, value);
    let id = ProposalId { initiator: root.clone(), n: seq };
    let (term, prev_term, seq) = (Term(term), Term(prev_term), AlterSeq(seq));
    let md5 = md5_of(&record.encode(MetaVersion { term, seq }));
    AlterMsg::Alter { term, prev_term, seq, id, record, md5 }
}

fn confirmed(h: &Host, root: &VnodeId, term: u64, seq: u64) -> bool {
    let (term, seq) = (Term(term), AlterSeq(seq));
    h.last_to(root, |m| matches!(m, AlterMsg::Confirm { term: t, seq: s, .. } if (*t, *s) == (term, seq)))
        == Some(AlterMsg::Confirm { term, seq, ok: true, applied: 1 })
}

/// `A` and `B` are the store vnodes right under the root `R`: with `R` they are its voters
/// (majority 2). `A` sorts after `B`, so a root comparing equal versions keeps `A`'s copy.
#[test]
fn a_store_vnode_rebuilds_from_its_log_only_the_alterations_it_applied() {
    let (r, a, b) = (id("manager1@node000"), id("store0@node002"), id("store0@node001"));
    let s = AlterNode::secondary_name(&r, &a.host);
    let mut tree = AlterConfig::new(a.clone(), vec![r.clone()], vec![]);
    (tree.siblings, tree.failover) = (vec![b.clone(), a.clone()], true);
    let placement = Arc::new(Placement::round_robin(&[b.clone(), a.clone()], 2, 1));
    let mut cfg = VnodeConfig::new(a.clone(), placement, b.clone());
    cfg.tree = Some(tree);
    let mut h = Host::new(cfg);

    // Term 1: R orders its `root` record; A applies it.
    h.hear(&r, AlterMsg::Claim { term: Term(1) });
    h.hear(&r, alter(&r, (1, 0, 1), "root", "R term 1"));
    h.read_back();
    assert!(confirmed(&h, &r, 1, 1));

    // R falls silent; A's host runs the secondary root S, which wins term 2 (A and B) and orders
    // its `root` record, then Z. A writes Z, but before Z is read back R returns and claims term
    // 3: A promises it, with what it has applied — (2, 2) — and leaves Z: Z is never applied here.
    h.now_us += 100_000;
    h.hear(&s, AlterMsg::Claim { term: Term(2) });
    h.hear(&s, alter(&s, (2, 1, 2), "root", "S term 2"));
    h.read_back();
    assert!(confirmed(&h, &s, 2, 2));
    h.hear(&s, alter(&s, (2, 2, 3), "config/z", "never answered ok"));
    h.hear(&r, AlterMsg::Claim { term: Term(3) });
    let promise = h.last_to(&r, |m| matches!(m, AlterMsg::Promise { term: Term(3), granted: true, .. }));
    let Some(AlterMsg::Promise { metadata: Some(promised), .. }) = promise else { panic!("A promises term 3") };
    assert_eq!(promised.version(), MetaVersion::new(Term(2), AlterSeq(2)));
    h.read_back();
    assert_eq!(h.metadata().get("config/z"), None, "an alteration left for a newer term is not applied");

    // R wins term 3 with A's promise and catches up to (2, 2); it orders `root` and `config/y` on
    // top, A applies and confirms both: with R's own vote a majority, both are answered ok.
    h.hear(&r, alter(&r, (3, 2, 3), "root", "R term 3"));
    h.read_back();
    h.hear(&r, alter(&r, (3, 3, 4), "config/y", "answered ok"));
    h.read_back();
    assert!(confirmed(&h, &r, 3, 3) && confirmed(&h, &r, 3, 4));
    let live = h.metadata();
    assert_eq!(live.version(), MetaVersion::new(Term(3), AlterSeq(4)));
    assert_eq!(live.get("root"), Some(&b"R term 3"[..]));

    // A crashes and restarts from its log: it must hold what it confirmed.
    h.crash_and_restart();
    assert_eq!(h.metadata(), live, "the log's replay differs from what the vnode had applied");

    // R dies again; A's host runs a secondary root once more, started from A's copy, and claims
    // term 4. A and B promise, both at version (3, 4): with equal versions the root keeps its own
    // copy — A's. It must be R's history.
    h.now_us += 100_000;
    let mut root2 =
        AlterNode::new(AlterConfig::new(r.clone(), vec![], vec![b.clone(), a.clone()]).secondary(s.clone()));
    root2.step(h.now_us, AlterInput::Started { metadata: h.metadata(), term: Term(3) });
    h.hear(&s, AlterMsg::Claim { term: Term(4) });
    let promise = h.last_to(&s, |m| matches!(m, AlterMsg::Promise { term: Term(4), granted: true, .. }));
    let Some(AlterMsg::Promise { metadata: a_copy, .. }) = promise else { panic!("A promises term 4") };
    let promise = |metadata| AlterMsg::Promise { term: Term(4), granted: true, metadata };
    root2.step(h.now_us, AlterInput::Message { from: b, msg: promise(Some(live.clone())) });
    root2.step(h.now_us, AlterInput::Message { from: a, msg: promise(a_copy) });
    let adopted = root2.metadata();
    assert_eq!(adopted.get("config/z"), None, "an alteration no root answered ok came back");
    assert_eq!(adopted.get("root"), Some(&b"R term 3"[..]), "an alteration answered ok was lost");
}
