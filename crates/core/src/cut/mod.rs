//! The consistent cut (seed 000; DESIGN §4): each vnode's local cut, the cut process that drives
//! it (a coordinator, or the operator of alterations over the cluster tree), and the restore filter that reads it back.
//! Beside it, the two comparison strategies of DESIGN §4: `blocking`, and `versions` (seed 002's
//! three phases around a snapshot version, with its own restore filter in `versions_restore`).

pub mod blocking;
pub mod coordinator;
pub mod holdings;
pub mod local;
pub mod operator;
pub mod real_time;
pub mod restore;
pub mod tree_process;
pub mod versions;
pub mod versions_restore;
