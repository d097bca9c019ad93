//! Quick single-thread measurement: N random puts then N random gets
//! (16 B keys, 100 B values, WAL on, sync off). The benchmark issue replaces
//! this with `strata bench`.
//!
//! `cargo run --release -p strata --example perf -- [N] [DIR] [VALUE_SIZE]`

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;
use strata::{Db, Options};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    k
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "/tmp/strata-perf".into());
    let value_size: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, Options::default())?;
    let mut rng = SmallRng::seed_from_u64(1);
    let mut value = vec![0u8; value_size];
    let t = Instant::now();
    for _ in 0..n {
        let i = rng.gen_range(0..n);
        rng.fill(&mut value[..]);
        db.put(key(i), &value)?;
    }
    let put_secs = t.elapsed().as_secs_f64();
    println!(
        "fillrandom: {n} puts in {put_secs:.2}s = {:.0} ops/s",
        n as f64 / put_secs
    );
    let t = Instant::now();
    let mut found = 0u64;
    for _ in 0..n {
        let i = rng.gen_range(0..n);
        if db.get(key(i))?.is_some() {
            found += 1;
        }
    }
    let get_secs = t.elapsed().as_secs_f64();
    println!(
        "readrandom: {n} gets in {get_secs:.2}s = {:.0} ops/s ({found} found)",
        n as f64 / get_secs
    );
    db.flush()?;
    let s = db.stats();
    println!("{s}");
    println!(
        "write amplification (after flush): {:.3}",
        s.write_amplification()
    );
    println!("peak RSS: {} MiB", peak_rss_kib() / 1024);
    Ok(())
}
