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
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MANIFEST_MAGIC: u64 = 0x5354_5241_5441_4d46; // "STRATAMF"
/// The newest manifest format: 2 may hold keyspaces other than `default`
/// (edit tags 15-18); 1 holds only `default`. A manifest is written as 1
/// while the database has no other keyspace, so older builds open it.
const MANIFEST_VERSION: u32 = 2;
/// Start a new manifest when the current one grows past this.
const MANIFEST_ROLL_BYTES: u64 = 64 << 20;

pub struct VersionSet {
    /// The database's options, which a keyspace's options text changes.
    base: Options,
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    tables: Arc<TableCache>,
    num_levels: usize,
    /// Each keyspace's tree, indexed by its id; `None` for an id no live
    /// keyspace has (never made, or dropped). Id 0, `default`, is always
    /// there.
    trees: Vec<Option<TreeSet>>,
    /// One past every keyspace id the manifest recorded or this process
    /// made: the next keyspace's id.
    next_family: u32,
    /// An empty version: what [`current`](Self::current) gives for an id
    /// without a tree.
    empty: Arc<Version>,
    manifest: Option<wal::Writer>,
    manifest_number: u64,
    /// The format of the live manifest (its header): 1 until it holds a
    /// keyspace other than `default`.
    manifest_format: u32,
    next_file_number: u64,
    /// Where the flushed history ends: at least every sequence a table
    /// holds; the logs from `log_number()` on continue from the next one
    /// (see `db/flush.rs`, and recovery's continuity check).
    pub last_sequence: SeqNo,
    /// Bytes written to manifests since open (for write amplification).
    pub manifest_bytes_written: u64,
}

/// One keyspace's part of the version set.
#[derive(Clone)]
pub struct TreeSet {
    /// Its name and its options as `name=value` text (`Edit::created`).
    pub name: String,
    pub options: String,
    current: Arc<Version>,
    /// WALs numbered below this hold none of its unflushed writes.
    pub log_number: u64,
    compact_pointers: Vec<Vec<u8>>,
    /// The last write-times list an edit of it recorded
    /// (`Edit::write_times`, time to live).
    pub write_times: Vec<(SeqNo, u64)>,
}

/// A keyspace as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyRecord {
    pub id: u32,
    pub name: String,
    pub options: String,
    /// WALs numbered below this hold none of its unflushed writes.
    pub log_number: u64,
}

impl VersionSet {
    /// An empty set for a directory without a database; `recover` or
    /// `create` fills it.
    pub fn new(dir: &Path, opts: &Options, cache: Arc<BlockCache>) -> Self {
        let mut v = Version::new(opts.num_levels);
        v.rows = crate::l0::Rows::for_database(dir, opts);
        let default = TreeSet {
            name: "default".to_string(),
            options: String::new(),
            current: Arc::new(v),
            log_number: 0,
            compact_pointers: vec![Vec::new(); opts.num_levels],
            write_times: Vec::new(),
        };
        VersionSet {
            base: opts.clone(),
            dir: dir.to_path_buf(),
            fs: opts.fs.clone(),
            tables: Arc::new(TableCache::new(dir, opts, cache)),
            num_levels: opts.num_levels,
            trees: vec![Some(default)],
            next_family: 1,
            empty: Arc::new(Version::new(opts.num_levels)),
            manifest: None,
            manifest_number: 0,
            manifest_format: 1,
            next_file_number: 2,
            last_sequence: 0,
            manifest_bytes_written: 0,
        }
    }

    /// A tree with no tables for a keyspace named `name` with `options`
    /// (`name=value` text over the database's options).
    fn new_tree(&self, name: &str, options: &str) -> Result<TreeSet> {
        let opts = self.base.for_keyspace(options)?;
        let mut v = Version::new(self.num_levels);
        v.rows = crate::l0::Rows::for_database(&self.dir, &opts);
        Ok(TreeSet {
            name: name.to_string(),
            options: options.to_string(),
            current: Arc::new(v),
            log_number: 0,
            compact_pointers: vec![Vec::new(); self.num_levels],
            write_times: Vec::new(),
        })
    }

    /// The current version of keyspace `family` (an empty one if it has
    /// none).
    pub fn current(&self, family: u32) -> Arc<Version> {
        self.tree(family)
            .map_or_else(|| self.empty.clone(), |t| t.current.clone())
    }

