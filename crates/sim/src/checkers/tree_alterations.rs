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

pub fn check(
    proposals: &BTreeMap<ProposalId, (AlterRecord, Option<bool>)>,
    metadata: &[(VnodeId, Metadata)],
) -> Vec<Violation> {
    let mut out = vec![];
    for (id, (record, outcome)) in proposals {
        match outcome {
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
