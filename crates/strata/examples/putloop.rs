//! Where slow puts come from: N random puts (16 B keys, 100 B values by
//! default, WAL on, sync off) on one thread, each put over a threshold
//! listed with its time into the run and what the engine counted during
//! the sampled window around it (pacing sleeps, stalls, slowdowns, spare
//! logs taken, flushes, compactions, arena chunk misses). A sampler thread
//! reads `Db::stats` every `SAMPLE_US` (default 1000) µs, so the window is
//! the put plus up to one sample period each side.
//!
//! `cargo run --release -p strata --example putloop -- [N] [DIR]`
//! with `VALUE=` (bytes), `SLOW_US=` (threshold, default 500), `OPTS=`
//! (`name=value,...` on top of `Options::default()`), `PASSES=` (the
//! second pass overwrites, as the bench's overwrite does), `SEQ=1` (keys
//! in ascending order, as the bench's fillseq).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use strata::{Db, Options, StatsSnapshot};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    k
}

/// CLOCK_MONOTONIC now, in seconds.
fn mono_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` the call fills.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The counters that can explain one slow put, as deltas.
fn causes(a: &StatsSnapshot, b: &StatsSnapshot) -> String {
    let mut out = Vec::new();
    let mut add = |name: &str, x: u64, y: u64| {
        if y > x {
            out.push(format!("{name}+{}", y - x));
        }
    };
    add("pace_us", a.pace_micros, b.pace_micros);
    add("stall_us", a.stall_micros, b.stall_micros);
    add("slowdown_us", a.slowdown_micros, b.slowdown_micros);
    add("spare_wal", a.wal_spares_used, b.wal_spares_used);
    add("flush", a.flush_count, b.flush_count);
    add("compaction", a.compaction_count, b.compaction_count);
    add("chunk_miss", a.arena_chunk_misses, b.arena_chunk_misses);
    add("groups", a.write_groups, b.write_groups);
    if out.is_empty() {
        "-".into()
    } else {
        out.join(" ")
    }
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
        .unwrap_or_else(|| "/tmp/strata-putloop".into());
    let value_size: usize = env("VALUE", 100);
    let slow = Duration::from_micros(env("SLOW_US", 500));
    let passes: u32 = env("PASSES", 1);
    let seq = env("SEQ", 0u32) == 1;
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = Options::default();
    if let Ok(extra) = std::env::var("OPTS") {
        opts.apply(&extra)?;
    }
    let db = std::sync::Arc::new(Db::open(&dir, opts)?);
    let period = Duration::from_micros(env("SAMPLE_US", 1000));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                samples.push((Instant::now(), db.stats()));
                std::thread::sleep(period);
            }
            samples.push((Instant::now(), db.stats()));
            samples
        })
    };
    let mut rng = SmallRng::seed_from_u64(1);
    let mut value = vec![0u8; value_size];
    let mut slow_puts = Vec::new();
    let mut hist = [0u64; 8]; // <1 µs·2^k ... buckets by powers of 4 from 1 µs
    let t0 = Instant::now();
    for pass in 0..passes {
        let t = Instant::now();
        for j in 0..n {
            let i = if seq { j } else { rng.gen_range(0..n) };
            rng.fill(&mut value[..]);
            let s = Instant::now();
            db.put(key(i), &value)?;
            let took = s.elapsed();
            let us = took.as_micros() as u64;
            let bucket = (64 - us.max(1).leading_zeros() as usize).div_ceil(2).min(7);
            hist[bucket] += 1;
            if took >= slow {
                slow_puts.push((s, took));
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "pass {pass}: {n} puts in {secs:.2}s = {:.0} ops/s",
            n as f64 / secs
        );
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let samples = sampler.join().map_err(|_| "sampler panicked")?;
    println!("latency buckets (µs ≤ 1,4,16,64,256,1024,4096,more): {hist:?}");
    println!("puts ≥ {} µs: {}", slow.as_micros(), slow_puts.len());
    for &(at, took) in &slow_puts {
        let before = samples.iter().rev().find(|(t, _)| *t <= at);
        let after = samples.iter().find(|(t, _)| *t >= at + took);
        let why = match (before, after) {
            (Some((_, a)), Some((_, b))) => causes(a, b),
            _ => "?".into(),
        };
        // The put's start on CLOCK_MONOTONIC (what `perf record -k
        // CLOCK_MONOTONIC` stamps its samples with), to find it in a trace.
        let mono = mono_now() - (Instant::now() - at).as_secs_f64();
        println!(
            "  at {:8.3} s  {:7} µs  {why}  (monotonic {mono:.6})",
            (at - t0).as_secs_f64(),
            took.as_micros()
        );
    }
    println!("{}", db.stats());
    Ok(())
}
