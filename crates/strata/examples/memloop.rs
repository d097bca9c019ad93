//! Times memtable inserts: random 16-byte keys with 100-byte values into
//! one memtable of `total` bytes made of shards of `shard` bytes (one
//! skiplist when `shard >= total`).
//!
//! `cargo run --release -p strata --example memloop -- 67108864 8388608 [VALUE_LEN]`
//! (value length default 100; 0 is a tombstone's size)
use std::time::Instant;
use strata::memtable::{MemTable, MAX_SHARDS};
use strata::types::ValueKind;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64 << 20);
    let shard: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8 << 20);
    let m = if shard >= total {
        MemTable::new(1, total, 1)
    } else {
        MemTable::new(1, shard.max(total.div_ceil(MAX_SHARDS)), MAX_SHARDS)
    };
    let mut rng = 0x1234_5678_9abc_def0u64;
    let value_len: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let value = vec![7u8; value_len];
    let mut key = [0u8; 16];
    let mut n = 0u64;
    let t = Instant::now();
    while m.approximate_size() < total {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        key[..8].copy_from_slice(&rng.to_be_bytes());
        key[8..].copy_from_slice(&n.to_be_bytes());
        n += 1;
        m.add(n, ValueKind::Value, &key, &value);
    }
    let el = t.elapsed();
    println!(
        "{n} inserts, {:.0} ns/insert, {} shard(s)",
        el.as_nanos() as f64 / n as f64,
        m.shard_count()
    );
}
