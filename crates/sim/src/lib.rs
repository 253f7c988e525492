//! Waymark's deterministic simulator (DESIGN §8): the real `waymark-core` vnodes in a world of
//! virtual time, seeded faults, workloads and checkers. Same seed, same trace hash.

pub mod checkers;
pub mod client;
pub mod clients;
pub mod config;
pub mod explore;
pub mod faults;
pub mod hash;
pub mod history;
pub mod matrix;
pub mod net;
pub mod queue;
pub mod run;
pub mod slot;
pub mod trace;
pub mod tree;
pub mod tree_mode;
pub mod workloads;
pub mod world;

pub use config::{SimConfig, WorkloadKind};
pub use run::{run_many, run_many_in, run_seed, SeedReport, Summary};
