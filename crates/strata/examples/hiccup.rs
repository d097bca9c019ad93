//! The machine's own pauses: one thread reads the clock in a loop for
//! `SECS` seconds and lists every gap over 0.3 ms (a stretch in which it
//! did not run). Run it alone, then beside a writer, e.g.
//! `dd if=/dev/zero of=/tmp/big bs=1M count=1500 conv=fdatasync` (through
//! the page cache) or with `oflag=direct`, to see what background writes
//! cost a thread that does no I/O at all (`docs/BENCHMARKS.md`).
//!
//! `cargo run --release -p strata --example hiccup -- [SECS]`

use std::time::{Duration, Instant};

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let t0 = Instant::now();
    let mut last = t0;
    let mut gaps = Vec::new();
    while t0.elapsed() < Duration::from_secs(secs) {
        let now = Instant::now();
        if now - last > Duration::from_micros(300) {
            gaps.push((last - t0, now - last));
        }
        last = now;
    }
    let max = gaps.iter().map(|g| g.1).max().unwrap_or_default();
    println!(
        "{} gaps over 0.3 ms in {secs} s, the longest {:.2} ms",
        gaps.len(),
        max.as_secs_f64() * 1e3
    );
    for (at, d) in &gaps {
        println!(
            "  at {:.3} s: {:.2} ms",
            at.as_secs_f64(),
            d.as_secs_f64() * 1e3
        );
    }
}
