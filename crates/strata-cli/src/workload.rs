//! Keys, values, key orders, progress bars and rates shared by `load` and `demo`.

use crate::CliError;
use indicatif::{ProgressBar, ProgressStyle};
use rand::distributions::Alphanumeric;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::io::IsTerminal;
use std::time::Duration;
use strata::{KvStore, WriteOptions};

/// Order in which `load` writes its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    Random,
    Sequential,
}

/// What `load` writes: keys `0..count` as fixed-width zero-padded decimal
/// numbers of `key_size` bytes, each with a deterministic value of
/// `value_size` bytes (so a reader can check it).
#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    pub count: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub order: Order,
    pub seed: u64,
    pub sync: bool,
}

impl LoadSpec {
    /// Rejects key sizes too small to hold `count` distinct keys.
    pub fn validate(&self) -> Result<(), CliError> {
        let digits = self.count.saturating_sub(1).max(1).ilog10() as usize + 1;
        if self.key_size < digits {
            return Err(CliError::Usage(format!(
                "--key-size {} is too small for {} keys (need at least {digits})",
                self.key_size, self.count
            )));
        }
        Ok(())
    }
}

/// Key number `i`: zero-padded decimal, `width` bytes.
pub fn key_for(i: u64, width: usize) -> Vec<u8> {
    format!("{i:0width$}").into_bytes()
}

/// Parses a key written by [`key_for`].
pub fn key_number(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.parse().ok()
}

/// The value of key number `i`: `size` alphanumeric bytes determined by
/// `seed` and `i`.
pub fn value_for(seed: u64, i: u64, size: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..size).map(|_| rng.sample(Alphanumeric)).collect()
}

/// The key numbers `0..count` in `order` (a seeded shuffle for random).
pub fn key_order(count: u64, order: Order, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..count).collect();
    if order == Order::Random {
        v.shuffle(&mut SmallRng::seed_from_u64(seed));
    }
    v
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress(len: u64, label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{msg:>8} [{elapsed_precise}] [{bar:40.cyan/blue}] {pos}/{len} ({per_sec}, eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    pb.set_style(style);
    pb.set_message(label.to_string());
    pb
}

/// How often the progress bar is advanced.
pub const PROGRESS_STEP: u64 = 1024;

/// Writes the keys of `spec` with a progress bar; returns the elapsed time.
pub fn load(db: &dyn KvStore, spec: &LoadSpec) -> Result<Duration, CliError> {
    spec.validate()?;
    let order = key_order(spec.count, spec.order, spec.seed);
    let wopts = WriteOptions { sync: spec.sync };
    let pb = progress(spec.count, "load");
    let start = std::time::Instant::now();
    for (n, &i) in order.iter().enumerate() {
        let mut batch = strata::WriteBatch::new();
        batch.put(
            key_for(i, spec.key_size),
            value_for(spec.seed, i, spec.value_size),
        );
        db.write(batch, &wopts)?;
        if (n as u64 + 1).is_multiple_of(PROGRESS_STEP) {
            pb.inc(PROGRESS_STEP);
        }
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    Ok(elapsed)
}

/// `"<n> ops in <s> s (<rate> ops/s)"`.
pub fn rate(ops: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let per_sec = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
    format!("{ops} ops in {secs:.3} s ({per_sec:.0} ops/s)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_and_parse_back() {
        assert_eq!(key_for(42, 6), b"000042".to_vec());
        assert_eq!(key_number(&key_for(123_456, 16)), Some(123_456));
        assert_eq!(key_number(b"nope"), None);
    }

    #[test]
    fn values_are_deterministic() {
        assert_eq!(value_for(1, 7, 100), value_for(1, 7, 100));
        assert_ne!(value_for(1, 7, 100), value_for(1, 8, 100));
        assert_eq!(value_for(1, 7, 100).len(), 100);
    }

    #[test]
    fn random_order_is_a_permutation() {
        let mut o = key_order(1000, Order::Random, 9);
        assert_ne!(o, key_order(1000, Order::Sequential, 9));
        o.sort_unstable();
        assert_eq!(o, key_order(1000, Order::Sequential, 9));
    }

    #[test]
    fn key_size_must_fit_the_count() {
        let spec = |count, key_size| LoadSpec {
            count,
            key_size,
            value_size: 1,
            order: Order::Sequential,
            seed: 0,
            sync: false,
        };
        assert!(spec(1000, 3).validate().is_ok());
        assert!(spec(1001, 3).validate().is_err());
        assert!(spec(0, 1).validate().is_ok());
    }
}
