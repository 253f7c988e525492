//! A vnode's files: its write-ahead log (written on its vnode's thread with group commit) and its
//! checkpoint. Layout of a data directory: `vnodes/<kind>@<host>/wal/*.wal` and
//! `vnodes/<kind>@<host>/checkpoint`, and for snapshots `cut-bases/<cut>.checkpoint` (links) and
//! `snapshot-pin`.

pub mod checkpoint;
pub mod cut_files;
pub mod log_writer;
pub mod recover;