    /// The tree of keyspace `family`, if it is live.
    pub fn tree(&self, family: u32) -> Option<&TreeSet> {
        self.trees.get(family as usize)?.as_ref()
    }

    /// The live keyspaces, `default` first, as the manifest records them.
    pub fn families(&self) -> Vec<FamilyRecord> {
        self.trees
            .iter()
            .enumerate()
            .filter_map(|(id, t)| {
                let t = t.as_ref()?;
                Some(FamilyRecord {
                    id: id as u32,
                    name: t.name.clone(),
                    options: t.options.clone(),
                    log_number: t.log_number,
                })
            })
            .collect()
    }

    /// The id the next new keyspace gets: one past every id the manifest
    /// has seen in this process or recorded (dropped ids are not reused
    /// while their files may be on disk).
    pub fn next_family_id(&self) -> u32 {
        self.next_family
    }

    /// The oldest WAL any keyspace still needs: logs below it hold no
    /// unflushed write.
    pub fn log_number(&self) -> u64 {
        self.trees
            .iter()
            .flatten()
            .map(|t| t.log_number)
            .min()
            .unwrap_or(0)
    }

    /// Every live version, `default`'s first.
    pub fn all_current(&self) -> Vec<Arc<Version>> {
        self.trees
            .iter()
            .flatten()
            .map(|t| t.current.clone())
            .collect()
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

    /// Keyspace `family`'s round-robin compaction pointer of `level`.
    pub fn compact_pointer(&self, family: u32, level: usize) -> &[u8] {
        self.tree(family)
            .and_then(|t| t.compact_pointers.get(level))
            .map_or(&[], Vec::as_slice)
    }

    /// Loads the manifest named by CURRENT and rebuilds the current version
    /// of every keyspace.
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
        let mut trees: BTreeMap<u32, Recovered> = BTreeMap::new();
        trees.insert(0, Recovered::new("default", "", self.num_levels));
        // Ids seen, dropped ones too: none is given out again.
        let mut next_family = 1u32;
        let mut next_file = None;
        let mut last_seq = None;
        loop {
            let at = reader.last_good_offset();
            let Some(rec) = reader.read_record()? else {
                break;
            };
            let edit = Edit::decode(&rec).map_err(|e| e.in_file(&manifest_path, at))?;
            for part in edit.parts() {
                next_family = next_family.max(part.family.saturating_add(1));
                if let Some((name, options)) = &part.created {
                    let t = trees
                        .entry(part.family)
                        .or_insert_with(|| Recovered::new(name, options, self.num_levels));
                    t.name.clone_from(name);
                    t.options.clone_from(options);
                }
                if part.dropped {
                    if part.family == 0 {
                        return Err(Error::corruption(
                            &manifest_path,
                            at,
                            "the default keyspace is dropped",
                        ));
                    }
                    trees.remove(&part.family);
                    continue;
                }
                let Some(t) = trees.get_mut(&part.family) else {
                    return Err(Error::corruption(
                        &manifest_path,
                        at,
                        format!("an edit of keyspace {} that does not exist", part.family),
                    ));
                };
                t.apply(part)
                    .map_err(|what| Error::corruption(&manifest_path, at, what))?;
            }
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
        }
        let missing =
            |what: &str| Error::corruption(&manifest_path, 0, format!("manifest lacks {what}"));
        self.next_file_number = next_file.ok_or_else(|| missing("next file number"))?;
        self.last_sequence = last_seq.ok_or_else(|| missing("last sequence"))?;
        if trees.values().any(|t| t.log_number.is_none()) {
            return Err(missing("log number"));
        }
        let oldest_log = trees
            .values()
            .filter_map(|t| t.log_number)
            .min()
            .unwrap_or(0);
        if let Some((offset, reason)) = reader.dropped() {
            // A torn tail is a crash during an append whose sync never
            // finished, so nothing the dropped edits did has happened. A
            // flush edit is followed by deleting the logs before its log
            // number: if the log to replay from is gone, the dropped edits
            // had taken effect and dropping them would lose data.
            let wal = wal_path(&self.dir, oldest_log);
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
        self.next_family = next_family;
        // Sized by the live ids, not by every id seen (a damaged manifest
        // naming id 2^20 costs nothing).
        let slots = trees.keys().next_back().map_or(1, |&id| id as usize + 1);
        self.trees = vec![None; slots];
        for (id, t) in trees {
            let tree = t.open(self, &manifest_path)?;
            if let Some(slot) = self.trees.get_mut(id as usize) {
                *slot = Some(tree);
            }
        }
        self.fit_tables();
        if self.trees.iter().flatten().count() > 1 {
            self.manifest_format = 2;
        }
        // A fresh manifest on every open keeps its size bounded and drops a torn tail.
        self.manifest = None;
        Ok(())
    }

    /// Tells the table cache how many bytes the live tables hold.
    fn fit_tables(&self) {
        let bytes = self
            .trees
            .iter()
            .flatten()
            .map(|t| t.current.total_bytes())
            .sum();
        self.tables.fit(bytes);
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
    /// and installs the resulting versions. On error nothing is installed.
    /// In one go, for a caller that holds no lock others wait on (recovery);
    /// the database splits it (`prepare`, `PendingEdit::write`, `install`)
    /// so that the manifest I/O runs without its state mutex.
    pub fn log_and_apply(&mut self, edit: &mut Edit) -> Result<Arc<Version>> {
        let mut pending = self.prepare(edit, Vec::new(), None)?;
        let written = pending.write();
        self.install(pending, written)
    }

    /// Builds the versions `edit` (and its `others`) lead to and what the
    /// manifest must get; no I/O unless an added table is not in `opened`
    /// (it is opened then). `with_rows`: the main part's level-0 rows with
    /// its added ones already opened. Until [`install`](Self::install), no
    /// other edit may be prepared. `InvalidArgument` for an edit that
    /// names a keyspace that is not live, makes one that is, drops
    /// `default`, or moves a log number back.
    pub fn prepare(
        &mut self,
        edit: &mut Edit,
        opened: Vec<Arc<FileMeta>>,
        with_rows: Option<crate::l0::Rows>,
    ) -> Result<PendingEdit> {
        let last_sequence = edit
            .last_sequence
            .unwrap_or(self.last_sequence)
            .max(self.last_sequence);
        edit.last_sequence = Some(last_sequence);
        edit.next_file_number = Some(self.next_file_number);
        // A log number of a keyspace dropped since the edit was built means
        // nothing: left out, not refused.
        edit.others.retain(|o| {
            let log_only = Edit {
                family: o.family,
                log_number: o.log_number,
                ..Edit::default()
            } == *o;
            !log_only || self.tree(o.family).is_some()
        });
        let mut parts = vec![self.prepare_tree(edit, &opened, with_rows)?];
        for other in &mut edit.others {
            if parts.iter().any(|p| p.family == other.family) {
                return Err(Error::InvalidArgument(format!(
                    "an edit changes keyspace {} twice",
                    other.family
                )));
            }
            parts.push(self.prepare_tree(other, &opened, None)?);
        }
        let live = self.trees.iter().flatten().count();
        let needs_format = if live > 1 || parts.iter().any(|p| p.family != 0) {
            2
        } else {
            1
        };
        let new_manifest = match &self.manifest {
            None => true,
            Some(m) => m.len() > MANIFEST_ROLL_BYTES || needs_format > self.manifest_format,
        };
        let write = if new_manifest {
            // Number taken before the snapshot so that next_file_number covers it.
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let snapshot = self.snapshot_record(&parts, edit);
            ManifestWrite::New {
                fs: self.fs.clone(),
                dir: self.dir.clone(),
                number,
                format: needs_format.max(format_of(&snapshot)),
                snapshot,
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
            parts,
            last_sequence,
            write,
        })
    }

    /// The tree one part of an edit leads to (see [`prepare`](Self::prepare)).
    fn prepare_tree(
        &self,
        part: &mut Edit,
        opened: &[Arc<FileMeta>],
        with_rows: Option<crate::l0::Rows>,
    ) -> Result<PendingTree> {
        let family = part.family;
        let live = self.tree(family);
        let mut tree = match (&part.created, live) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {family} is made while it exists"
                )))
            }
            (Some((name, options)), None) if family >= self.next_family => {
                self.new_tree(name, options)?
            }
            (Some(_), None) => {
                return Err(Error::InvalidArgument(format!(
                    "keyspace id {family} is taken by a dropped keyspace"
                )))
            }
            (None, Some(t)) => t.clone(),
            (None, None) => {
                return Err(Error::InvalidArgument(format!(
                    "an edit of keyspace {family}, which is not live"
                )))
            }
        };
        if part.dropped {
            if family == 0 {
                return Err(Error::InvalidArgument(
                    "the default keyspace cannot be dropped".into(),
                ));
            }
            let v = &tree.current;
            return Ok(PendingTree {
                family,
                tree: None,
                removed: v.levels.iter().flatten().cloned().collect(),
                removed_rows: v.rows.rows.iter().map(|r| r.meta.clone()).collect(),
                added: Vec::new(),
            });
        }
        if let Some(n) = part.log_number {
            // Recovery replays logs from this number on: moving it back
            // would replay flushed logs, forward past a live one loses it.
            if n < tree.log_number {
                return Err(Error::InvalidArgument(format!(
                    "an edit moves keyspace {family}'s log number back from {} to {n}",
                    tree.log_number
                )));
            }
            tree.log_number = n;
        }
        part.log_number = Some(tree.log_number);

        let mut v = (*tree.current).clone();
        let mut removed = Vec::new();
        for (level, id) in &part.deleted {
            if let Some(l) = v.levels.get_mut(*level) {
                if let Some(pos) = l.iter().position(|f| f.id() == *id) {
                    removed.push(l.remove(pos));
                }
            }
        }
        for (level, d) in &part.added {
            let meta = match removed.iter().chain(opened).find(|f| f.id() == d.id) {
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
            None => part
                .rows_added
                .iter()
                .map(|d| tree.current.rows.open_row(d.clone(), &self.fs))
                .collect::<Result<_>>()?,
        };
        let removed_rows = v.rows.apply(rows, &part.row_cursors, &part.rows_deleted);
        v.seal();
        let retired = v.update_range_dels(&part.range_dels_added, &part.range_dels_removed);
        part.range_dels_removed.extend(retired);
        for (level, k) in &part.compact_pointers {
            if let Some(p) = tree.compact_pointers.get_mut(*level) {
                p.clone_from(k);
            }
        }
        if let Some(t) = &part.write_times {
            tree.write_times.clone_from(t);
        }
        tree.current = Arc::new(v);
        Ok(PendingTree {
            family,
            tree: Some(tree),
            removed,
            removed_rows,
            added: part.added.iter().map(|(_, d)| d.id).collect(),
        })
    }

    /// Installs a prepared edit whose manifest write gave `written`; on
    /// error nothing is installed (an appending writer goes back: it
    /// refuses later writes once one failed). Returns the main part's new
    /// version (an empty one for a dropped keyspace).
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
            Written::New {
                writer,
                number,
                format,
            } => {
                let old = self.manifest_number;
                self.manifest_bytes_written += writer.len();
                self.manifest = Some(writer);
                self.manifest_number = number;
                self.manifest_format = format;
                if old != 0 {
                    let _ = self.fs.remove_file(&self.dir.join(manifest_name(old)));
                }
            }
        }
        let mut main = None;
        for part in pending.parts {
            for f in &part.removed {
                if !part.added.contains(&f.id()) {
                    f.mark_obsolete();
                }
            }
            for r in &part.removed_rows {
                r.mark_obsolete();
            }
            let at = part.family as usize;
            if self.trees.len() <= at {
                self.trees.resize(at + 1, None);
            }
            self.next_family = self.next_family.max(part.family.saturating_add(1));
            main.get_or_insert_with(|| {
                part.tree
                    .as_ref()
                    .map_or_else(|| self.empty.clone(), |t| t.current.clone())
            });
            self.trees[at] = part.tree;
        }
        self.last_sequence = pending.last_sequence;
        self.fit_tables();
        Ok(main.unwrap_or_else(|| self.empty.clone()))
    }

    /// The first record of a new manifest: every live keyspace's tree
    /// whole (`default`'s in the record itself, each other one as an edit
    /// of `others` that names it), the trees of `pending` as they will be,
    /// with `edit`'s counters and every compaction pointer.
    fn snapshot_record(&self, pending: &[PendingTree], edit: &Edit) -> Vec<u8> {
        let count = self.trees.len().max(
            pending
                .iter()
                .map(|p| p.family as usize + 1)
                .max()
                .unwrap_or(0),
        );
        let mut parts = Vec::new();
        for id in 0..count {
            let tree = match pending.iter().find(|p| p.family as usize == id) {
                Some(p) => p.tree.as_ref(),
                None => self.trees.get(id).and_then(Option::as_ref),
            };
            if let Some(t) = tree {
                parts.push(tree_record(id as u32, t));
            }
        }
        let mut snap = if parts.first().is_some_and(|p| p.family == 0) {
            parts.remove(0)
        } else {
            Edit::default()
        };
        snap.others = parts;
        snap.next_file_number = edit.next_file_number;
        snap.last_sequence = edit.last_sequence;
        snap.encode()
    }

    /// The manifest of a checkpoint of the current versions: its number
    /// and its one record, every live keyspace whole with its log number,
    /// and this set's last sequence and compaction pointers.
    pub fn checkpoint_record(&self) -> (u64, Vec<u8>) {
        let number = self.next_file_number;
        let edit = Edit {
            next_file_number: Some(number + 1),
            last_sequence: Some(self.last_sequence),
            ..Edit::default()
        };
        (number, self.snapshot_record(&[], &edit))
    }

    /// Where level 0's rows live.
    pub fn l0_dir(&self) -> &Path {
        match self.trees.first() {
            Some(Some(t)) => t.current.rows.dir(),
            _ => self.empty.rows.dir(),
        }
    }
}

