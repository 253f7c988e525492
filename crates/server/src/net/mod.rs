//! Links between hosts: frames (`frame.rs`), authentication (`auth.rs`), the MACs of the frames
//! after it (`seal.rs`), what waits to be written to a peer (`outgoing.rs`), the links (`peer.rs`),
//! and the byte stream under them, plaintext or TLS (`stream.rs`).

pub mod auth;
pub mod frame;
pub mod outgoing;
pub mod peer;
pub mod seal;
pub mod stream;
#[cfg(test)]
mod tls_link_tests;
