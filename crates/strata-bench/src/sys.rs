//! What the operating system tells about a run and the machine.

use crate::BenchError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Counters of `/proc/self/io`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ProcIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

/// Reads `/proc/self/io`; zeros where it is unavailable.
pub fn proc_io() -> ProcIo {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let mut io = ProcIo::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = v.trim().parse().unwrap_or(0);
        match k {
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            "cancelled_write_bytes" => io.cancelled_write_bytes = v,
            _ => {}
        }
    }
    io
}

/// Bytes the block device holding `dir` has written, as the device
/// counts them (`/sys/dev/block/MAJ:MIN/stat`: sectors written × 512),
/// after writing back the file system's dirty pages (`syncfs(2)`), so
/// that a difference of two readings holds what a span wrote, and only
/// what reached the device: pages written and then deleted before they
/// were written back (a log removed after its flush) never do. `None`
/// where no block device backs `dir` (tmpfs, an overlay) or sysfs is
/// missing. The count is the whole device's: the bench runs alone.
pub fn disk_written(dir: &Path) -> Option<u64> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::File::open(dir).ok()?;
    // SAFETY: a valid open descriptor; no memory passed.
    unsafe { libc::syncfs(f.as_raw_fd()) };
    let dev = f.metadata().ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// CPU seconds (user + system) and peak RSS (KiB) of this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu_secs: f64,
    /// The part of `cpu_secs` spent in the kernel.
    pub sys_secs: f64,
    pub max_rss_kib: u64,
    /// Page faults served without I/O (the page was in the cache).
    pub minor_faults: u64,
    /// Page faults that waited for a read.
    pub major_faults: u64,
}

pub fn usage() -> Usage {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage struct.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Usage::default();
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Usage {
        cpu_secs: t(ru.ru_utime) + t(ru.ru_stime),
        sys_secs: t(ru.ru_stime),
        max_rss_kib: u64::try_from(ru.ru_maxrss).unwrap_or(0),
        minor_faults: u64::try_from(ru.ru_minflt).unwrap_or(0),
        major_faults: u64::try_from(ru.ru_majflt).unwrap_or(0),
    }
}

/// CPU time the host took from this machine's virtual CPUs (`steal` in
/// `/proc/stat`), in seconds summed over the CPUs; `None` where it is not
/// reported.
pub fn steal_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    // cpu user nice system idle iowait irq softirq steal ...
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // SAFETY: sysconf reads a configuration value; it touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// Total size of the regular files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Writes back and drops the page cache of every file under `dir`
/// (`fdatasync` + `posix_fadvise(DONTNEED)`), so reads start cold.
/// Only these files are touched, not the whole machine's cache.
pub fn drop_cache(dir: &Path) {
    use std::os::fd::AsRawFd;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            drop_cache(&p);
            continue;
        }
        let Ok(f) = std::fs::File::open(&p) else {
            continue;
        };
        let _ = f.sync_data();
        // SAFETY: a valid open descriptor; advice only, no memory touched.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

/// Nanoseconds the last settle wait of this process went on after the
/// engine's background work was over (see [`note_settle_overshoot`]).
static SETTLE_OVERSHOOT_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Records that a settle wait confirmed an idle state for `d` after it was
/// first seen (a polled engine looks several times to be sure): the bench
/// does not charge that time to the engine.
pub fn note_settle_overshoot(d: std::time::Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    SETTLE_OVERSHOOT_NANOS.store(nanos, std::sync::atomic::Ordering::Relaxed);
}

/// Takes (and clears) the overshoot [`note_settle_overshoot`] recorded.
pub fn take_settle_overshoot() -> std::time::Duration {
    std::time::Duration::from_nanos(
        SETTLE_OVERSHOOT_NANOS.swap(0, std::sync::atomic::Ordering::Relaxed),
    )
}

/// The file in a complete image directory (see [`save_image`]).
pub const IMAGE_DONE: &str = "strata-bench-image-done";

/// Copies directory `from` (recursively) into `to`, which must not exist.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(to).map_err(|e| BenchError::Io(to.to_path_buf(), e))?;
    let rd = std::fs::read_dir(from).map_err(|e| BenchError::Io(from.to_path_buf(), e))?;
    for e in rd {
        let e = e.map_err(|e| BenchError::Io(from.to_path_buf(), e))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().map_err(|e| BenchError::Io(src.clone(), e))?;
        if ty.is_dir() {
            copy_dir(&src, &dst)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| BenchError::Io(src.clone(), e))?;
        }
    }
    Ok(())
}

/// Keeps a copy of the database in `dir`, which must be closed, as
/// `image` (written beside it, then renamed, then marked done), so later
/// runs start from the same loaded state without loading again.
pub fn save_image(dir: &Path, image: &Path) -> Result<(), BenchError> {
    let tmp = image.with_extension("partial");
    for stale in [&tmp, &image.to_path_buf()] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(|e| BenchError::Io(stale.clone(), e))?;
        }
    }
    copy_dir(dir, &tmp)?;
    drop_cache(&tmp);
    std::fs::rename(&tmp, image).map_err(|e| BenchError::Io(image.to_path_buf(), e))?;
    std::fs::write(image.join(IMAGE_DONE), b"").map_err(|e| BenchError::Io(image.to_path_buf(), e))
}

