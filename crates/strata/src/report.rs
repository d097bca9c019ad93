//! What `strata verify` reports: one line per file, for every engine.

use crate::error::Error;
use crate::filename::FileKind;
use std::fmt;

/// What was found in one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    pub kind: FileKind,
    /// The file name within the directory.
    pub name: String,
    /// Table entries, or records (manifest edits, WAL batches) of a log.
    pub entries: u64,
    /// Size of the file.
    pub bytes: u64,
    /// The first problem found, if any (usually `Error::Corruption` naming
    /// the file and offset).
    pub error: Option<Error>,
}

impl FileReport {
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

/// The result of [`crate::verify::verify_dir`]: one entry per file checked.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub files: Vec<FileReport>,
}

impl VerifyReport {
    /// True when no file has an error.
    pub fn is_ok(&self) -> bool {
        self.files.iter().all(FileReport::is_ok)
    }

    /// The files with an error.
    pub fn damaged(&self) -> impl Iterator<Item = &FileReport> {
        self.files.iter().filter(|f| !f.is_ok())
    }
}

/// A short name of a file kind, as printed in reports.
pub fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Wal => "wal",
        FileKind::Table => "table",
        FileKind::Manifest => "manifest",
        FileKind::Current => "current",
        FileKind::Lock => "lock",
        FileKind::Temp => "temp",
        FileKind::Row => "row",
        FileKind::KvellMeta => "kvell",
        FileKind::Slab => "slab",
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<9} {:<18} {:>10} {:>14}  status",
            "kind", "file", "entries", "bytes"
        )?;
        for r in &self.files {
            let status = match &r.error {
                None => "ok".to_string(),
                Some(e) => format!("DAMAGED: {e}"),
            };
            writeln!(
                f,
                "{:<9} {:<18} {:>10} {:>14}  {status}",
                kind_name(r.kind),
                r.name,
                r.entries,
                r.bytes
            )?;
        }
        let bad = self.damaged().count();
        if bad == 0 {
            write!(f, "{} files checked: all ok", self.files.len())
        } else {
            write!(f, "{} files checked: {bad} damaged", self.files.len())
        }
    }
}
