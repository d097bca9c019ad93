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
use crate::rangedel::{RangeDels, RangeTombstone};
use crate::table::BlockCache;
use crate::types::SeqNo;
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
    /// Where the flushed history ends: at least every sequence a table
    /// holds; the logs from `log_number` on continue from the next one
    /// (see `db/flush.rs`, and recovery's continuity check).
    pub last_sequence: SeqNo,
    /// WALs numbered below this are fully flushed.
    pub log_number: u64,
    /// Bytes written to manifests since open (for write amplification).
    pub manifest_bytes_written: u64,
    compact_pointers: Vec<Vec<u8>>,
    /// The last write-times list an edit recorded (`Edit::write_times`).
    pub write_times: Vec<(SeqNo, u64)>,
}

impl VersionSet {
    /// An empty set for a directory without a database; `recover` or
    /// `create` fills it.
    pub fn new(dir: &Path, opts: &Options, cache: Arc<BlockCache>) -> Self {
        let mut v = Version::new(opts.num_levels);
        v.rows = crate::l0::Rows::for_database(dir, opts);
        VersionSet {
            dir: dir.to_path_buf(),
            fs: opts.fs.clone(),
            tables: Arc::new(TableCache::new(dir, opts, cache)),
            num_levels: opts.num_levels,
            current: Arc::new(v),
            manifest: None,
            manifest_number: 0,
            next_file_number: 2,
            last_sequence: 0,
            log_number: 0,
            manifest_bytes_written: 0,
            compact_pointers: vec![Vec::new(); opts.num_levels],
            write_times: Vec::new(),
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

    /// The file number the next new file will get (not taken): every file
    /// made from now on has a number at least this.
    pub fn peek_file_number(&self) -> u64 {
        self.next_file_number
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Reserves `count` consecutive file numbers; returns the first.
    pub fn reserve_file_numbers(&mut self, count: u64) -> u64 {
        let n = self.next_file_number;
        self.next_file_number = self.next_file_number.saturating_add(count);
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
        let mut rows: HashMap<u64, (FileDesc, Option<u32>)> = HashMap::new();
        let mut range_dels: HashMap<SeqNo, RangeTombstone> = HashMap::new();
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
            for id in &edit.rows_deleted {
                rows.remove(id);
            }
            for d in &edit.rows_added {
                rows.insert(d.id, (d.clone(), None));
            }
            for (id, cursor) in &edit.row_cursors {
                if let Some(r) = rows.get_mut(id) {
                    r.1 = Some(*cursor);
                }
            }
            for t in edit.range_dels_added {
                range_dels.insert(t.seq, t);
            }
            for seq in &edit.range_dels_removed {
                range_dels.remove(seq);
            }
            if let Some(t) = edit.write_times {
                self.write_times = t;
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
        let mut ids: Vec<u64> = rows.keys().copied().collect();
        ids.sort_unstable();
        let mut opened = Vec::new();
        let mut cursors = Vec::new();
        for id in ids {
            let Some((d, cursor)) = rows.remove(&id) else {
                continue;
            };
            if id >= self.next_file_number {
                return Err(Error::corruption(
                    &manifest_path,
                    0,
                    "row number beyond counter",
                ));
            }
            let meta = self.current.rows.open_row(d, &self.fs).map_err(|e| {
                if e.io_kind() == Some(std::io::ErrorKind::NotFound) {
                    Error::corruption(
                        &manifest_path,
                        0,
                        format!("level-0 row {id:06} named by the manifest is missing"),
                    )
                } else {
                    e
                }
            })?;
            opened.push(meta);
            if let Some(c) = cursor {
                cursors.push((id, c));
            }
        }
        v.rows = self.current.rows.clone();
        v.rows.apply(opened, &cursors, &[]);
        v.range_dels = Arc::new(RangeDels::new(range_dels.into_values().collect()));
        v.seal();
        self.current = Arc::new(v);
        self.tables.fit(self.current.total_bytes());
        // A fresh manifest on every open keeps its size bounded and drops a torn tail.
        self.manifest = None;
        Ok(())
    }

    /// The live table file named by a descriptor, opened once through the
    /// table cache to check it.
    fn open_file(&self, d: FileDesc) -> Result<Arc<FileMeta>> {
        FileMeta::open(d, &self.tables)
    }

    /// The cache of open tables that every `FileMeta` of this set reads through.
    pub fn table_cache(&self) -> &Arc<TableCache> {
        &self.tables
    }

    /// Writes `edit` (completed with the counters) to the manifest, syncs it,
    /// and installs the resulting version. On error nothing is installed.
    /// In one go, for a caller that holds no lock others wait on (recovery);
    /// the database splits it (`prepare`, `PendingEdit::write`, `install`)
    /// so that the manifest I/O runs without its state mutex.
    pub fn log_and_apply(&mut self, edit: &mut Edit) -> Result<Arc<Version>> {
        let mut pending = self.prepare(edit, Vec::new(), None)?;
        let written = pending.write();
        self.install(pending, written)
    }

    /// Builds the version `edit` leads to and what the manifest must get;
    /// no I/O unless an added table is not in `opened` (it is opened then).
    /// Until [`install`](Self::install), no other edit may be prepared.
    pub fn prepare(
        &mut self,
        edit: &mut Edit,
        opened: Vec<Arc<FileMeta>>,
        with_rows: Option<crate::l0::Rows>,
    ) -> Result<PendingEdit> {
        if let Some(n) = edit.log_number {
            // Recovery replays logs from this number on: moving it back
            // would replay flushed logs, forward past a live one loses it.
            if n < self.log_number {
                return Err(Error::InvalidArgument(format!(
                    "an edit moves the log number back from {} to {n}",
                    self.log_number
                )));
            }
        }
        let log_number = edit.log_number.unwrap_or(self.log_number);
        let last_sequence = edit
            .last_sequence
            .unwrap_or(self.last_sequence)
            .max(self.last_sequence);
        edit.log_number = Some(log_number);
        edit.last_sequence = Some(last_sequence);
        edit.next_file_number = Some(self.next_file_number);

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
            let meta = match removed.iter().chain(&opened).find(|f| f.id() == d.id) {
                Some(m) => m.clone(), // a trivial move keeps the open table
                None => self.open_file(d.clone())?,
            };
            v.levels
                .get_mut(*level)
                .ok_or_else(|| Error::InvalidArgument(format!("level {level} out of range")))?
                .push(meta);
        }
        // The rows the edit adds: opened, on top, in their segment filters
        // (`with_rows`, built from the current container by the caller
        // outside the state mutex), or here.
        let rows = match with_rows {
            Some(m) => {
                v.rows = m;
                Vec::new()
            }
            None => edit
                .rows_added
                .iter()
                .map(|d| self.current.rows.open_row(d.clone(), &self.fs))
                .collect::<Result<_>>()?,
        };
        let removed_rows = v.rows.apply(rows, &edit.row_cursors, &edit.rows_deleted);
        v.seal();
        let retired = v.update_range_dels(&edit.range_dels_added, &edit.range_dels_removed);
        edit.range_dels_removed.extend(retired);

        let new_manifest = match &self.manifest {
            None => true,
            Some(m) => m.len() > MANIFEST_ROLL_BYTES,
        };
        let write = if new_manifest {
            // Number taken before the snapshot so that next_file_number covers it.
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            ManifestWrite::New {
                fs: self.fs.clone(),
                dir: self.dir.clone(),
                number,
                snapshot: self.snapshot_record(&v, edit),
            }
        } else {
            match self.manifest.take() {
                Some(writer) => ManifestWrite::Append {
                    writer,
                    record: edit.encode(),
                },
                None => return Err(Error::InvalidArgument("no manifest to append to".into())),
            }
        };
        Ok(PendingEdit {
            version: v,
            removed,
            removed_rows,
            added: edit.added.iter().map(|(_, d)| d.id).collect(),
            compact_pointers: edit.compact_pointers.clone(),
            write_times: edit.write_times.clone(),
            log_number,
            last_sequence,
            write,
        })
    }

    /// Installs a prepared edit whose manifest write gave `written`; on
    /// error nothing is installed (an appending writer goes back: it
    /// refuses later writes once one failed).
    pub fn install(
        &mut self,
        pending: PendingEdit,
        written: Result<Written>,
    ) -> Result<Arc<Version>> {
        // An appending writer goes back in any case (after a failure it
        // refuses every later write).
        let written = match pending.write {
            ManifestWrite::Append { writer, .. } => {
                self.manifest = Some(writer);
                written?
            }
            ManifestWrite::New { .. } => written?,
        };
        match written {
            Written::Appended { bytes } => self.manifest_bytes_written += bytes,
            Written::New { writer, number } => {
                let old = self.manifest_number;
                self.manifest_bytes_written += writer.len();
                self.manifest = Some(writer);
                self.manifest_number = number;
                if old != 0 {
                    let _ = self.fs.remove_file(&self.dir.join(manifest_name(old)));
                }
            }
        }
        for (level, k) in &pending.compact_pointers {
            if let Some(p) = self.compact_pointers.get_mut(*level) {
                *p = k.clone();
            }
        }
        for f in &pending.removed {
            if !pending.added.contains(&f.id()) {
                f.mark_obsolete();
            }
        }
        for r in &pending.removed_rows {
            r.mark_obsolete();
        }
        if let Some(t) = pending.write_times {
            self.write_times = t;
        }
        self.log_number = pending.log_number;
        self.last_sequence = pending.last_sequence;
        self.current = Arc::new(pending.version);
        self.tables.fit(self.current.total_bytes());
        Ok(self.current.clone())
    }

    /// The first edit of a new manifest: the whole of `v`, with `edit`'s
    /// counters and every compaction pointer.
    fn snapshot_record(&self, v: &Version, edit: &Edit) -> Vec<u8> {
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
        for r in v.rows.rows.iter().rev() {
            snap.rows_added.push(r.meta.desc.clone());
            if r.compacting {
                snap.row_cursors.push((r.meta.id(), r.cursor));
            }
        }
        snap.range_dels_added = v.range_dels.list().to_vec();
        for (level, k) in self.compact_pointers.iter().enumerate() {
            if !k.is_empty() {
                snap.compact_pointers.push((level, k.clone()));
            }
        }
        snap.compact_pointers
            .extend(edit.compact_pointers.iter().cloned());
        snap.write_times = edit
            .write_times
            .clone()
            .or_else(|| (!self.write_times.is_empty()).then(|| self.write_times.clone()));
        snap.encode()
    }

    /// The manifest of a checkpoint of `v` (a version of this set): its
    /// number and its one record, the whole of `v` with this set's log
    /// number, last sequence and compaction pointers.
    pub fn checkpoint_record(&self, v: &Version) -> (u64, Vec<u8>) {
        let number = self.next_file_number;
        let edit = Edit {
            log_number: Some(self.log_number),
            next_file_number: Some(number + 1),
            last_sequence: Some(self.last_sequence),
            ..Edit::default()
        };
        (number, self.snapshot_record(v, &edit))
    }

    /// Where level 0's rows live.
    pub fn l0_dir(&self) -> &Path {
        self.current.rows.dir()
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

/// An edit prepared under the state mutex, to be written to the manifest
/// without it and then installed ([`VersionSet::install`]).
pub struct PendingEdit {
    version: Version,
    removed: Vec<Arc<FileMeta>>,
    removed_rows: Vec<Arc<crate::l0::RowMeta>>,
    added: Vec<u64>,
    compact_pointers: Vec<(usize, Vec<u8>)>,
    write_times: Option<Vec<(SeqNo, u64)>>,
    log_number: u64,
    last_sequence: SeqNo,
    write: ManifestWrite,
}

enum ManifestWrite {
    /// One record appended to the live manifest (its writer moved here).
    Append {
        writer: wal::Writer,
        record: Vec<u8>,
    },
    /// A new manifest holding `snapshot`, then CURRENT naming it.
    New {
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        number: u64,
        snapshot: Vec<u8>,
    },
}

/// What a manifest write left.
pub enum Written {
    /// Appended to the live manifest (its writer goes back in `install`).
    Appended { bytes: u64 },
    /// A new manifest, named by CURRENT.
    New { writer: wal::Writer, number: u64 },
}

impl PendingEdit {
    /// The manifest I/O: append and sync, or a new manifest and CURRENT.
    pub fn write(&mut self) -> Result<Written> {
        match &mut self.write {
            ManifestWrite::Append { writer, record } => {
                let before = writer.len();
                writer.add_record(record)?;
                writer.sync()?;
                Ok(Written::Appended {
                    bytes: writer.len() - before,
                })
            }
            ManifestWrite::New {
                fs,
                dir,
                number,
                snapshot,
            } => {
                let path = dir.join(manifest_name(*number));
                let w = match write_manifest(&**fs, &path, *number, snapshot) {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = fs.remove_file(&path);
                        return Err(e);
                    }
                };
                // From here on the new manifest stays even on failure: once
                // the rename of CURRENT may have happened, CURRENT may name
                // it (a failed directory sync after the rename, say). If it
                // is not named, the next open removes it.
                set_current(&**fs, dir, *number)?;
                Ok(Written::New {
                    writer: w,
                    number: *number,
                })
            }
        }
    }
}

/// Writes manifest `number` in `dir` holding `snapshot`, then `CURRENT`
/// naming it (a new database's files, as a checkpoint writes them).
pub(crate) fn write_manifest_and_current(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    snapshot: &[u8],
) -> Result<()> {
    write_manifest(fs, &dir.join(manifest_name(number)), number, snapshot)?;
    set_current(fs, dir, number)
}

/// Makes `CURRENT` in `dir` name manifest `number`, atomically and durably.
fn set_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    io::write_atomic(
        fs,
        dir,
        CURRENT,
        format!("{}\n", manifest_name(number)).as_bytes(),
    )
}

/// Writes and syncs a new manifest: the header, then `snapshot`.
fn write_manifest(
    fs: &dyn FileSystem,
    path: &Path,
    number: u64,
    snapshot: &[u8],
) -> Result<wal::Writer> {
    let mut w = wal::Writer::new(fs.create(path)?, number)?;
    let mut header = Vec::with_capacity(12);
    header.extend_from_slice(&MANIFEST_MAGIC.to_le_bytes());
    header.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
    w.add_record(&header)?;
    w.add_record(snapshot)?;
    w.sync()?;
    Ok(w)
}
