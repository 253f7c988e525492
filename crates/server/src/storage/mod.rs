//! A vnode's files: its write-ahead log (driven by one writer thread with group commit) and its
//! checkpoint. Layout of a data directory: `vnodes/<kind>@<host>/wal/*.wal` and
//! `vnodes/<kind>@<host>/checkpoint`.

pub mod checkpoint;
pub mod recover;
pub mod wal_thread;
