//! Compaction: a *picker* decides what to compact ([`picker::Picker`], a
//! pure function of a [`picker::PickEnv`]) and emits a [`Plan`], plain
//! serialisable data; an *executor* turns a plan into new tables and a
//! version edit ([`executor::Executor`]: linear, sub-task, pipelined, CoPro,
//! CoPro+ and offloaded executors). The [`scheduler`] lets several plans
//! run at once when their tables and output ranges do not meet; [`split`]
//! cuts a plan into key-range sub-tasks.
//!
//! [`filter::Dropper`] decides, entry by entry, what a flush or compaction
//! may drop (shadowed versions, bottom-level tombstones) given the live
//! snapshots; [`output::Outputs`] cuts the kept entries into tables.

pub mod executor;
pub use crate::runs::{filter, output};
pub mod picker;
mod plan;
pub mod scheduler;
pub mod split;

pub use plan::{Assignment, Plan, PlanKind, RowSlice, Trigger};
