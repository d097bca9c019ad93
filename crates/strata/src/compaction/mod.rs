//! Compaction: a *picker* decides what to compact ([`picker::Picker`], a
//! pure function of a [`picker::PickEnv`]) and emits a [`Plan`], plain
//! serialisable data; an *executor* turns a plan into new tables and a
//! version edit ([`executor::Executor`]; [`executor::Linear`] today). Later executors (pipelined,
//! sub-tasks, offloaded to a worker process) consume the same `Plan`.
//!
//! [`filter::Dropper`] decides, entry by entry, what a flush or compaction
//! may drop (shadowed versions, bottom-level tombstones) given the live
//! snapshots; [`output::Outputs`] cuts the kept entries into tables.

pub mod events;
pub mod executor;
pub mod filter;
pub mod output;
pub mod picker;
mod plan;
pub mod scheduler;
pub mod split;

pub use plan::{Assignment, Plan, PlanKind, Trigger};
