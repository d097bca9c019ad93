//! The version set: the current version, the file-number and sequence
//! counters, and the MANIFEST that makes them durable.
//!
//! The MANIFEST is a log (same framing as the WAL) whose first record is a
//! header (`magic u64 LE, format version u32 LE`) and whose other records are
//! [`Edit`]s. The first edit of a manifest is a snapshot of the whole version.
//! `CURRENT` names the live manifest and is replaced atomically.
//!
//! Thread-safety: owned by the database's state mutex; readers only see the
//! `Arc<Version>`s it hands out.

use super::{Edit, FileDesc, FileMeta, TableCache, Version};
use crate::error::{corrupt, Error, Result};
use crate::filename::{self, manifest_name, wal_path, CURRENT};
use crate::io::{self, FileSystem};
use crate::options::{Options, WalRecovery};
use crate::table::BlockCache;
use crate::types::{self, SeqNo};
use crate::wal;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MANIFEST_MAGIC: u64 = 0x5354_5241_5441_4d46; // "STRATAMF"
const MANIFEST_VERSION: u32 = 1;
/// Start a new manifest when the current one grows past this.
const MANIFEST_ROLL_BYTES: u64 = 64 << 20;

pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    tables: Arc<TableCache>,
    num_levels: usize,
    current: Arc<Version>,
    manifest: Option<wal::Writer>,
    manifest_number: u64,
    next_file_number: u64,
    /// Last sequence number made durable in the manifest (the WAL has newer ones).
    pub last_sequence: SeqNo,
    /// WALs numbered below this are fully flushed.
    pub log_number: u64,
    /// Bytes written to manifests since open (for write amplification).
    pub manifest_bytes_written: u64,
    compact_pointers: Vec<Vec<u8>>,
}

