//! Flush and compaction output events: the seam stale-version tracking uses.

mod common;

use common::{open, tiny_options};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use strata::{EventListener, TableCreated, TableReason};

/// Live tables: id → (level, keys).
type LiveTables = BTreeMap<u64, (usize, Vec<Vec<u8>>)>;

#[derive(Default)]
struct Recorder {
    live: Mutex<LiveTables>,
    flushes: Mutex<usize>,
    compactions: Mutex<usize>,
}

impl EventListener for Recorder {
    fn wants_keys(&self) -> bool {
        true
    }
    fn on_table_created(&self, e: &TableCreated<'_>) {
        match e.reason {
            TableReason::Flush => *self.flushes.lock() += 1,
            TableReason::Compaction => *self.compactions.lock() += 1,
        }
        self.live
            .lock()
            .insert(e.file.id, (e.level, e.keys.to_vec()));
    }
    fn on_table_moved(&self, from: usize, to: usize, id: u64) {
        let mut live = self.live.lock();
        let entry = live.get_mut(&id).expect("moved table was never created");
        assert_eq!(entry.0, from, "table {id} moved from the wrong level");
        entry.0 = to;
    }
    fn on_table_removed(&self, _level: usize, id: u64) {
        assert!(
            self.live.lock().remove(&id).is_some(),
            "removed table {id} was never created"
        );
    }
}

#[test]
fn listener_sees_every_key_in_the_tables_of_the_current_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Arc::new(Recorder::default());
    let db = open(dir.path(), tiny_options().listener(rec.clone()));
    let mut written = BTreeSet::new();
    for i in 0..3000u32 {
        let k = format!("key{:05}", (i * 37) % 1500).into_bytes();
        db.put(&k, [b'v'; 40]).expect("put");
        written.insert(k);
    }
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    assert!(*rec.flushes.lock() > 0);
    assert!(*rec.compactions.lock() > 0);
    let live = rec.live.lock();
    let stats = db.stats();
    let files: usize = stats.levels.iter().map(|l| l.files).sum();
    assert_eq!(live.len(), files, "listener's live set matches the version");
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
