//! The tree's shape is built by the core (`waymark_core::alter::shape`), shared with the server.

pub use waymark_core::alter::shape::*;
