//! Point-read loop for profiling the get path: loads N keys in random
//! order (16-character hex keys as `strata bench`, 100 B values), waits for
//! background work, then times passes of N random gets and prints ns/op.
//!
//! `cargo run --release -p strata --example getloop -- [N] [DIR] [PASSES] [OPTIONS]`
//! (OPTIONS as `Options::apply` takes them, e.g. `block_restart_interval=4`)

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
    let mut opts = Options::default();
    if let Some(spec) = args.get(4) {
        opts.apply(spec)?;
    }
    let db = Db::open(&dir, opts)?;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rng);
    let mut value = vec![0u8; 100];
    for &i in &order {
        rng.fill(&mut value[..]);
        db.put(key(i), &value)?;
    }
    // NOFLUSH=1: leave the last writes in the memtable, to time scans and
    // seeks over its shards (`strata bench` flushes after its loads).
    if std::env::var_os("NOFLUSH").is_none() {
        db.flush()?;
    }
    db.wait_for_compactions()?;
    let shape: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    println!("files per level: {shape:?}");
    let keys: Vec<Vec<u8>> = (0..n).map(|_| key(rng.gen_range(0..n))).collect();
    let mut best = f64::MAX;
    // SCAN=1: passes over every key in calls of 100 entries, each from a
    // fresh scan past the last key seen (as `strata bench`'s scan-resume).
    let scans = std::env::var_os("SCAN").is_some();
    // READSEQ=1: one cursor per pass over every key, the entries read in
    // place (as `strata bench`'s readseq).
    let readseq = std::env::var_os("READSEQ").is_some();
    // SEEK=1: 300,000 seeks to random keys, ten entries each read in place
    // (seekrandom).
    let seeks = std::env::var_os("SEEK").is_some();
    // COLD=1: drop the tables from the page cache before the first pass
    // (as `strata bench` does before its read runs).
    let mut cold_slices = std::env::var_os("COLD").is_some();
    if cold_slices {
        drop_cache(std::path::Path::new(&dir));
    }
    for _ in 0..passes {
        let faults = minor_faults();
        let cpu = thread_cpu();
        let t = Instant::now();
        let mut found = 0u64;
        if readseq {
            let mut it = db.iter(&strata::ReadOptions::default())?;
            it.seek_to_first();
            while it.valid() {
                found += 1;
                std::hint::black_box(it.key().len() + it.value().len());
                it.next();
            }
            it.status()?;
        } else if scans {
            // One cursor per call of 100 entries, positioned past the last
            // key seen, the entries read in place (as `strata bench`'s
            // scan-resume reads them).
            let mut last: Vec<u8> = Vec::new();
            let mut call = 0u64;
            loop {
                let c = Instant::now();
                let mut it = db.iter(&strata::ReadOptions::default())?;
                if call == 0 {
                    it.seek_to_first();
                } else {
                    it.seek(&last);
                    if it.valid() && it.key() == last.as_slice() {
                        it.next();
                    }
                }
                let mut got = 0;
                while got < 100 && it.valid() {
                    found += 1;
                    got += 1;
                    std::hint::black_box(it.value().len());
                    last.clear();
                    last.extend_from_slice(it.key());
                    it.next();
                }
                drop(it);
                if got == 0 {
                    break;
                }
                // Calls over a millisecond, with their position in the pass.
                let took = c.elapsed();
                if took.as_micros() >= 1000 {
                    print!("[call {call}: {:.1}ms] ", took.as_secs_f64() * 1e3);
                }
                call += 1;
            }
        } else if seeks {
            for (i, k) in keys.iter().enumerate().take(300_000) {
                let c = Instant::now();
                // The entries are read in place (`strata bench`'s
                // seekrandom reads them so).
                let range = strata::ScanRange::new(
                    std::ops::Bound::Included(k.as_slice()),
                    std::ops::Bound::Unbounded,
                )
                .limit(10);
                found += strata::KvStore::scan_visit(&db, range, &mut |k, v| {
                    std::hint::black_box(k.len() + v.len());
                })? as u64;
                let took = c.elapsed();
                if took.as_micros() >= 1000 {
                    print!(
                        "[seek {i} at {:.0}ms: {:.1}ms] ",
                        t.elapsed().as_secs_f64() * 1e3,
                        took.as_secs_f64() * 1e3
                    );
                }
            }
        } else {
            let mut slice = Instant::now();
            for (i, k) in keys.iter().enumerate() {
                found += u64::from(db.get(k)?.is_some());
                if cold_slices && (i + 1) % 20_000 == 0 && i < 200_000 {
                    print!("{:.1}ms ", slice.elapsed().as_secs_f64() * 1e3);
                    slice = Instant::now();
                }
            }
            cold_slices = false;
        }
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        let cpu_ns = (thread_cpu() - cpu).as_nanos() as f64 / n as f64;
        best = best.min(ns);
        let st = db.stats();
        println!(
            "pass: {ns:.0} ns/op, {cpu_ns:.0} on CPU ({found} found; {} tables warmed; {} compactions, {} read-triggered; {} minor faults)",
            st.warmed_tables,
            st.compaction_count,
            st.read_compactions,
            minor_faults() - faults
        );
    }
    println!("best: {best:.0} ns/op");
    // Table bytes mapped with 2 MiB pages (`Options::mmap_huge`).
    if let Ok(r) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for line in r.lines().filter(|l| l.starts_with("FilePmdMapped")) {
            println!("{line}");
        }
    }
    Ok(())
}

/// Minor page faults of this process so far (`getrusage`).
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt
    }
}

/// `fdatasync` + `posix_fadvise(DONTNEED)` on every file under `dir`.
fn drop_cache(dir: &std::path::Path) {
    use std::os::fd::AsRawFd;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(f) = std::fs::File::open(e.path()) {
            let _ = f.sync_data();
            // SAFETY: a valid open descriptor; advice only.
            unsafe {
                libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
