//! Point-read loop for profiling the get path: loads N keys in random
//! order (16-character hex keys as `strata bench`, 100 B values), waits for
//! background work, then times passes of N random gets and prints ns/get.
//!
//! `cargo run --release -p strata --example getloop -- [N] [DIR] [PASSES]`

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::Instant;
use strata::{Db, Options};

fn key(i: u64) -> Vec<u8> {
    format!("{i:016x}").into_bytes()
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
        .unwrap_or_else(|| "/tmp/strata-getloop".into());
    let passes: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, Options::default())?;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rng);
    let mut value = vec![0u8; 100];
    for &i in &order {
        rng.fill(&mut value[..]);
        db.put(key(i), &value)?;
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let keys: Vec<Vec<u8>> = (0..n).map(|_| key(rng.gen_range(0..n))).collect();
    let mut best = f64::MAX;
    for _ in 0..passes {
        let t = Instant::now();
        let mut found = 0u64;
        for k in &keys {
            found += u64::from(db.get(k)?.is_some());
        }
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        best = best.min(ns);
        println!("pass: {ns:.0} ns/get ({found} found)");
    }
    println!("best: {best:.0} ns/get");
    Ok(())
}