/// One keyspace's tree as recovery rebuilds it from the manifest's edits.
struct Recovered {
    name: String,
    options: String,
    files: Vec<HashMap<u64, FileDesc>>,
    rows: HashMap<u64, (FileDesc, Option<u32>)>,
    range_dels: HashMap<SeqNo, RangeTombstone>,
    compact_pointers: Vec<Vec<u8>>,
    log_number: Option<u64>,
    write_times: Vec<(SeqNo, u64)>,
}

impl Recovered {
    fn new(name: &str, options: &str, num_levels: usize) -> Self {
        Recovered {
            name: name.to_string(),
            options: options.to_string(),
            files: vec![HashMap::new(); num_levels],
            rows: HashMap::new(),
            range_dels: HashMap::new(),
            compact_pointers: vec![Vec::new(); num_levels],
            log_number: None,
            write_times: Vec::new(),
        }
    }

    /// Applies the tree fields of one edit; `Err` names what is wrong.
    fn apply(&mut self, edit: &Edit) -> std::result::Result<(), String> {
        for (level, id) in &edit.deleted {
            if let Some(l) = self.files.get_mut(*level) {
                l.remove(id);
            }
        }
        for (level, f) in &edit.added {
            let l = self
                .files
                .get_mut(*level)
                .ok_or_else(|| format!("level {level} beyond num_levels"))?;
            l.insert(f.id, f.clone());
        }
        for (level, k) in &edit.compact_pointers {
            if let Some(p) = self.compact_pointers.get_mut(*level) {
                p.clone_from(k);
            }
        }
        for id in &edit.rows_deleted {
            self.rows.remove(id);
        }
        for d in &edit.rows_added {
            self.rows.insert(d.id, (d.clone(), None));
        }
        for (id, cursor) in &edit.row_cursors {
            if let Some(r) = self.rows.get_mut(id) {
                r.1 = Some(*cursor);
            }
        }
        for t in &edit.range_dels_added {
            self.range_dels.insert(t.seq, t.clone());
        }
        for seq in &edit.range_dels_removed {
            self.range_dels.remove(seq);
        }
        self.log_number = edit.log_number.or(self.log_number);
        if let Some(t) = &edit.write_times {
            self.write_times.clone_from(t);
        }
        Ok(())
    }

