//! The matrix container's own directory (`fast_dir`, on a faster
//! device): claimed by one database at open, and cleared of rows no
//! version names.

use super::Matrix;
use crate::error::{Error, Result};
use crate::filename::LOCK;
use crate::io::{FileLock, FileSystem};
use std::path::Path;

/// Makes `fast` (the matrix container's own directory) this database's:
/// creates it (durably), locks it, and records the database directory in
/// `fast/OWNER`. Refuses a directory another database owns (or holding
/// rows of unknown origin): opening would delete that database's rows as
/// orphans, or a flush would overwrite them.
pub(crate) fn claim(fs: &dyn FileSystem, dir: &Path, fast: &Path) -> Result<Box<dyn FileLock>> {
    if !fs.exists(fast) {
        fs.create_dir_all(fast)?;
        if let Some(parent) = fast.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    let lock = fs.lock(&fast.join(LOCK))?;
    let me = dir.display().to_string();
    let owner_path = fast.join("OWNER");
    if fs.exists(&owner_path) {
        let owner = crate::io::read_all(fs, &owner_path)?;
        let owner = String::from_utf8_lossy(&owner);
        if owner.trim_end() != me {
            return Err(Error::InvalidArgument(format!(
                "fast_dir {} belongs to the database in {} (rows are kept per database: \
                 give this one a directory of its own)",
                fast.display(),
                owner.trim_end()
            )));
        }
    } else {
        let strangers = fs
            .list_dir(fast)?
            .iter()
            .any(|n| super::row::parse_row_name(n).is_some());
        if strangers {
            return Err(Error::InvalidArgument(format!(
                "fast_dir {} holds matrix rows of an unknown database",
                fast.display()
            )));
        }
        crate::io::write_atomic(fs, fast, "OWNER", format!("{me}\n").as_bytes())?;
    }
    Ok(lock)
}

/// Removes the rows in `fast_dir` that no container of `live` names (a flush or
/// recovery that failed before its edit, or a row deleted while a reader
/// held it).
pub(crate) fn remove_unnamed_rows(
    fs: &dyn FileSystem,
    fast_dir: &Path,
    live: &[&Matrix],
) -> Result<()> {
    let rows: std::collections::HashSet<u64> = live
        .iter()
        .flat_map(|m| m.rows.iter().map(|r| r.meta.id()))
        .collect();
    if fs.exists(fast_dir) {
        for name in fs.list_dir(fast_dir)? {
            if let Some(n) = super::row::parse_row_name(&name) {
                if !rows.contains(&n) {
                    fs.remove_file(&fast_dir.join(&name))?;
                }
            }
        }
    }
    Ok(())
}
