//! The real runtime that drives `waymark-core`'s state machines over tokio, TCP and the WAL.
//!
//! Not built yet: see `docs/ARCHITECTURE.md` for what exists today.
