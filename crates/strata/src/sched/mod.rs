//! How foreground and background share the CPU, in one place.
//!
//! The contract:
//! - **Threads** (`threads.rs`): every thread the engine starts, starts
//!   here. Background threads (flushes, compactions, the memtables' chunk
//!   filler, the table purge, the WAL's page filler) run
//!   `Options::background_nice` below the thread that opened the database
//!   (19 for the page filler), so a writer's thread wins the core when both
//!   want it.
//! - **Yield points** (`yielding.rs`): a background thread offers its core
//!   every `YIELD_EVERY` (200 µs) of computing while its database's gate
//!   (`Inner::admission.yielding`) is open; the database closes the gate while the
//!   background work is what writers wait for (an L0 slowdown or stop,
//!   compaction debt over its soft limit).
//! - **CPU budget** (`cpu.rs`): at most `Options::background_cpus` flushes
//!   and compactions run at once; a flush comes first and takes a running
//!   compaction's slot at its next give-way point.
//! - **Write pacing** (`pacing.rs`): while every memtable slot is taken,
//!   writers are delayed so the active memtable fills no sooner than the
//!   running flush ends, instead of running into a full memtable and
//!   stopping for the rest of the flush.
//! - **Slowdown** (`slowdown.rs`): while level 0 or the compaction debt
//!   asks writers to slow down, they are admitted at the rate compactions
//!   have lately drained level 0, less a margin.
//!
//! This module imports no other module of the crate: every floor may use
//! it.

mod bucket;
mod cpu;
mod pacing;
mod slowdown;
mod threads;
mod yielding;

pub(crate) use cpu::{CpuBudget, Slot};
pub(crate) use pacing::Pacer;
pub(crate) use slowdown::Slowdown;
pub(crate) use threads::{scope, spawn, spawn_background, spawn_scoped};
#[cfg(test)]
pub(crate) use yielding::enter_background;
pub(crate) use yielding::yield_point;
