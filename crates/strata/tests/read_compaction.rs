//! Read-triggered compaction: point lookups that keep searching a table in
//! vain make the picker merge it down (LevelDB's seek compaction), reads
//! stay correct throughout, and `read_compaction=false` turns it off.

mod common;

use strata::{Db, Options};

const KEYS: usize = 300;

fn key(i: usize) -> String {
    format!("key{i:05}")
}

fn value(i: usize) -> String {
    format!("value-{i:05}-{}", "y".repeat(40))
}

/// Three overlapping L0 tables (each holds every third key across the
/// whole range), below the L0 compaction trigger of 4.
fn three_overlapping_tables(opts: Options) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = opts
        .write_buffer_size(1 << 20)
        .level0_file_num_compaction_trigger(4)
        .block_size(256);
    let db = Db::open(dir.path(), opts).expect("open");
    for part in 0..3 {
        for i in (part..KEYS).step_by(3) {
            db.put(key(i), value(i)).expect("put");
        }
        db.flush().expect("flush");
    }
    db.wait_for_compactions().expect("settle");
    assert_eq!(db.stats().levels[0].files, 3, "three L0 tables");
    (dir, db)
}

/// Reads the keys of the oldest table (each lookup searches the two newer
/// tables in vain first) `rounds` times, checking every value.
fn read_oldest(db: &Db, rounds: usize) {
    for _ in 0..rounds {
        for i in (0..KEYS).step_by(3) {
            assert_eq!(
                db.get(key(i)).expect("get").as_deref(),
                Some(value(i).as_bytes()),
                "key {i}"
            );
        }
    }
}

#[test]
fn lookups_that_keep_missing_compact_level_0() {
    // No bloom filter: each lookup reads the two newer tables in vain.
    let (_dir, db) = three_overlapping_tables(Options::default().bloom_bits_per_key(0));
    // 100 keys a round, each charging the newest table: its allowance of
    // 100 misses runs out in the second round.
    read_oldest(&db, 3);
    db.wait_for_compactions().expect("settle");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 0, "L0 merged down: {s}");
    assert!(s.levels[1].files > 0, "{s}");
    assert!(s.read_compactions >= 1, "{s}");
    // Every key still reads, from the merged tables.
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(value(i).as_bytes()),
            "key {i}"
        );
    }
}

#[test]
fn misses_the_bloom_filter_rules_out_cost_nothing() {
    // With filters the newer tables are ruled out without a block read.
    let (_dir, db) = three_overlapping_tables(Options::default());
    read_oldest(&db, 5);
    db.wait_for_compactions().expect("settle");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 3, "{s}");
    assert_eq!(s.read_compactions, 0, "{s}");
}

#[test]
fn read_compaction_can_be_turned_off() {
    let (_dir, db) = three_overlapping_tables(
        Options::default()
            .bloom_bits_per_key(0)
            .read_compaction(false),
    );
    read_oldest(&db, 5);
    db.wait_for_compactions().expect("settle");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 3, "{s}");
    assert_eq!(s.read_compactions, 0, "{s}");
}

#[test]
fn lookups_served_by_the_first_table_charge_nothing() {
    let (_dir, db) = three_overlapping_tables(Options::default().bloom_bits_per_key(0));
    // Keys of the newest table: found in the first table searched.
    for _ in 0..5 {
        for i in (2..KEYS).step_by(3) {
            assert!(db.get(key(i)).expect("get").is_some(), "key {i}");
        }
    }
    db.wait_for_compactions().expect("settle");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 3, "{s}");
    assert_eq!(s.read_compactions, 0, "{s}");
}

#[test]
fn iterator_seeks_are_sampled() {
    let (_dir, db) = three_overlapping_tables(Options::default());
    // Each seek lands where all three tables overlap; one in 8 charges the
    // newest, whose allowance of 100 runs out within 1 200 seeks.
    for round in 0..8 {
        for i in 0..KEYS / 2 {
            let mut it = db.iter(&strata::ReadOptions::default()).expect("iter");
            it.seek(key(i).as_bytes());
            assert!(it.valid(), "round {round} key {i}");
            assert_eq!(it.key(), key(i).as_bytes());
            assert_eq!(it.value(), value(i).as_bytes());
        }
    }
    db.wait_for_compactions().expect("settle");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 0, "{s}");
    assert!(s.read_compactions >= 1, "{s}");
    let all: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan items");
    assert_eq!(all.len(), KEYS);
}
