//! How an option's value reads and prints as text: one [`OptionValue`]
//! impl per field type of the options table.

use super::{
    Compression, EngineKind, ExecutorKind, KvellDurability, KvellIo, KvellOnDamage, L0Kind,
    PickerKind, WalRecovery,
};
use std::path::PathBuf;

/// A type an option can have: parsed from and printed to the text of
/// `name=value` (`show` prints what `parse` reads back).
pub trait OptionValue: Sized {
    /// The value `v` names; `Err` says what `v` should be.
    fn parse(v: &str) -> std::result::Result<Self, String>;
    /// The value as `parse` reads it.
    fn show(&self) -> String;
}

/// Parses `123`, `64K`, `64KiB`, `4M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let mul = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mul)
}

const SIZE: &str = "a size (123, 64K, 4M, 1G)";

impl OptionValue for bool {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        match v {
            "true" | "on" | "1" => Ok(true),
            "false" | "off" | "0" => Ok(false),
            _ => Err("a flag (true|on|1|false|off|0)".into()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for u64 {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        parse_size(v).ok_or_else(|| SIZE.into())
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for usize {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        parse_size(v)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| SIZE.into())
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// Plain integers (no size suffixes): `max_open_files`, `background_nice`.
impl OptionValue for i32 {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        v.parse().map_err(|_| "an integer".into())
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// A size, or a negative integer (the budgets' `-1`).
impl OptionValue for i64 {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        let n = match v.strip_prefix('-') {
            Some(_) => v.parse().ok(),
            None => parse_size(v).and_then(|n| i64::try_from(n).ok()),
        };
        n.ok_or_else(|| format!("-1 or {SIZE}"))
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for f64 {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        v.parse().map_err(|_| "a number".into())
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// A directory; empty: none.
impl OptionValue for Option<PathBuf> {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        Ok((!v.is_empty()).then(|| PathBuf::from(v)))
    }
    fn show(&self) -> String {
        self.as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

/// `none`, or a built-in merge operator's name.
impl OptionValue for crate::merge::MergeOp {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        match v {
            "none" | "" => Ok(Self::none()),
            _ => crate::merge::builtin(v)
                .map(Self::from)
                .ok_or_else(|| "none|u64add|max|append|append:SEP".into()),
        }
    }
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

impl OptionValue for ExecutorKind {
    fn parse(v: &str) -> std::result::Result<Self, String> {
        ExecutorKind::parse(v).ok_or_else(|| {
            "linear|subtasks:N|pipelined|copro[:N]|copro+[:N]|offload:ADDR (N in 1..=64)".into()
        })
    }
    fn show(&self) -> String {
        self.name()
    }
}

/// `OptionValue` for an enum whose every variant has a `name`.
macro_rules! named {
    ($($t:ident: [$($v:ident),+];)*) => {$(
        impl OptionValue for $t {
            fn parse(v: &str) -> std::result::Result<Self, String> {
                [$($t::$v),+]
                    .into_iter()
                    .find(|k| k.name() == v)
                    .ok_or_else(|| [$($t::$v.name()),+].join("|"))
            }
            fn show(&self) -> String {
                self.name().to_string()
            }
        }
    )*};
}

named! {
    Compression: [None, Lz4, Zstd];
    WalRecovery: [TolerateCorruptedTail, AbsoluteConsistency, PointInTime, SkipAnyCorrupted];
    L0Kind: [Tables, Matrix];
    EngineKind: [Lsm, Kvell];
    KvellDurability: [Written, Synced];
    KvellIo: [Auto, Uring, Pread];
    KvellOnDamage: [Keep, Refuse, Reclaim];
    PickerKind: [Leveled, Stale];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type prints what it parses back, and refuses what is not one
    /// of its values.
    #[test]
    fn values_round_trip_and_refuse_others() {
        fn round<T: OptionValue + PartialEq + std::fmt::Debug>(v: T) {
            assert_eq!(T::parse(&v.show()), Ok(v));
        }
        round(true);
        round(64u64 << 20);
        round(4096usize);
        round(-1i32);
        round(-1i64);
        round(1i64 << 30);
        round(0.7f64);
        round(Some(PathBuf::from("/dev/shm/x")));
        round(None::<PathBuf>);
        round(ExecutorKind::CoproPlus(3));
        round(WalRecovery::PointInTime);
        round(Compression::Zstd);
        round(KvellOnDamage::Reclaim);
        assert_eq!(u64::parse("4M"), Ok(4 << 20));
        assert_eq!(i64::parse("1G"), Ok(1 << 30));
        assert!(i32::parse("4K").is_err());
        assert!(bool::parse("yes").is_err());
        assert!(Compression::parse("brotli").is_err_and(|e| e == "none|lz4|zstd"));
        assert!(usize::parse("-1").is_err());
    }
}
