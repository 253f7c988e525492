//! A vnode's files: its write-ahead log (written on its vnode's thread with group commit), its
//! checkpoint, the bookkeeping of recent cuts (`cut_files`) and the export of a cut's files into a
//! snapshot (`export`, run by the log writer, which owns the log). Layout of a data directory:
//! `vnodes/<kind>@<host>/wal/*.wal` and `vnodes/<kind>@<host>/checkpoint`, and for snapshots
//! `cut-bases/<cut>.checkpoint` (links) and `snapshot-pin`.

pub mod checkpoint;
pub mod cut_files;
pub mod export;
pub mod log_writer;
pub mod recover;
