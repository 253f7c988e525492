//! One module per subcommand.

pub mod admin_client;
pub mod cluster;
pub mod demo;
pub mod node;
pub mod snapshot;
