//! The Redis protocol front end (DESIGN §7): every host accepts any key from any Redis client.
//! `command.rs` types a request, `exec.rs` turns data commands into one transaction, `session.rs`
//! runs a connection, `info.rs` answers what tools ask, `server.rs` accepts connections.

pub mod command;
pub mod exec;
pub mod info;
pub mod server;
pub mod session;