    /// Opens the tree's tables and rows (each checked) into a version.
    fn open(self, set: &VersionSet, manifest_path: &Path) -> Result<TreeSet> {
        let mut tree = set.new_tree(&self.name, &self.options).map_err(|e| {
            Error::InvalidArgument(format!(
                "keyspace {:?}'s options ({:?}) do not fit the options the database is \
                 opened with: {e}",
                self.name, self.options
            ))
        })?;
        let mut v = Version::new(set.num_levels);
        for (level, descs) in self.files.into_iter().enumerate() {
            for (_, d) in descs {
                if d.id >= set.next_file_number {
                    return Err(Error::corruption(
                        manifest_path,
                        0,
                        "file number beyond counter",
                    ));
                }
                let id = d.id;
                let meta = set.open_file(d).map_err(|e| {
                    if e.io_kind() == Some(std::io::ErrorKind::NotFound) {
                        Error::corruption(
                            manifest_path,
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
        let mut rows = self.rows;
        let mut ids: Vec<u64> = rows.keys().copied().collect();
        ids.sort_unstable();
        let mut opened = Vec::new();
        let mut cursors = Vec::new();
        for id in ids {
            let Some((d, cursor)) = rows.remove(&id) else {
                continue;
            };
            if id >= set.next_file_number {
                return Err(Error::corruption(
                    manifest_path,
                    0,
                    "row number beyond counter",
                ));
            }
            let meta = tree.current.rows.open_row(d, &set.fs).map_err(|e| {
                if e.io_kind() == Some(std::io::ErrorKind::NotFound) {
                    Error::corruption(
                        manifest_path,
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
        v.rows = tree.current.rows.clone();
        v.rows.apply(opened, &cursors, &[]);
        v.range_dels = Arc::new(RangeDels::new(self.range_dels.into_values().collect()));
        v.seal();
        tree.current = Arc::new(v);
        tree.compact_pointers = self.compact_pointers;
        tree.log_number = self.log_number.unwrap_or(0);
        tree.write_times = self.write_times;
        Ok(tree)
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
    if !(1..=MANIFEST_VERSION).contains(&version) {
        return Err(Error::NotSupported(format!(
            "manifest format version {version}"
        )));
    }
    Ok(())
}

/// An edit prepared under the state mutex, to be written to the manifest
/// without it and then installed ([`VersionSet::install`]).
pub struct PendingEdit {
    parts: Vec<PendingTree>,
    last_sequence: SeqNo,
    write: ManifestWrite,
}

/// One keyspace's part of a [`PendingEdit`].
struct PendingTree {
    family: u32,
    /// The tree after the edit; `None`: dropped.
    tree: Option<TreeSet>,
    removed: Vec<Arc<FileMeta>>,
    removed_rows: Vec<Arc<crate::l0::RowMeta>>,
    added: Vec<u64>,
}

/// The whole of tree `t` of keyspace `id` as one edit: its tables, rows,
/// range tombstones, compaction pointers and log number, and (but for
/// `default`) its name and options.
fn tree_record(id: u32, t: &TreeSet) -> Edit {
    let v = &t.current;
    let mut e = Edit {
        family: id,
        created: (id != 0).then(|| (t.name.clone(), t.options.clone())),
        log_number: Some(t.log_number),
        ..Edit::default()
    };
    for (level, files) in v.levels.iter().enumerate() {
        for f in files {
            e.added.push((level, f.desc.clone()));
        }
    }
    for r in v.rows.rows.iter().rev() {
        e.rows_added.push(r.meta.desc.clone());
        if r.compacting {
            e.row_cursors.push((r.meta.id(), r.cursor));
        }
    }
    e.range_dels_added = v.range_dels.list().to_vec();
    e.write_times = (!t.write_times.is_empty()).then(|| t.write_times.clone());
    for (level, k) in t.compact_pointers.iter().enumerate() {
        if !k.is_empty() {
            e.compact_pointers.push((level, k.clone()));
        }
    }
    e
}

/// The manifest format a first record needs: 2 when it names a keyspace
/// other than `default`.
fn format_of(snapshot: &[u8]) -> u32 {
    match Edit::decode(snapshot) {
        Ok(e) if e.parts().any(|p| p.family != 0) => 2,
        _ => 1,
    }
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
        /// Its header's format version.
        format: u32,
        snapshot: Vec<u8>,
    },
}

/// What a manifest write left.
pub enum Written {
    /// Appended to the live manifest (its writer goes back in `install`).
    Appended { bytes: u64 },
    /// A new manifest, named by CURRENT, of header format `format`.
    New {
        writer: wal::Writer,
        number: u64,
        format: u32,
    },
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
                format,
                snapshot,
            } => {
                let path = dir.join(manifest_name(*number));
                let w = match write_manifest(&**fs, &path, *number, *format, snapshot) {
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
                    format: *format,
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
    let format = format_of(snapshot);
    write_manifest(
        fs,
        &dir.join(manifest_name(number)),
        number,
        format,
        snapshot,
    )?;
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

/// Writes and syncs a new manifest: the header (of format `format`), then
/// `snapshot`.
fn write_manifest(
    fs: &dyn FileSystem,
    path: &Path,
    number: u64,
    format: u32,
    snapshot: &[u8],
) -> Result<wal::Writer> {
    let mut w = wal::Writer::new(fs.create(path)?, number)?;
    let mut header = Vec::with_capacity(12);
    header.extend_from_slice(&MANIFEST_MAGIC.to_le_bytes());
    header.extend_from_slice(&format.to_le_bytes());
    w.add_record(&header)?;
    w.add_record(snapshot)?;
    w.sync()?;
    Ok(w)
}
