//! One module per subcommand.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by commands that tell their own story (the demo): the cluster and restore steps they call
/// then print nothing of their own.
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `println!`, unless a command asked for quiet.
macro_rules! say {
    ($($arg:tt)*) => {
        if !$crate::cmd::quiet() {
            println!($($arg)*);
        }
    };
}

pub mod admin_client;
pub mod bank;
pub mod bench;
pub mod certs;
pub mod charts;
pub mod cluster;
pub mod cluster_status;
pub mod demo;
pub mod demo_live;
pub mod nemesis;
pub mod node;
pub mod replicas;
pub mod snapshot;
pub mod started;
