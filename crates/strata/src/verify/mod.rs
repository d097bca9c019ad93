//! Offline verification of a database directory, without opening the [`Db`]
//! (so it works on a database that fails to open).
//!
//! Checks that `CURRENT` names an existing manifest; decodes every manifest
//! record; opens every table and reads every entry with block checksums on,
//! checking that internal keys strictly increase and that the count matches
//! the table's properties; decodes every record of every WAL. Any damage,
//! even a torn WAL tail that recovery would tolerate, is reported.
//!
//! [`Db`]: crate::Db

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind, CURRENT};
use crate::io::FileSystem;
use crate::iter::InternalIterator;
use crate::options::{Options, WalRecovery};
use crate::table::{BlockCache, Table, TableIter};
use crate::types::{compare_internal, parse_internal_key};
use crate::version::{check_header, current_manifest, Edit};
use crate::wal;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use crate::report::{kind_name, FileReport, VerifyReport};

/// Verifies every file of the database in `dir` (see the module docs).
///
/// Returns `Err` only when the directory cannot be read or holds no
/// database (`Error::NotFound`); damage is reported in the [`VerifyReport`].
pub fn verify_dir(dir: &Path, opts: &Options) -> Result<VerifyReport> {
    let fs: &dyn FileSystem = &*opts.fs;
    if !fs.exists(dir) {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    if dir.join(crate::kvell::format::META_FILE).exists() {
        return crate::kvell::verify::verify_dir(dir);
    }
    let mut found: BTreeMap<(u8, u64), (FileKind, String)> = BTreeMap::new();
    let mut has_current = false;
    for name in fs.list_dir(dir)? {
        match filename::parse(&name) {
            Some((FileKind::Current, _)) => has_current = true,
            Some((kind @ FileKind::Manifest, n)) => {
                found.insert((0, n), (kind, name));
            }
            Some((kind @ FileKind::Table, n)) => {
                found.insert((1, n), (kind, name));
            }
            Some((kind @ FileKind::Wal, n)) => {
                found.insert((2, n), (kind, name));
            }
            _ => {}
        }
    }
    if !has_current && found.is_empty() {
        return Err(Error::NotFound(dir.to_path_buf()));
    }

    let mut report = VerifyReport::default();
    let size = |name: &str| fs.file_size(&dir.join(name)).unwrap_or(0);

    // CURRENT names an existing manifest.
    let live_manifest = match current_manifest(fs, dir) {
        Ok(path) => {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            let error = (!fs.exists(&path)).then(|| {
                Error::corruption(
                    dir.join(CURRENT),
                    0,
                    format!("CURRENT names {name}, which does not exist"),
                )
            });
            report.files.push(FileReport {
                kind: FileKind::Current,
                name: CURRENT.to_string(),
                entries: 1,
                bytes: size(CURRENT),
                error,
            });
            Some(name)
        }
        Err(e) => {
            report.files.push(FileReport {
                kind: FileKind::Current,
                name: CURRENT.to_string(),
                entries: 0,
                bytes: size(CURRENT),
                error: Some(e),
            });
            None
        }
    };

    // Tables the live manifest names, with their sizes.
    let mut live_tables: BTreeMap<u64, u64> = BTreeMap::new();
    let mut live_rows: BTreeMap<u64, u64> = BTreeMap::new();
    for (kind, name) in found.values() {
        let path = dir.join(name);
        let bytes = size(name);
        let live = live_manifest.as_deref() == Some(name.as_str());
        let result = match kind {
            FileKind::Manifest => verify_manifest(
                fs,
                &path,
                opts.num_levels,
                live.then_some((&mut live_tables, &mut live_rows)),
            ),
            FileKind::Table => {
                let id = filename::parse(name).map_or(0, |(_, n)| n);
                verify_table(fs, &path, id, live_tables.get(&id).copied())
            }
            _ => verify_wal(fs, &path),
        };
        let (entries, error) = match result {
            Ok(n) => (n, None),
            Err((n, e)) => (n, Some(e)),
        };
        report.files.push(FileReport {
            kind: *kind,
            name: name.clone(),
            entries,
            bytes,
            error,
        });
    }

    // Matrix rows (`l0=matrix`), in the fast directory: every one there is
    // decoded and checked (magic, version, checksum, cell bounds, order);
    // one the manifest names must be there with its size.
    let fast = opts.matrix.dir.as_deref().unwrap_or(dir);
    let mut row_files: Vec<(u64, String)> = if fs.exists(fast) {
        fs.list_dir(fast)?
            .into_iter()
            .filter_map(|n| Some((crate::filename::parse_row_name(&n)?, n)))
            .collect()
    } else {
        Vec::new()
    };
    row_files.sort();
    for (id, name) in &row_files {
        let path = fast.join(name);
        let bytes = fs.file_size(&path).unwrap_or(0);
        let checked =
            crate::l0::matrix::row::Row::open(fs, &path).and_then(|r| match live_rows.get(id) {
                Some(want) if *want != bytes => Err(Error::corruption(
                    &path,
                    0,
                    format!("row is {bytes} bytes, the manifest says {want}"),
                )),
                _ if r.id != *id => Err(Error::corruption(
                    &path,
                    16,
                    format!("row file names row {}", r.id),
                )),
                _ => Ok(u64::from(r.len())),
            });
        let (entries, error) = match checked {
            Ok(n) => (n, None),
            Err(e) => (0, Some(e)),
        };
        report.files.push(FileReport {
            kind: FileKind::Row,
            name: name.clone(),
            entries,
            bytes,
            error,
        });
    }
    for id in live_rows.keys() {
        if !row_files.iter().any(|(r, _)| r == id) {
            let name = crate::filename::row_name(*id);
            report.files.push(FileReport {
                kind: FileKind::Row,
                error: Some(Error::corruption(
                    fast.join(&name),
                    0,
                    format!(
                        "matrix row named by {} is missing",
                        live_manifest.as_deref().unwrap_or("the manifest")
                    ),
                )),
                name,
                entries: 0,
                bytes: 0,
            });
        }
    }

    // Tables the manifest names but the directory lacks.
    for id in live_tables.keys() {
        let path = filename::table_path(dir, *id);
        if !fs.exists(&path) {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            report.files.push(FileReport {
                kind: FileKind::Table,
                error: Some(Error::corruption(
                    &path,
                    0,
                    format!(
                        "table named by {} is missing",
                        live_manifest.as_deref().unwrap_or("the manifest")
                    ),
                )),
                name,
                entries: 0,
                bytes: 0,
            });
        }
    }
    Ok(report)
}

/// A check's outcome: the count so far, and the error that stopped it.
type Checked = std::result::Result<u64, (u64, Error)>;

/// File id → size.
type Sizes = BTreeMap<u64, u64>;

/// Decodes every edit; fills `live` with the tables and the matrix rows
/// the manifest leaves in place (id → size) when given.
fn verify_manifest(
    fs: &dyn FileSystem,
    path: &Path,
    num_levels: usize,
    live: Option<(&mut Sizes, &mut Sizes)>,
) -> Checked {
    let mut n = 0u64;
    // id → (keyspace, level, size), and id → (keyspace, size).
    let mut tables: BTreeMap<u64, (u32, usize, u64)> = BTreeMap::new();
    let mut rows: BTreeMap<u64, (u32, u64)> = BTreeMap::new();
    let mut run = || -> Result<()> {
        let file = fs.open_sequential(path)?;
        let mut reader =
            wal::Reader::new(file, path.to_path_buf(), WalRecovery::AbsoluteConsistency);
        let header = reader
            .read_record()?
            .ok_or_else(|| Error::corruption(path, 0, "empty manifest"))?;
        check_header(&header).map_err(|e| e.in_file(path, 0))?;
        while let Some(rec) = reader.read_record()? {
            let at = reader.last_good_offset();
            let edit = Edit::decode(&rec).map_err(|e| e.in_file(path, at))?;
            // Each keyspace's part of the record (FORMAT §6, tag 18).
            for part in edit.parts() {
                let ks = part.family;
                if part.dropped {
                    tables.retain(|_, (k, _, _)| *k != ks);
                    rows.retain(|_, (k, _)| *k != ks);
                    continue;
                }
                for (level, id) in &part.deleted {
                    if tables.get(id).is_some_and(|(_, l, _)| l == level) {
                        tables.remove(id);
                    }
                }
                for (level, d) in &part.added {
                    if *level >= num_levels {
                        return Err(Error::corruption(
                            path,
                            at,
                            format!("level {level} beyond num_levels {num_levels}"),
                        ));
                    }
                    tables.insert(d.id, (ks, *level, d.size));
                }
                for d in &part.rows_added {
                    rows.insert(d.id, (ks, d.size));
                }
                for id in &part.rows_deleted {
                    rows.remove(id);
                }
            }
            n += 1;
        }
        Ok(())
    };
    let result = run();
    if let Some((live, live_rows)) = live {
        live.extend(tables.iter().map(|(id, (_, _, size))| (*id, *size)));
        live_rows.extend(rows.iter().map(|(id, (_, size))| (*id, *size)));
    }
    result.map(|()| n).map_err(|e| (n, e))
}

/// Reads every entry of a table with checksums on.
fn verify_table(fs: &dyn FileSystem, path: &Path, id: u64, expected_size: Option<u64>) -> Checked {
    let mut n = 0u64;
    let mut run = || -> Result<()> {
        let file = fs.open_random(path)?;
        if let Some(want) = expected_size {
            if file.len() != want {
                return Err(Error::corruption(
                    path,
                    file.len(),
                    format!("table is {} bytes, manifest says {want}", file.len()),
                ));
            }
        }
        let cache = Arc::new(BlockCache::new(0));
        let table = Arc::new(Table::open(file, path.to_path_buf(), id, cache, true)?);
        let expected_entries = table.properties().entries;
        let mut it = TableIter::new(table);
        let mut prev: Vec<u8> = Vec::new();
        it.seek_to_first();
        while it.valid() {
            let k = it.key();
            if parse_internal_key(k).is_none() {
                return Err(Error::corruption(
                    path,
                    0,
                    format!("entry {n}: malformed internal key"),
                ));
            }
            if n > 0 && compare_internal(&prev, k).is_ge() {
                return Err(Error::corruption(
                    path,
                    0,
                    format!("entry {n}: key not greater than the one before it"),
                ));
            }
            prev.clear();
            prev.extend_from_slice(k);
            n += 1;
            it.next();
        }
        it.status()?;
        it.table().verify_padding()?;
        if n != expected_entries {
            return Err(Error::corruption(
                path,
                0,
                format!("properties say {expected_entries} entries, found {n}"),
            ));
        }
        Ok(())
    };
    run().map(|()| n).map_err(|e| (n, e))
}

/// Decodes every write batch of a WAL.
fn verify_wal(fs: &dyn FileSystem, path: &Path) -> Checked {
    let mut n = 0u64;
    let mut run = || -> Result<()> {
        let file = fs.open_sequential(path)?;
        let mut reader =
            wal::Reader::new(file, path.to_path_buf(), WalRecovery::AbsoluteConsistency)
                .zero_filled_end();
        while let Some(rec) = reader.read_record()? {
            let at = reader.last_good_offset();
            let batch = WriteBatch::decode_format(&rec, reader.format_version())
                .map_err(|e| e.in_file(path, at))?;
            for entry in batch.iter() {
                entry.map_err(|e| e.in_file(path, at))?;
            }
            n += 1;
        }
        Ok(())
    };
    run().map(|()| n).map_err(|e| (n, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Db;

    fn small_db(dir: &Path) {
        let opts = Options::default()
            .write_buffer_size(64 * 1024)
            .block_size(512);
        let db = Db::open(dir, opts).expect("open");
        for i in 0..5000u32 {
            db.put(
                format!("key{i:08}"),
                format!("value-{i}-{}", "x".repeat(40)),
            )
            .expect("put");
        }
        db.flush().expect("flush");
        db.put(b"in-the-wal", b"1").expect("put");
        drop(db);
    }

    fn tables(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut t: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "table"))
            .collect();
        t.sort();
        t
    }

    #[test]
    fn clean_db_verifies_ok() {
        let dir = tempfile::tempdir().expect("tempdir");
        small_db(dir.path());
        let r = verify_dir(dir.path(), &Options::default()).expect("verify");
        assert!(r.is_ok(), "{r}");
        let entries: u64 = r
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Table)
            .map(|f| f.entries)
            .sum();
        // The last put stays in the WAL: close does not flush by default.
        assert_eq!(entries, 5000);
        assert!(r.files.iter().any(|f| f.kind == FileKind::Wal));
        assert!(r.files.iter().any(|f| f.kind == FileKind::Manifest));
        assert!(r.files.iter().any(|f| f.kind == FileKind::Current));
        assert!(r.to_string().contains("all ok"));
    }

    #[test]
    fn flipped_byte_in_a_table_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        small_db(dir.path());
        let t = tables(dir.path());
        let victim = t.first().expect("a table");
        let mut bytes = std::fs::read(victim).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        std::fs::write(victim, &bytes).expect("write");

        let r = verify_dir(dir.path(), &Options::default()).expect("verify");
        assert!(!r.is_ok());
        let bad: Vec<_> = r.damaged().collect();
        assert_eq!(bad.len(), 1, "{r}");
        let name = victim.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(bad[0].name, name);
        match &bad[0].error {
            Some(Error::Corruption { file, .. }) => assert_eq!(file, victim),
            other => panic!("expected corruption, got {other:?}"),
        }
        assert!(r.to_string().contains("1 damaged"));
    }

    #[test]
    fn torn_wal_and_missing_current_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        small_db(dir.path());
        let wal = std::fs::read_dir(dir.path())
            .expect("read_dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "wal"))
            .expect("a wal");
        let len = std::fs::metadata(&wal).expect("meta").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&wal)
            .expect("open wal");
        f.set_len(len - 3).expect("truncate");
        drop(f);
        let r = verify_dir(dir.path(), &Options::default()).expect("verify");
        let bad: Vec<_> = r.damaged().collect();
        assert_eq!(bad.len(), 1, "{r}");
        assert_eq!(bad[0].kind, FileKind::Wal);

        std::fs::remove_file(dir.path().join(CURRENT)).expect("rm CURRENT");
        let r = verify_dir(dir.path(), &Options::default()).expect("verify");
        assert!(r
            .damaged()
            .any(|f| f.kind == FileKind::Current && f.error.is_some()));
    }

    #[test]
    fn matrix_rows_are_verified_and_a_damaged_or_missing_one_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fast = dir.path().join("fast");
        let mut opts = Options::default().write_buffer_size(4096);
        opts.apply(&format!("l0=matrix,fast_dir={}", fast.display()))
            .expect("options");
        {
            let db = crate::Db::open(dir.path(), opts.clone()).expect("open");
            for i in 0..300 {
                db.put(format!("k{i:04}"), vec![b'v'; 40]).expect("put");
            }
            db.flush().expect("flush");
        }
        let report = verify_dir(dir.path(), &opts).expect("verify");
        let rows: Vec<&FileReport> = report
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Row)
            .collect();
        assert!(report.is_ok() && rows.len() >= 2, "{report}");
        let first = fast.join(&rows[0].name);
        let mut data = std::fs::read(&first).expect("read");
        data[40] ^= 1;
        std::fs::write(&first, data).expect("write");
        std::fs::remove_file(fast.join(&rows[1].name)).expect("rm");
        let report = verify_dir(dir.path(), &opts).expect("verify");
        let bad: Vec<String> = report.damaged().map(|f| f.name.clone()).collect();
        assert_eq!(
            bad,
            [rows[0].name.clone(), rows[1].name.clone()],
            "{report}"
        );
    }

    #[test]
    fn not_a_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            verify_dir(dir.path(), &Options::default()),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            verify_dir(&dir.path().join("nope"), &Options::default()),
            Err(Error::NotFound(_))
        ));
    }
}
