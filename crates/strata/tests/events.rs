//! Flush and compaction output events: the seam stale-version tracking uses.
//!
//! Listeners run on the engine's background threads, where a panic is not
//! seen by the test (the thread dies, and the test hangs or passes): the
//! recorder writes what it finds wrong into `failures`, and the test thread
//! asserts that list is empty.

mod common;

use common::{open, tiny_options, tiny_with, STALE};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use strata::{EventListener, TableCreated, TableReason};

/// Live tables: id → (level, keys).
type LiveTables = BTreeMap<u64, (usize, Vec<Vec<u8>>)>;

#[derive(Default)]
struct Recorder {
    live: Mutex<LiveTables>,
    flushes: Mutex<usize>,
    compactions: Mutex<usize>,
    moves: Mutex<usize>,
    removals: Mutex<usize>,
    /// What the listener found wrong, checked on the test thread.
    failures: Mutex<Vec<String>>,
    /// How long each flush's announcement takes (a slow listener).
    flush_delay: Duration,
}

impl Recorder {
    fn fail(&self, msg: String) {
        self.failures.lock().push(msg);
    }

    /// Panics (on the test thread) with everything the listener found wrong.
    fn assert_no_failures(&self) {
        let f = self.failures.lock();
        assert!(
            f.is_empty(),
            "listener saw {} errors:\n{}",
            f.len(),
            f.join("\n")
        );
    }
}

impl EventListener for Recorder {
    fn wants_keys(&self) -> bool {
        true
    }
    fn on_table_created(&self, e: &TableCreated<'_>) {
        match e.reason {
            TableReason::Flush => {
                std::thread::sleep(self.flush_delay);
                *self.flushes.lock() += 1
            }
            TableReason::Compaction => *self.compactions.lock() += 1,
        }
        if e.reason == TableReason::Flush && e.level != 0 {
            self.fail(format!(
                "flushed table {} created in L{}",
                e.file.id, e.level
            ));
        }
        if e.keys.is_empty() {
            self.fail(format!("table {} created with no keys", e.file.id));
        }
        if e.keys.windows(2).any(|w| w[0] >= w[1]) {
            self.fail(format!("table {}: keys not distinct and sorted", e.file.id));
        }
        let old = self
            .live
            .lock()
            .insert(e.file.id, (e.level, e.keys.to_vec()));
        if old.is_some() {
            self.fail(format!("table {} created twice", e.file.id));
        }
    }
    fn on_table_moved(&self, from: usize, to: usize, id: u64) {
        *self.moves.lock() += 1;
        if to != from + 1 {
            self.fail(format!("table {id} moved from L{from} to L{to}"));
        }
        let mut live = self.live.lock();
        match live.get_mut(&id) {
            None => self.fail(format!("moved table {id} was never created")),
            Some(entry) => {
                if entry.0 != from {
                    self.fail(format!(
                        "table {id} moved from L{from}, but it is in L{}",
                        entry.0
                    ));
                }
                entry.0 = to;
            }
        }
    }
    fn on_table_removed(&self, level: usize, id: u64) {
        *self.removals.lock() += 1;
        match self.live.lock().remove(&id) {
            None => self.fail(format!("removed table {id} was never created")),
            Some((l, _)) if l != level => {
                self.fail(format!(
                    "table {id} removed from L{level}, but it is in L{l}"
                ));
            }
            Some(_) => {}
        }
    }
}

#[test]
fn listener_sees_every_key_in_the_tables_of_the_current_version() {
    listener_sees_the_current_version(tiny_options(), Duration::ZERO);
}

/// A slow listener: `compact_range` right after `flush` must not move the
/// flushed table before its creation has been announced.
#[test]
fn slow_listener_hears_of_a_flushed_table_before_it_moves() {
    listener_sees_the_current_version(tiny_options(), Duration::from_millis(30));
}

/// The same with the stale picker, whose tracker runs with the state
/// mutex released between the flush's edit and its announcement.
#[test]
fn slow_listener_with_the_stale_picker() {
    listener_sees_the_current_version(tiny_with(STALE), Duration::from_millis(30));
}

fn listener_sees_the_current_version(opts: strata::Options, flush_delay: Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Arc::new(Recorder {
        flush_delay,
        ..Recorder::default()
    });
    let db = open(dir.path(), opts.listener(rec.clone()));
    let mut written = BTreeSet::new();
    for i in 0..3000u32 {
        let k = format!("key{:05}", (i * 37) % 1500).into_bytes();
        db.put(&k, [b'v'; 40]).expect("put");
        written.insert(k);
    }
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    rec.assert_no_failures();
    assert!(*rec.flushes.lock() > 0);
    assert!(*rec.compactions.lock() > 0);
    assert!(*rec.removals.lock() > 0);
    let live = rec.live.lock();
    let stats = db.stats();
    let files: usize = stats.levels.iter().map(|l| l.files).sum();
    assert_eq!(live.len(), files, "listener's live set matches the version");
    // Per level too.
    for (level, l) in stats.levels.iter().enumerate() {
        let n = live.values().filter(|(lv, _)| *lv == level).count();
        assert_eq!(n, l.files, "listener's tables in L{level}");
    }
    let mut seen = BTreeSet::new();
    for (_, keys) in live.values() {
        for k in keys {
            assert!(
                seen.insert(k.clone()),
                "a key is in two live tables after full compaction"
            );
        }
    }
    assert_eq!(seen, written);
}
