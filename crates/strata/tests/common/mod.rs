//! Helpers shared by the integration tests.
#![allow(dead_code)]

use strata::{Db, Options};

/// Options that make every mechanism run on small data: tiny memtables,
/// tables and levels, so flushes and multi-level compactions happen often.
pub fn tiny_options() -> Options {
    Options::default()
        .write_buffer_size(8 * 1024)
        .target_file_size(8 * 1024)
        .max_bytes_for_level_base(32 * 1024)
        .max_bytes_for_level_multiplier(4)
        .level0_file_num_compaction_trigger(2)
        .block_size(256)
        .block_cache_size(64 * 1024)
}

pub fn open(dir: &std::path::Path, opts: Options) -> Db {
    match Db::open(dir, opts) {
        Ok(db) => db,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

/// All entries via a forward scan.
pub fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan entries")
}
