//! Alterations reach their initiators and every working vnode (`--tree-only`).

use super::{Checker, Violation};
use std::collections::BTreeMap;
use waymark_core::alter::{AlterRecord, Metadata, ProposalId};
use waymark_core::VnodeId;

pub const CHECKER: Checker = Checker {
    name: "tree-alterations",
    property: "every alteration is reported to its initiator, and one reported applied is in every working \
               vnode's metadata (checked on keys no later alteration overwrites)",
};

/// A proposal of the run, how it ended and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalOutcome {
    pub record: AlterRecord,
    /// Answered ok or failed (failed too when its initiator crashed first); `None`: never answered.
    pub ok: Option<bool>,
    /// When it was answered (0: never, or lost with its initiator).
    pub answered_us: u64,
}

pub fn check(proposals: &BTreeMap<ProposalId, ProposalOutcome>, metadata: &[(VnodeId, Metadata)]) -> Vec<Violation> {
    let mut out = vec![];
    for (id, ProposalOutcome { record, ok, .. }) in proposals {
        match ok {
            None => out.push(
                CHECKER.violation(format!("proposal {}#{} ({}) was never answered", id.initiator, id.n, record.key)),
            ),
            Some(true) if record.key.starts_with("config/") => {
                for (v, m) in metadata {
                    if m.get(&record.key) != Some(record.value.as_slice()) {
                        let evidence = format!("{} reported applied, but {v} lacks {}", id.initiator, record.key);
                        out.push(CHECKER.violation(evidence));
                    }
                }
            }
            Some(_) => {}
        }
    }
    out
}