/// True when `image` is a complete image (see [`save_image`]).
pub fn image_ready(image: &Path) -> bool {
    image.join(IMAGE_DONE).exists()
}

/// Lays a run's directory out from `image`: a copy without the marker,
/// written back and evicted from the page cache, so that a capped child
/// reads it from the device as it would its own files.
pub fn restore_image(image: &Path, dir: &Path) -> Result<(), BenchError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| BenchError::Io(dir.to_path_buf(), e))?;
    }
    copy_dir(image, dir)?;
    let marker = dir.join(IMAGE_DONE);
    std::fs::remove_file(&marker).map_err(|e| BenchError::Io(marker, e))?;
    drop_cache(dir);
    Ok(())
}

/// Lets the device settle before a run: `sync(2)` writes back every dirty
/// page on the machine (the previous runs' data, their deleted
/// directories' discards) and waits for it, then a short pause. Without
/// it a run could start while the device still takes the previous
/// engine's writes, and run measurably slower for it (why:
/// docs/design/2026-11-29-code-comment-measurements.md §settle-device).
pub fn settle_device() {
    // SAFETY: a system call with no arguments and no memory passed.
    unsafe { libc::sync() };
    std::thread::sleep(std::time::Duration::from_millis(200));
}

/// The machine a report was made on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_bytes: u64,
    pub cpu_model: String,
    pub kernel: String,
    /// Filesystem type of the output directory (from /proc/mounts).
    pub filesystem: String,
    pub os: String,
    /// The read-ahead window of the device holding the output directory
    /// (`queue/read_ahead_kb`), KiB: how much a cold fault of a mapped file
    /// reads around its page.
    #[serde(default)]
    pub read_ahead_kb: Option<u64>,
}

/// `queue/read_ahead_kb` of the block device holding `path` (the queue of
/// the whole disk for a partition).
pub fn read_ahead_kb(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    [
        format!("{base}/queue/read_ahead_kb"),
        format!("{base}/../queue/read_ahead_kb"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
}

fn first_value(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':').or_else(|| l.split_once('=')))
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
}

/// The filesystem type holding `path`: the longest mount point prefix.
pub fn filesystem_of(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let mp = Path::new(f[1]);
        if path.starts_with(mp) {
            let len = f[1].len();
            if best.as_ref().is_none_or(|(l, _)| len >= *l) {
                best = Some((len, format!("{} ({} on {})", f[2], f[0], f[1])));
            }
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| "unknown".into())
}

pub fn machine(out_dir: &Path) -> Machine {
    let mem_kib = first_value("/proc/meminfo", "MemTotal")
        .and_then(|v| {
            v.split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes: mem_kib * 1024,
        cpu_model: first_value("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown".into()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        filesystem: filesystem_of(out_dir),
        os: first_value("/etc/os-release", "PRETTY_NAME").unwrap_or_else(|| "unknown".into()),
        read_ahead_kb: read_ahead_kb(out_dir),
    }
}

/// `YYYY-MM-DD HH:MM UTC` of now.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// `at` in seconds of `CLOCK_MONOTONIC`, the clock `Instant` reads on
/// Linux (and `perf record -k CLOCK_MONOTONIC` stamps events with).
pub fn monotonic_secs(at: std::time::Instant) -> f64 {
    let now = std::time::Instant::now();
    monotonic_now() - now.saturating_duration_since(at).as_secs_f64()
}

/// `CLOCK_MONOTONIC` now, in seconds.
fn monotonic_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_and_usage_read() {
        let u = usage();
        assert!(u.max_rss_kib > 0);
        let _ = proc_io();
        assert!(now_utc().ends_with("UTC"));
        let m = machine(Path::new("."));
        assert!(m.cores >= 1 && m.memory_bytes > 0);
    }

    /// Where the directory's device has a sysfs counter, a written file is
    /// counted once written back; where it has none, there is no figure.
    #[test]
    fn the_disk_counter_counts_written_back_bytes() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dev = std::fs::metadata(tmp.path()).expect("stat").dev();
        let counted = Path::new(&format!(
            "/sys/dev/block/{}:{}/stat",
            libc::major(dev),
            libc::minor(dev)
        ))
        .exists();
        let before = disk_written(tmp.path());
        std::fs::write(tmp.path().join("f"), vec![7u8; 1 << 20]).expect("write");
        let after = disk_written(tmp.path());
        match (before, after) {
            (Some(a), Some(b)) => {
                assert!(counted);
                assert!(b >= a + (1 << 20), "{a} -> {b}");
            }
            (None, None) => assert!(!counted, "a device counter exists but was not read"),
            other => panic!("one reading of two: {other:?}"),
        }
    }

    #[test]
    fn monotonic_secs_reads_the_monotonic_clock() {
        let before = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = std::time::Instant::now();
        let (a, b) = (monotonic_secs(before), monotonic_secs(after));
        assert!((0.019..0.5).contains(&(b - a)), "{a} {b}");
        let now = monotonic_now();
        assert!((now - b).abs() < 0.5, "{now} {b}");
    }
}
