//! Pickers: pure functions from a [`PickEnv`] to an optional [`Plan`]. No
//! I/O, no locks; the background loop builds the environment under the
//! state mutex and runs the plan outside it.
//!
//! Two pickers, chosen once at open from `Options::compaction_picker`
//! (`db::Designs::resolve`):
//! [`Leveled`] (size triggers only) and [`Stale`] (size triggers, then
//! tables whose stale-version score passed `stale_threshold`). With either,
//! tables holding versions a range tombstone hides are cleared last
//! ([`range_dels`]). Before either, with a ttl, wholly expired tables are
//! deleted unread (`expired`).

mod expired;
pub(crate) mod l0;
mod leveled;
pub mod range_dels;
mod stale;

pub use leveled::{
    choose_file, choose_files, compaction_debt, level_target, pick_last_level, pick_range, scores,
    Leveled,
};
pub use stale::Stale;

use super::scheduler::InFlight;
use super::Plan;
use crate::options::Options;
use crate::types::SeqNo;
use crate::version::Version;
use std::collections::HashMap;

/// Everything a picker may look at.
pub struct PickEnv<'a> {
    pub version: &'a Version,
    pub opts: &'a Options,
    /// The running compactions: their input tables and output ranges.
    pub in_flight: &'a InFlight,
    /// The round-robin start of each level: the largest internal key its
    /// last compaction took.
    pub pointers: &'a [Vec<u8>],
    /// Stale versions counted per table (empty without stale tracking).
    pub stale: &'a HashMap<u64, u64>,
    /// The oldest sequence a reader may read at: the oldest live
    /// snapshot's, else the last published. A range tombstone above it
    /// may not clear what it hides yet.
    pub horizon: SeqNo,
    /// The newest sequence that has expired (`ttl_secs`): every version at
    /// or below it reads as deleted. 0 without a ttl.
    pub expired_to: SeqNo,
}

impl PickEnv<'_> {
    /// `plan` if it may run beside the running compactions.
    pub fn admit(&self, plan: Plan) -> Option<Plan> {
        self.in_flight.admits(&plan, self.version).then_some(plan)
    }
}

/// Chooses the next compaction.
pub trait Picker: Send + Sync {
    fn pick(&self, env: &PickEnv<'_>) -> Option<Plan>;
}

#[cfg(test)]
mod fixtures;
