//! ACL users through the cluster metadata (issue 36, item 4), as a story: a store vnode `A`, child
//! of a root `R` played by hand, is asked by a client to set user `app`. It proposes `acl/app` to
//! its parent; once the root ordered it, `A` applies it, and when the outcome comes back it
//! answers the client `Altered { ok: true }`. The user is in `A`'s metadata, and still there after
//! a crash, rebuilt from the log.

use std::sync::Arc;
use waymark_core::acl::{self, User};
use waymark_core::alter::{md5_of, AlterConfig, AlterMsg, AlterRecord, AlterSeq, MetaVersion, ProposalId, Term};
use waymark_core::{
    Body, ClientId, Envelope, Input, Lsn, Output, Placement, Record, Request, Response, Vnode, VnodeConfig, VnodeId,
};

fn id(name: &str) -> VnodeId {
    VnodeId::parse(name).expect("a vnode id")
}

/// A store vnode of the tree with its log; appends are durable at once and alteration records
/// read back at once (the driver's part). What it sends its parent and its replies are kept.
struct Leaf {
    cfg: VnodeConfig,
    v: Vnode,
    log: Vec<Record>,
    to_parent: Vec<AlterMsg>,
    replies: Vec<(u64, Response)>,
    now_us: u64,
}

impl Leaf {
    fn new(root: &VnodeId) -> Leaf {
        let me = id("store0@node001");
        let placement = Arc::new(Placement::round_robin(std::slice::from_ref(&me), 1, 1));
        let mut cfg = VnodeConfig::new(me.clone(), placement, me.clone());
        let mut tree = AlterConfig::new(me, vec![root.clone()], vec![]);
        // As store vnodes of a deep tree keep it (`alter::shape`): `acl/` must be in it.
        tree.leaf_view = true;
        cfg.tree = Some(tree);
        let v = Vnode::new(cfg.clone());
        let mut leaf = Leaf { cfg, v, log: vec![], to_parent: vec![], replies: vec![], now_us: 0 };
        leaf.input(Input::Restarted);
        leaf
    }

    fn input(&mut self, input: Input) {
        self.now_us += 1_000;
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let before = self.log.len();
            for o in self.v.step(self.now_us, input) {
                match o {
                    Output::Append(r) => {
                        if let Record::Alteration { seq, bytes } = &r {
                            inputs.insert(0, Input::AlterPersisted { seq: *seq, bytes: bytes.clone() });
                        }
                        self.log.push(r);
                    }
                    Output::Send(Envelope { body: Body::Alter(msg), .. }) => self.to_parent.push(msg),
                    Output::Reply { req, response, .. } => self.replies.push((req, response)),
                    _ => {}
                }
            }
            if self.log.len() > before {
                inputs.push(Input::WalDurable(Lsn(self.log.len() as u64)));
            }
        }
    }

    fn hear_root(&mut self, root: &VnodeId, msg: AlterMsg) {
        let env = Envelope { from: root.clone(), to: self.cfg.id.clone(), cut: None, body: Body::Alter(msg) };
        self.input(Input::Message(env));
    }

    fn proposals(&self) -> Vec<(ProposalId, AlterRecord)> {
        let proposal = |m: &AlterMsg| match m {
            AlterMsg::Propose { id, record } => Some((id.clone(), record.clone())),
            _ => None,
        };
        self.to_parent.iter().filter_map(proposal).collect()
    }

    fn user(&self, name: &str) -> Option<User> {
        User::decode(self.v.metadata()?.get(&acl::key(name))?)
    }
}

#[test]
fn a_user_set_through_a_store_vnode_is_proposed_ordered_applied_answered_and_logged() {
    let root = id("manager1@node000");
    let mut a = Leaf::new(&root);
    a.hear_root(&root, AlterMsg::Claim { term: Term(1) });
    let mut app = User::default();
    for rule in ["on", ">pw", "~app:*", "+@read"] {
        app.apply(rule.as_bytes(), [3; 16]).unwrap();
    }
    let request = Request::SetUser { user: "app".into(), stored: app.encode() };
    a.input(Input::Client { client: ClientId(9), req: 1, request });

    // Given the request, A proposes exactly `acl/app` to its parent, and answers nothing yet.
    let proposals = a.proposals();
    assert_eq!(proposals.len(), 1, "{:?}", a.to_parent);
    let (pid, record) = proposals[0].clone();
    assert_eq!((record.key.as_str(), record.value.as_slice()), ("acl/app", app.encode().as_slice()));
    assert!(a.replies.is_empty());

    // The root orders it: A applies it (the leaf view keeps `acl/`) and confirms.
    let (term, seq) = (Term(1), AlterSeq(1));
    let ordered = AlterRecord { origin: Some(pid.clone()), ..record };
    let md5 = md5_of(&ordered.encode(MetaVersion { term, seq }));
    a.hear_root(&root, AlterMsg::Alter { term, prev_term: Term::ZERO, seq, id: pid.clone(), record: ordered, md5 });
    assert_eq!(a.user("app"), Some(app.clone()));
    assert!(a.to_parent.iter().any(|m| matches!(m, AlterMsg::Confirm { seq: s, ok: true, .. } if *s == seq)));

    // The outcome comes back: the client hears that the cluster took it.
    a.hear_root(&root, AlterMsg::Outcome { id: pid, seq, ok: true, applied: 1 });
    assert_eq!(a.replies, vec![(1, Response::Altered { ok: true })]);

    // A crash: the log rebuilds the metadata with the user in it.
    a.v = Vnode::recover(a.cfg.clone(), &a.log);
    a.input(Input::Restarted);
    assert_eq!(a.user("app"), Some(app));
}
