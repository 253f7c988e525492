//! The ACL users this host checks clients against (issue 36, item 4): read from the cluster
//! metadata its vnodes hold (`acl/<user>` records, `waymark_core::acl`), republished whenever a
//! vnode applied an alteration that changed them. Vnode threads offer their metadata after each
//! step that moved its version; sessions and the admin API read the latest users.
//!
//! Invariant: `users` is compiled from the `acl/` records of the newest metadata version offered
//! (versions are ordered term first, like Raft's), plus `default` as the node's config has it.

use std::sync::{Arc, Mutex, RwLock};
use waymark_core::acl::{Users, KEY_PREFIX};
use waymark_core::alter::{MetaVersion, Metadata};

/// The `acl/` records of one copy of the metadata, in key order.
type UserRecords = Vec<(String, Vec<u8>)>;

pub struct AclState {
    users: RwLock<Arc<Users>>,
    /// The newest version offered, and the `acl/` records it held.
    seen: Mutex<Option<(MetaVersion, UserRecords)>>,
    /// Whether the node has a client password (`node.password_file`): the `default` user's.
    default_password: bool,
}

impl AclState {
    pub fn new(default_password: bool) -> Self {
        let users = Users::from_records(std::iter::empty(), default_password);
        AclState { users: RwLock::new(Arc::new(users)), seen: Mutex::new(None), default_password }
    }

    /// The users as of the newest metadata offered.
    pub fn users(&self) -> Arc<Users> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A vnode's metadata after a step that changed its version: taken if newer than any seen.
    pub fn offer(&self, metadata: &Metadata) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let version = metadata.version();
        if seen.as_ref().is_some_and(|(v, _)| *v >= version) {
            return;
        }
        let records: UserRecords = metadata.records_under(KEY_PREFIX).map(|(k, v)| (k.clone(), v.clone())).collect();
        let changed = seen.as_ref().is_none_or(|(_, before)| *before != records);
        if changed {
            let users = Users::from_records(records.iter().map(|(k, v)| (k, v)), self.default_password);
            *self.users.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(users);
        }
        *seen = Some((version, records));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_core::acl::{key, User};
    use waymark_core::alter::{AlterRecord, AlterSeq, Term};

    #[test]
    fn the_newest_metadata_offered_gives_the_users() {
        let state = AclState::new(true);
        assert_eq!(state.users().stored(), 0);
        let mut m = Metadata::genesis([]);
        let mut alice = User::default();
        alice.apply(b"on", [0; 16]).unwrap();
        let at = |seq| MetaVersion::new(Term(1), AlterSeq(seq));
        m.apply(at(1), &AlterRecord::set(key("alice"), alice.encode()));
        let older = m.clone();
        m.apply(at(2), &AlterRecord::set(key("bob"), alice.encode()));
        state.offer(&m);
        assert_eq!(state.users().stored(), 2);
        state.offer(&older);
        assert_eq!(state.users().stored(), 2, "an older copy (a slower vnode) changes nothing");
        m.apply(at(3), &AlterRecord::set(key("bob"), vec![]));
        state.offer(&m);
        assert!(state.users().get("bob").is_none() && state.users().get("alice").is_some());
    }
}
