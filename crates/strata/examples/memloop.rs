//! Times memtable inserts: one memtable of `total` bytes vs. memtables of `shard` bytes.
use std::time::Instant;
use strata::memtable::MemTable;
use strata::types::ValueKind;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64 << 20);
    let shard: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64 << 20);
    let mut rng = 0x1234_5678_9abc_def0u64;
    let value = [7u8; 100];
    let mut mems = vec![MemTable::new(1, usize::MAX)];
    let mut n = 0u64;
    let t = Instant::now();
    let mut bytes = 0usize;
    while bytes < total {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let key = format!("{:016x}", rng % 1_000_000_000);
        let m = mems.last().unwrap();
        m.add(n + 1, ValueKind::Value, key.as_bytes(), &value);
        n += 1;
        if m.approximate_size() >= shard {
            bytes += m.approximate_size();
            mems.push(MemTable::new(1, usize::MAX));
        }
    }
    let el = t.elapsed();
    println!(
        "{} inserts, {:.0} ns/insert, {} tables",
        n,
        el.as_nanos() as f64 / n as f64,
        mems.len()
    );
}
