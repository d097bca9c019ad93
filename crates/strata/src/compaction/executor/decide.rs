//! CoPro+'s decision component (the CoPro paper's §3.2–3.3, eq. 1): per sub-task,
//! `f = α·cpu + β·mem + φ·value_share` against a threshold; at or above it
//! the sub-task runs linear, below it pipelined.
//!
//! - `cpu`: this process's CPU use since the previous decision, as a share
//!   of all cores (getrusage over wall time), in [0, 1];
//! - `mem`: the machine's memory in use, `1 − MemAvailable/MemTotal`;
//! - `value_share`: the share of the sub-task's input entries that are
//!   "large" (mean value size of their table above `large_value`), from
//!   the tables' properties.
//!
//! The paper's tested setting is α = β = 0, φ = 1, threshold 0.7 and
//! large = 32 KB on the host (16 KB on the device); strata re-derives
//! `large` for its host (`Options::copro.large_value`; why:
//! docs/design/2026-11-29-code-comment-measurements.md §copro-large-value).

use super::job::{meets, Job};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// See the module doc.
pub struct Decision {
    pub alpha: f64,
    pub beta: f64,
    pub phi: f64,
    pub threshold: f64,
    pub large_value: u64,
    last: Mutex<(Instant, Duration)>,
}

impl Decision {
    pub fn new(alpha: f64, beta: f64, phi: f64, threshold: f64, large_value: u64) -> Self {
        Decision {
            alpha,
            beta,
            phi,
            threshold,
            large_value,
            last: Mutex::new((Instant::now(), process_cpu())),
        }
    }

    /// True if the sub-task of `job` over `[lo, hi)` should be pipelined.
    pub fn pipelined(&self, job: &Job<'_>, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let mut f = self.phi * value_share(job, lo, hi, self.large_value);
        if self.alpha != 0.0 {
            f += self.alpha * self.cpu_load();
        }
        if self.beta != 0.0 {
            f += self.beta * memory_in_use();
        }
        f < self.threshold
    }

    fn cpu_load(&self) -> f64 {
        let mut last = self.last.lock();
        let (now, cpu) = (Instant::now(), process_cpu());
        let wall = now.duration_since(last.0).as_secs_f64();
        let used = cpu.saturating_sub(last.1).as_secs_f64();
        *last = (now, cpu);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        if wall <= 0.0 {
            return 0.0;
        }
        (used / (wall * cores)).clamp(0.0, 1.0)
    }
}

/// Share of the entries of `job`'s inputs meeting `[lo, hi)` whose table's
/// mean value is larger than `large` bytes.
pub fn value_share(job: &Job<'_>, lo: Option<&[u8]>, hi: Option<&[u8]>, large: u64) -> f64 {
    let (mut all, mut big) = (0u64, 0u64);
    for f in job.inputs.iter().chain(&job.next) {
        if !meets(f.smallest_user_key(), f.largest_user_key(), lo, hi) {
            continue;
        }
        let Ok(t) = f.table() else { continue };
        let p = t.properties();
        all += p.entries;
        if p.entries > 0 && p.raw_value_bytes / p.entries > large {
            big += p.entries;
        }
    }
    if all == 0 {
        0.0
    } else {
        big as f64 / all as f64
    }
}

/// CPU time this process has used (user + system).
fn process_cpu() -> Duration {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::new(t.tv_sec.max(0) as u64, 0) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Share of the machine's memory in use (0 if /proc/meminfo is unreadable).
fn memory_in_use() -> f64 {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return 0.0;
    };
    let field = |name: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    match (field("MemTotal:"), field("MemAvailable:")) {
        (Some(total), Some(avail)) if total > 0.0 => (1.0 - avail / total).clamp(0.0, 1.0),
        _ => 0.0,
    }
}
