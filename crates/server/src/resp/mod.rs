//! The Redis protocol front end (DESIGN §7): every host accepts any key from any Redis client.
//! `command.rs` types a request (`ttl_args.rs` the deadline options, `hash_args.rs`, `set_args.rs` and `list_args.rs` the hash, set and list commands'), `session.rs` runs a connection (its data commands run through the
//! core's transaction client, `waymark_core::client`), `info.rs` answers what tools ask, `server.rs` accepts connections.

pub mod acl;
pub mod command;
pub mod hash_args;
pub mod info;
pub mod list_args;
pub mod scan;
pub mod server;
pub mod session;
pub mod set_args;
pub mod ttl_args;
