//! A client's `ACL SETUSER`/`DELUSER` on a store vnode: proposed as an alteration of
//! `acl/<user>` through the tree (seed 004), answered once its initiator hears how it ended. The
//! metadata orders it with every other alteration, so every host applies the same users in the
//! same order; a host learns of a change when its vnodes apply it.
//!
//! Invariant: a request in `waiting` was proposed under its number and is answered once, when
//! the alteration role reports that number done (or never, if the vnode crashes first: the
//! client's own timeout answers it; the alteration may still be applied).

use super::KEY_PREFIX;
use crate::alter::{AlterInput, AlterRecord};
use crate::ids::ClientId;
use crate::io::Response;
use crate::vnode::Vnode;
use std::collections::BTreeMap;

/// Set in the number of every ACL proposal, never in catch-up's (which count from the
/// incarnation at bit 32 up) nor in a vnode's own (`ProposalId::OWN_BIT`).
const ACL_BIT: u64 = 1 << 62;
/// ACL changes a vnode has in flight at most; one more is refused with `TRYAGAIN`.
pub const IN_FLIGHT_MAX: usize = 256;

#[derive(Debug, Default)]
pub struct AclProposals {
    /// Proposed, by proposal number: who asked.
    waiting: BTreeMap<u64, (ClientId, u64)>,
    /// Proposals made in this incarnation.
    made: u64,
}

impl Vnode {
    pub(crate) fn client_set_user(&mut self, client: ClientId, req: u64, user: String, stored: Vec<u8>) {
        if self.tree.is_none() {
            let why = "ERR this vnode holds no cluster metadata";
            return self.reply(client, req, Response::Unavailable { why });
        }
        if self.acl.waiting.len() >= IN_FLIGHT_MAX {
            let why = "TRYAGAIN too many ACL changes in flight";
            return self.reply(client, req, Response::Unavailable { why });
        }
        self.acl.made += 1;
        // Unique across restarts: the incarnation (count of boots) in the high bits.
        let n = ACL_BIT | (u64::from(self.incarnation & 0x3fff_ffff) << 32) | (self.acl.made & 0xffff_ffff);
        assert!(self.acl.waiting.insert(n, (client, req)).is_none(), "proposal {n} made twice");
        let record = AlterRecord::set(format!("{KEY_PREFIX}{user}"), stored);
        self.alter_input(AlterInput::Propose { n, record });
    }

    /// The alteration role's word on proposal `n`: answers the client who asked, if one did.
    pub(crate) fn acl_done(&mut self, n: u64, ok: bool) {
        if n & ACL_BIT == 0 || n & crate::alter::ProposalId::OWN_BIT != 0 {
            return;
        }
        if let Some((client, req)) = self.acl.waiting.remove(&n) {
            self.reply(client, req, Response::Altered { ok });
        }
    }
}