impl VersionSet {
    /// An empty set for a directory without a database; `recover` or
    /// `create` fills it.
    pub fn new(dir: &Path, opts: &Options, cache: Arc<BlockCache>) -> Self {
        VersionSet {
            dir: dir.to_path_buf(),
            fs: opts.fs.clone(),
            tables: Arc::new(TableCache::new(dir, opts, cache)),
            num_levels: opts.num_levels,
            current: Arc::new(Version::new(opts.num_levels)),
            manifest: None,
            manifest_number: 0,
            next_file_number: 2,
            last_sequence: 0,
            log_number: 0,
            manifest_bytes_written: 0,
            compact_pointers: vec![Vec::new(); opts.num_levels],
        }
    }

    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Makes sure `n` is never handed out: every number found on disk is
    /// marked used before the first new one is taken (a WAL number taken at
    /// a memtable switch is not in the manifest).
    pub fn mark_file_number_used(&mut self, n: u64) {
        self.next_file_number = self.next_file_number.max(n.saturating_add(1));
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    pub fn compact_pointer(&self, level: usize) -> &[u8] {
        self.compact_pointers.get(level).map_or(&[], Vec::as_slice)
    }

    /// Loads the manifest named by CURRENT and rebuilds the current version.
    pub fn recover(&mut self) -> Result<()> {
        let manifest_path = current_manifest(&*self.fs, &self.dir)?;
        let file = self.fs.open_sequential(&manifest_path)?;
        let mut reader = wal::Reader::new(
            file,
            manifest_path.clone(),
            WalRecovery::TolerateCorruptedTail,
        );
        let header = reader
            .read_record()?
            .ok_or_else(|| Error::corruption(&manifest_path, 0, "empty manifest"))?;
        check_header(&header).map_err(|e| e.in_file(&manifest_path, 0))?;
        let mut files: Vec<HashMap<u64, FileDesc>> = vec![HashMap::new(); self.num_levels];
        let mut next_file = None;
        let mut last_seq = None;
        let mut log_number = None;
        loop {
            let at = reader.last_good_offset();
            let Some(rec) = reader.read_record()? else {
                break;
            };
            let edit = Edit::decode(&rec).map_err(|e| e.in_file(&manifest_path, at))?;
            for (level, id) in &edit.deleted {
                if let Some(l) = files.get_mut(*level) {
                    l.remove(id);
                }
            }
            for (level, f) in &edit.added {
                let l = files.get_mut(*level).ok_or_else(|| {
                    Error::corruption(
                        &manifest_path,
                        at,
                        format!("level {level} beyond num_levels"),
                    )
                })?;
                l.insert(f.id, f.clone());
            }
            for (level, k) in &edit.compact_pointers {
                if let Some(p) = self.compact_pointers.get_mut(*level) {
                    *p = k.clone();
                }
            }
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            log_number = edit.log_number.or(log_number);
        }
        let missing =
            |what: &str| Error::corruption(&manifest_path, 0, format!("manifest lacks {what}"));
        self.next_file_number = next_file.ok_or_else(|| missing("next file number"))?;
        self.last_sequence = last_seq.ok_or_else(|| missing("last sequence"))?;
        self.log_number = log_number.ok_or_else(|| missing("log number"))?;
        if let Some((offset, reason)) = reader.dropped() {
            // A torn tail is a crash during an append whose sync never
            // finished, so nothing the dropped edits did has happened. A
            // flush edit is followed by deleting the logs before its log
            // number: if the log to replay from is gone, the dropped edits
            // had taken effect and dropping them would lose data.
            let wal = wal_path(&self.dir, self.log_number);
            if !self.fs.exists(&wal) {
                return Err(Error::corruption(
                    &manifest_path,
                    offset,
                    format!(
                        "damaged manifest tail ({reason}) while {} it leaves to replay is gone",
                        wal.display()
                    ),
                ));
            }
        }
        let mut v = Version::new(self.num_levels);
        for (level, descs) in files.into_iter().enumerate() {
            for (_, d) in descs {
                if d.id >= self.next_file_number {
                    return Err(Error::corruption(
                        &manifest_path,
                        0,
                        "file number beyond counter",
                    ));
                }
                let id = d.id;
                let meta = self.open_file(d).map_err(|e| {
                    if e.io_kind() == Some(std::io::ErrorKind::NotFound) {
                        Error::corruption(
                            &manifest_path,
                            0,
                            format!("table {id:06} named by the manifest is missing"),
                        )
                    } else {
                        e
                    }
                })?;
                if let Some(l) = v.levels.get_mut(level) {
                    l.push(meta);
                }
            }
        }
        sort_levels(&mut v);
        self.current = Arc::new(v);
        // A fresh manifest on every open keeps its size bounded and drops a torn tail.
        self.manifest = None;
        Ok(())
    }

    /// The live table file named by a descriptor, opened once through the
    /// table cache to check it.
    fn open_file(&self, d: FileDesc) -> Result<Arc<FileMeta>> {
        let meta = Arc::new(FileMeta::new(d, Arc::clone(&self.tables)));
        meta.table()?;
        Ok(meta)
    }

    /// The cache of open tables that every `FileMeta` of this set reads through.
    pub fn table_cache(&self) -> &Arc<TableCache> {
        &self.tables
    }

    /// Writes `edit` (completed with the counters) to the manifest, syncs it,
    /// and installs the resulting version. On error nothing is installed.
    pub fn log_and_apply(&mut self, edit: &mut Edit) -> Result<Arc<Version>> {
        if let Some(n) = edit.log_number {
            debug_assert!(n >= self.log_number);
        }
        let log_number = edit.log_number.unwrap_or(self.log_number);
        let last_sequence = edit
            .last_sequence
            .unwrap_or(self.last_sequence)
            .max(self.last_sequence);
        edit.log_number = Some(log_number);
        edit.last_sequence = Some(last_sequence);
        edit.next_file_number = Some(self.next_file_number);

        // Build the new version first: opening tables may fail.
        let mut v = (*self.current).clone();
        let mut removed = Vec::new();
        for (level, id) in &edit.deleted {
            if let Some(l) = v.levels.get_mut(*level) {
                if let Some(pos) = l.iter().position(|f| f.id() == *id) {
                    removed.push(l.remove(pos));
                }
            }
        }
        for (level, d) in &edit.added {
            let meta = match removed.iter().find(|f| f.id() == d.id) {
                Some(m) => m.clone(), // a trivial move keeps the open table
                None => self.open_file(d.clone())?,
            };
            v.levels
                .get_mut(*level)
                .ok_or_else(|| Error::InvalidArgument(format!("level {level} out of range")))?
                .push(meta);
        }
        sort_levels(&mut v);

        let new_manifest = match &self.manifest {
            None => true,
            Some(m) => m.len() > MANIFEST_ROLL_BYTES,
        };
        if new_manifest {
            // Number taken before the snapshot so that next_file_number covers it.
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let path = self.dir.join(manifest_name(number));
            self.write_new_manifest(&path, number, &v, edit)?;
        } else if let Some(m) = self.manifest.as_mut() {
            let before = m.len();
            m.add_record(&edit.encode())?;
            m.sync()?;
            self.manifest_bytes_written += m.len() - before;
        }
        for (level, k) in &edit.compact_pointers {
            if let Some(p) = self.compact_pointers.get_mut(*level) {
                *p = k.clone();
            }
        }
        for f in &removed {
            if !edit.added.iter().any(|(_, d)| d.id == f.id()) {
                f.mark_obsolete();
            }
        }
        self.log_number = log_number;
        self.last_sequence = last_sequence;
        self.current = Arc::new(v);
        Ok(self.current.clone())
    }

    fn write_new_manifest(
        &mut self,
        path: &Path,
        number: u64,
        v: &Version,
        edit: &Edit,
    ) -> Result<()> {
        let w = match self.prepare_manifest(path, number, v, edit) {
            Ok(w) => w,
            Err(e) => {
                let _ = self.fs.remove_file(path);
                return Err(e);
            }
        };
        // From here on the new manifest stays even on failure: once the
        // rename of CURRENT may have happened, CURRENT may name it (a failed
        // directory sync after the rename, say). If it is not named, the
        // next open removes it.
        io::write_atomic(
            &*self.fs,
            &self.dir,
            CURRENT,
            format!("{}\n", manifest_name(number)).as_bytes(),
        )?;
        let old = self.manifest_number;
        self.manifest_bytes_written += w.len();
        self.manifest = Some(w);
        self.manifest_number = number;
        if old != 0 {
            let _ = self.fs.remove_file(&self.dir.join(manifest_name(old)));
        }
        Ok(())
    }

    /// Writes and syncs a new manifest holding a snapshot of `v` and `edit`.
    fn prepare_manifest(
        &self,
        path: &Path,
        number: u64,
        v: &Version,
        edit: &Edit,
    ) -> Result<wal::Writer> {
        let mut w = wal::Writer::new(self.fs.create(path)?, number)?;
        let mut header = Vec::with_capacity(12);
        header.extend_from_slice(&MANIFEST_MAGIC.to_le_bytes());
        header.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
        w.add_record(&header)?;
        let mut snap = Edit {
            log_number: edit.log_number,
            next_file_number: edit.next_file_number,
            last_sequence: edit.last_sequence,
            ..Edit::default()
        };
        for (level, files) in v.levels.iter().enumerate() {
            for f in files {
                snap.added.push((level, f.desc.clone()));
            }
        }
        for (level, k) in self.compact_pointers.iter().enumerate() {
            if !k.is_empty() {
                snap.compact_pointers.push((level, k.clone()));
            }
        }
        snap.compact_pointers
            .extend(edit.compact_pointers.iter().cloned());
        w.add_record(&snap.encode())?;
        w.sync()?;
        Ok(w)
    }

    pub fn num_levels(&self) -> usize {
        self.num_levels
    }
}

/// The path of the manifest that `CURRENT` in `dir` names (the file itself
/// may be missing).
pub(crate) fn current_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<PathBuf> {
    let current_path = dir.join(CURRENT);
    let cur = io::read_all(fs, &current_path)?;
    let name = std::str::from_utf8(&cur)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| filename::parse(s).is_some_and(|(k, _)| k == filename::FileKind::Manifest))
        .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a manifest"))?;
    let path = dir.join(name);
    if !fs.exists(&path) {
        return Err(Error::corruption(
            &current_path,
            0,
            format!("CURRENT names {name}, which is missing"),
        ));
    }
    Ok(path)
}

/// Checks the manifest header record (magic and format version).
pub(crate) fn check_header(rec: &[u8]) -> Result<()> {
    let magic =
        crate::coding::get_u64(rec, 0).ok_or_else(|| corrupt(0, "short manifest header"))?;
    if magic != MANIFEST_MAGIC {
        return Err(corrupt(0, "not a strata manifest (bad magic)"));
    }
    let version =
        crate::coding::get_u32(rec, 8).ok_or_else(|| corrupt(8, "short manifest header"))?;
    if version != MANIFEST_VERSION {
        return Err(Error::NotSupported(format!(
            "manifest format version {version}"
        )));
    }
    Ok(())
}

/// L0 newest first; deeper levels by smallest key.
pub(crate) fn sort_levels(v: &mut Version) {
    for (level, files) in v.levels.iter_mut().enumerate() {
        if level == 0 {
            files.sort_by(|a, b| {
                b.desc
                    .max_seq
                    .cmp(&a.desc.max_seq)
                    .then(b.id().cmp(&a.id()))
            });
        } else {
            files.sort_by(|a, b| types::compare_internal(&a.desc.smallest, &b.desc.smallest));
        }
    }
}
