//! The metadata a simulated cluster tree is created with, for both drivers of the tree: every
//! vnode with its parent queue (what boot loading by parent reads), its state and its host, the
//! cluster's settings, and the partition placement when the tree runs over data (`--tree`).

use waymark_core::alter::cluster::{self, Setting, VnodeEntry};
use waymark_core::alter::{AlterConfig, Metadata};
use waymark_core::Placement;

pub fn genesis<'a>(
    settings: &[Setting<'_>],
    vnodes: impl IntoIterator<Item = &'a AlterConfig>,
    placement: Option<&Placement>,
) -> Metadata {
    cluster::genesis(settings, vnodes.into_iter().map(VnodeEntry::of), placement)
}
