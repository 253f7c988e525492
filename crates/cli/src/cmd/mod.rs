//! One module per subcommand.

pub mod cluster;
pub mod demo;
pub mod node;
pub mod snapshot;
