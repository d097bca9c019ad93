//! Names of the files in a database directory.
//!
//! `NNNNNN.wal` write-ahead logs, `NNNNNN.table` sorted tables,
//! `MANIFEST-NNNNNN` version-edit logs, `CURRENT` (name of the live
//! manifest), `LOCK`; `NNNNNN.row` matrix rows (in the fast directory). All numbers come from one counter, so they never clash.

use std::path::{Path, PathBuf};

/// The kind of a file in the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Wal,
    Table,
    Manifest,
    Current,
    Lock,
    Temp,
    /// A matrix container row (`l0=matrix`), in the fast directory.
    Row,
    /// KVell's `KVELL` file (engine=kvell).
    KvellMeta,
    /// A KVell slab file (`slab-WWW-CC.kv`).
    Slab,
}

pub fn wal_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.wal"))
}

pub fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.table"))
}

/// The file name of matrix row `n` (in the container's fast directory).
pub fn row_name(n: u64) -> String {
    format!("{n:06}.row")
}

/// The row number a file name denotes: digits, then `.row`.
pub fn parse_row_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".row")?;
    (!stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

pub fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

pub const CURRENT: &str = "CURRENT";
pub const LOCK: &str = "LOCK";

/// Classifies a directory entry; `None` for files that are not ours.
pub fn parse(name: &str) -> Option<(FileKind, u64)> {
    if name == CURRENT {
        return Some((FileKind::Current, 0));
    }
    if name == LOCK {
        return Some((FileKind::Lock, 0));
    }
    if name.ends_with(".tmp") {
        return Some((FileKind::Temp, 0));
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(|n| (FileKind::Manifest, n));
    }
    let (num, ext) = name.split_once('.')?;
    let n: u64 = num.parse().ok()?;
    match ext {
        "wal" => Some((FileKind::Wal, n)),
        "table" => Some((FileKind::Table, n)),
        "row" => parse_row_name(name).map(|n| (FileKind::Row, n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/x");
        let w = wal_path(d, 7);
        let t = table_path(d, 12);
        let name = |p: &PathBuf| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
        assert_eq!(
            parse(&name(&w).unwrap_or_default()),
            Some((FileKind::Wal, 7))
        );
        assert_eq!(
            parse(&name(&t).unwrap_or_default()),
            Some((FileKind::Table, 12))
        );
        assert_eq!(parse(&manifest_name(3)), Some((FileKind::Manifest, 3)));
        assert_eq!(parse("CURRENT"), Some((FileKind::Current, 0)));
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse("12.sst"), None);
    }
}
