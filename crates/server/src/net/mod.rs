//! Links between hosts: frames (`frame.rs`), authentication (`auth.rs`), the links (`peer.rs`).

pub mod auth;
pub mod frame;
pub mod peer;
