//! The background CPU budget (`Options::background_cpus`): with one slot
//! and two background threads, a flush that arrives while a compaction
//! runs takes the slot from it (the compaction pauses at a give-way point
//! and resumes after the flush), and nothing written is lost or changed.

mod common;

use std::collections::BTreeMap;
use strata::{Db, Options};

fn opts(cpus: usize) -> Options {
    Options::default()
        .write_buffer_size(64 * 1024)
        .target_file_size(256 * 1024)
        .max_bytes_for_level_base(512 * 1024)
        .level0_file_num_compaction_trigger(2)
        .background_threads(2)
        .background_cpus(cpus)
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let all = common::all(db);
    assert_eq!(all.len(), model.len(), "entries");
    for ((k, v), (mk, mv)) in all.iter().zip(model) {
        assert_eq!((k, v), (mk, mv));
    }
}

/// Writes until a compaction has given way to a flush at least once
/// (compactions merge tens of thousands of entries while 64 KiB memtables
/// fill in a few milliseconds), then checks every entry, before and
/// after a reopen.
#[test]
fn a_flush_pauses_a_running_compaction_and_nothing_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = BTreeMap::new();
    let mut gave_way = 0;
    {
        let db = common::open(dir.path(), opts(1));
        let mut i: u64 = 0;
        // Overwrites over a key space of 40k: every L0 table overlaps
        // most of L1, so each compaction merges much of the tree.
        while i < 2_000_000 {
            for _ in 0..5_000 {
                let k = format!("key{:08}", (i * 7919) % 40_000).into_bytes();
                let v = format!("value-{i:010}-{}", "x".repeat(60)).into_bytes();
                db.put(&k, &v).expect("put");
                model.insert(k, v);
                i += 1;
            }
            gave_way = db.stats().compaction_give_ways;
            if gave_way > 0 {
                break;
            }
        }
        assert!(
            gave_way > 0,
            "no compaction gave way to a flush in {i} puts: {:?}",
            db.stats()
        );
        db.wait_for_compactions().expect("wait");
        check(&db, &model);
        db.close().expect("close");
    }
    let db = common::open(dir.path(), opts(1));
    check(&db, &model);
}

/// Zero means one less than the cores (at least one); any count opens
/// and works, and the count shows in the options' text.
#[test]
fn background_cpus_is_an_option_like_the_others() {
    let mut o = Options::default();
    o.apply("background_cpus=3").expect("apply");
    assert_eq!(o.background_cpus, 3);
    assert!(o.to_string().contains("background_cpus=3"));
    let dir = tempfile::tempdir().expect("tempdir");
    let db = common::open(dir.path(), opts(0));
    db.put(b"k", b"v").expect("put");
    db.flush().expect("flush");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}
