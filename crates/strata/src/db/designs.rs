//! The designs an `Options` selects, resolved once at open, in one place:
//! level 0's container (`Options::l0`), the compaction picker with the
//! tracker that feeds it (`compaction_picker`), and the executor
//! (`executor`). The engine itself (`Options::engine`) is chosen one floor
//! up, by `strata::open`. Hot paths call the chosen trait objects; nothing
//! downstream matches on the option enums again.

use crate::compaction::{executor, picker};
use crate::options::{ExecutorKind, Options, PickerKind};
use std::sync::Arc;

/// The chosen designs of one database.
pub(crate) struct Designs {
    /// Level 0's container: flush sink, plans, stalls, open-time work.
    pub l0: Box<dyn crate::l0::L0Container>,
    /// Chooses compactions.
    pub picker: Box<dyn picker::Picker>,
    /// Where each key's newest version lives, for the stale picker, stale
    /// dropping and the read shortcut; tracks nothing for `Leveled`.
    pub tracker: Arc<dyn crate::stale::Tracker>,
    /// Carries out plans.
    pub executor: Box<dyn executor::Executor>,
}

impl Designs {
    /// One `match` per selectable design. Adjusts `opts` where a design
    /// requires it (see `l0::design`).
    pub(crate) fn resolve(opts: &mut Options) -> Designs {
        let l0 = crate::l0::design(opts);
        let (picker, tracker): (Box<dyn picker::Picker>, Arc<dyn crate::stale::Tracker>) =
            match opts.compaction_picker {
                PickerKind::Leveled => (
                    Box::new(picker::Leveled),
                    Arc::new(crate::stale::NoTracking),
                ),
                PickerKind::Stale => (
                    Box::new(picker::Stale),
                    Arc::new(crate::stale::StaleTracker::new(
                        opts.stale.update_table_size,
                    )),
                ),
            };
        let local = |subtasks, mode| Box::new(executor::Local { subtasks, mode });
        let decision = || {
            executor::Mode::Decide(executor::Decision::new(
                opts.copro.alpha,
                opts.copro.beta,
                1.0,
                opts.copro.threshold,
                opts.copro.large_value,
            ))
        };
        let executor: Box<dyn executor::Executor> = match &opts.executor {
            ExecutorKind::Linear => local(1, executor::Mode::Linear),
            ExecutorKind::Subtasks(n) => local(*n, executor::Mode::Linear),
            ExecutorKind::Pipelined => local(1, executor::Mode::Pipelined),
            ExecutorKind::Copro(n) => local(*n, executor::Mode::Pipelined),
            ExecutorKind::CoproPlus(n) => local(*n, decision()),
            ExecutorKind::Offload(addr) => Box::new(executor::offload::Offload::new(
                addr,
                std::time::Duration::from_millis(opts.copro.offload_timeout_ms),
                decision(),
            )),
        };
        Designs {
            l0,
            picker,
            tracker,
            executor,
        }
    }
}
