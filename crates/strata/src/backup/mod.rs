//! Backups: a directory of incremental, verifiable copies of a database
//! that restore into a directory [`crate::Db::open`] opens.
//!
//! A store holds:
//! - `shared/`: copies of tables and level-0 rows, each named by its
//!   number, its size and an identity (the table's unique id, property 12,
//!   or else a 64-bit hash of its bytes), so a file that several backups hold is
//!   stored once, and two different files that share a number and a size
//!   (a restored database writes numbers its source also wrote) never are;
//! - `meta/NNNNNNNN.backup`: one per backup, naming its files with their
//!   sizes and crc32c, and carrying the manifest a restore writes
//!   (`docs/FORMAT.md` §14). A backup exists once its meta file does;
//! - `LOCK`: held by the [`BackupStore`] that has the store open.
//!
//! A backup copies (never links: it is meant to outlive the database's
//! device), and copies only the files no earlier backup holds.

mod meta;

pub(crate) use meta::Kind;
pub(crate) use meta::Meta;
use meta::{is_plain_name, Entry, MAX_META_BYTES};

use crate::error::{Error, Result};
use crate::filename::{row_name, table_path};
use crate::io::{self, FileLock, FileSystem, PosixFs};
use crate::table::{BlockCache, Table};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SHARED: &str = "shared";
const META: &str = "meta";
const META_SUFFIX: &str = ".backup";
const TMP_SUFFIX: &str = ".tmp";

/// One backup in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupInfo {
    /// Its number in the store: one above the newest backup the store
    /// holds (intact or damaged), 1 in an empty store. A number is
    /// reused only once every backup above it is deleted.
    pub id: u64,
    /// When it was taken (ms since the Unix epoch).
    pub created_ms: u64,
    /// The newest sequence number it holds.
    pub last_sequence: u64,
    /// Tables and level-0 rows it holds.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of `bytes`, those this backup copied into the store; the rest were
    /// already there (from earlier backups). Reported by
    /// [`crate::Db::backup`]; 0 in [`BackupStore::list`].
    pub copied_bytes: u64,
}

/// What [`BackupStore::restore`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreStats {
    /// The backup restored.
    pub id: u64,
    /// Tables and level-0 rows copied.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A file of the database that a backup is to hold.
pub(crate) struct SourceFile {
    pub kind: Kind,
    pub number: u64,
    pub size: u64,
    /// Where it is, on the source's file system.
    pub path: PathBuf,
}

/// A consistent set of database files plus the manifest that opens them,
/// kept alive by the caller while the backup copies them.
pub(crate) struct Source<'a> {
    pub fs: &'a dyn FileSystem,
    pub files: Vec<SourceFile>,
    pub manifest_number: u64,
    pub manifest: &'a [u8],
    pub last_sequence: u64,
    pub now_ms: u64,
}

/// An open backup store. It holds the store's `LOCK` until dropped, and
/// runs one operation at a time.
pub struct BackupStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Serialises this process's calls; `_lock` keeps other processes out.
    busy: Mutex<()>,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for BackupStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupStore")
            .field("dir", &self.dir)
            .finish()
    }
}

/// The store's backups as read from `meta/`: the intact ones by id, the
/// ids of those whose meta file is damaged, and of those written in a
/// format this build does not read (a newer one: their files are kept).
struct Catalog {
    metas: BTreeMap<u64, Meta>,
    damaged: Vec<(u64, Error)>,
    foreign: Vec<(u64, Error)>,
}

impl Catalog {
    /// The crc32c of every shared file some intact backup names, by name.
    fn shared(&self) -> HashMap<&str, (u64, u32)> {
        self.metas
            .values()
            .flat_map(|m| m.files.iter())
            .map(|f| (f.name.as_str(), (f.size, f.crc)))
            .collect()
    }

    fn next_id(&self) -> u64 {
        let newest = self.metas.keys().next_back().copied().unwrap_or(0);
        let other = self.damaged.iter().chain(&self.foreign);
        newest.max(other.map(|(id, _)| *id).max().unwrap_or(0)) + 1
    }

    /// The first backup this build cannot read, if any.
    fn unreadable(self) -> Option<Error> {
        self.damaged
            .into_iter()
            .chain(self.foreign)
            .next()
            .map(|(_, e)| e)
    }
}

impl BackupStore {
    /// Opens the store in `dir` on the OS file system, creating it if
    /// missing. `Locked` while another process has it open.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupStore> {
        Self::open_with(Arc::new(PosixFs), dir)
    }

    /// [`BackupStore::open`] on `fs`.
    pub fn open_with(fs: Arc<dyn FileSystem>, dir: impl AsRef<Path>) -> Result<BackupStore> {
        let dir = dir.as_ref().to_path_buf();
        io::create_dir_durable(&*fs, &dir.join(SHARED))?;
        io::create_dir_durable(&*fs, &dir.join(META))?;
        let lock = fs.lock(&dir.join("LOCK"))?;
        Ok(BackupStore {
            fs,
            dir,
            busy: Mutex::new(()),
            _lock: lock,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The intact backups, oldest first. `Corruption` (naming the file)
    /// when a meta file is damaged ([`BackupStore::delete`] removes it),
    /// `NotSupported` when one was written in a newer format.
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        let _busy = self.busy.lock();
        let cat = self.catalog()?;
        let infos = cat.metas.values().map(info).collect();
        match cat.unreadable() {
            Some(e) => Err(e),
            None => Ok(infos),
        }
    }

    /// Copies backup `id` (the newest intact one when `None`: a newer
    /// backup this build cannot read is passed over) into `target`, a
    /// directory that must not exist yet, checking every file's size and
    /// crc32c as it copies; the copy then opens with [`crate::Db::open`]
    /// (with the `l0` design of the backed-up database and no `fast_dir`).
    /// Everything is synced before it returns. `NotFound` for an unknown
    /// id or an empty store, `InvalidArgument` when `target` exists,
    /// `Corruption` when a stored file differs from its record (`target`
    /// then holds part of a copy: remove it).
    pub fn restore(&self, id: Option<u64>, target: impl AsRef<Path>) -> Result<RestoreStats> {
        let target = target.as_ref();
        let _busy = self.busy.lock();
        let meta = self.pick(id)?;
        if self.fs.exists(target) {
            return Err(Error::InvalidArgument(format!(
                "restore target {} exists",
                target.display()
            )));
        }
        io::create_dir_durable(&*self.fs, target)?;
        let mut stats = RestoreStats {
            id: meta.id,
            files: 0,
            bytes: 0,
        };
        for f in &meta.files {
            let to = match f.kind {
                Kind::Table => table_path(target, f.number),
                Kind::Row => target.join(row_name(f.number)),
            };
            let from = self.shared_path(&f.name);
            let (n, crc) = copy_summing(&*self.fs, &from, &*self.fs, &to)?;
            check(&from, f, n, crc)?;
            stats.files += 1;
            stats.bytes += n;
        }
        // Syncs `target` after writing CURRENT.
        crate::version::write_manifest_and_current(
            &*self.fs,
            target,
            meta.manifest_number,
            &meta.manifest,
        )?;
        Ok(stats)
    }

    /// Reads every file of backup `id` and checks its size and crc32c.
    /// `Corruption` naming the first that differs, `NotFound` for an
    /// unknown id.
    pub fn verify(&self, id: u64) -> Result<BackupInfo> {
        let _busy = self.busy.lock();
        let meta = self.pick(Some(id))?;
        for f in &meta.files {
            let path = self.shared_path(&f.name);
            let (n, crc, _) = hash_file(&*self.fs, &path)?;
            check(&path, f, n, crc)?;
        }
        Ok(info(&meta))
    }

    /// Deletes backup `id` (intact, damaged, or of a newer format), then
    /// every shared file no remaining intact backup names (none while the
    /// store holds a backup of a newer format: its files are unknown).
    /// Returns the bytes freed. `NotFound` for an unknown id.
    pub fn delete(&self, id: u64) -> Result<u64> {
        let _busy = self.busy.lock();
        let path = self.meta_path(id);
        if !self.fs.exists(&path) {
            return Err(Error::NotFound(path));
        }
        self.fs.remove_file(&path)?;
        self.fs.sync_dir(&self.dir.join(META))?;
        self.collect_garbage()
    }

    /// Deletes every backup but the newest `keep` intact ones (and every
    /// damaged one; those of a newer format stay), then the shared files
    /// none of the kept ones names. Returns the ids deleted and the bytes
    /// freed.
    pub fn keep_newest(&self, keep: usize) -> Result<(Vec<u64>, u64)> {
        let _busy = self.busy.lock();
        let cat = self.catalog()?;
        let intact: Vec<u64> = cat.metas.keys().copied().collect();
        let mut gone: Vec<u64> = cat.damaged.iter().map(|(id, _)| *id).collect();
        gone.extend(intact.iter().take(intact.len().saturating_sub(keep)));
        gone.sort_unstable();
        for id in &gone {
            self.fs.remove_file(&self.meta_path(*id))?;
        }
        if !gone.is_empty() {
            self.fs.sync_dir(&self.dir.join(META))?;
        }
        let freed = self.collect_garbage()?;
        Ok((gone, freed))
    }

    /// Adds a backup of `src`: copies into `shared/` each file no intact
    /// backup holds yet, or whose copy is missing or of the wrong size
    /// (through a temporary name, synced, then renamed), then writes the
    /// meta file atomically. A failure or a crash before that write leaves
    /// the store's backups as they were; temporary files left by one are
    /// removed by the next backup, and unnamed copies by the next
    /// [`BackupStore::delete`] or [`BackupStore::keep_newest`].
    pub(crate) fn add(&self, src: &Source<'_>) -> Result<BackupInfo> {
        let _busy = self.busy.lock();
        self.remove_temporaries()?;
        let cat = self.catalog()?;
        let shared = cat.shared();
        let id = cat.next_id();
        let mut copied_bytes = 0;
        let mut files = Vec::with_capacity(src.files.len());
        for f in &src.files {
            let name = store_name(src.fs, f)?;
            let path = self.shared_path(&name);
            let kept = |size: u64| self.fs.file_size(&path).is_ok_and(|n| n == size);
            let (size, crc) = match shared.get(name.as_str()) {
                Some(&(size, crc)) if size == f.size && kept(size) => (size, crc),
                _ => {
                    let to = path.clone();
                    let tmp = self.shared_path(&format!("{name}{TMP_SUFFIX}"));
                    let _ = self.fs.remove_file(&tmp);
                    let (n, crc) = copy_summing(src.fs, &f.path, &*self.fs, &tmp)?;
                    if n != f.size {
                        let _ = self.fs.remove_file(&tmp);
                        return Err(Error::corruption(
                            &f.path,
                            n,
                            format!("read {n} bytes of a file of {}", f.size),
                        ));
                    }
                    self.fs.rename(&tmp, &to)?;
                    copied_bytes += n;
                    (n, crc)
                }
            };
            files.push(Entry {
                kind: f.kind,
                number: f.number,
                size,
                crc,
                name,
            });
        }
        self.fs.sync_dir(&self.dir.join(SHARED))?;
        let meta = Meta {
            id,
            created_ms: src.now_ms,
            last_sequence: src.last_sequence,
            manifest_number: src.manifest_number,
            manifest: src.manifest.to_vec(),
            files,
        };
        io::write_atomic(
            &*self.fs,
            &self.dir.join(META),
            &meta_name(id),
            &meta.encode(),
        )?;
        Ok(BackupInfo {
            copied_bytes,
            ..info(&meta)
        })
    }

    /// Reads `meta/`. Files that are not meta files by their exact name (a
    /// `.tmp` left by a crash, a stray `1.backup`) are skipped.
    fn catalog(&self) -> Result<Catalog> {
        let mut cat = Catalog {
            metas: BTreeMap::new(),
            damaged: Vec::new(),
            foreign: Vec::new(),
        };
        for name in self.fs.list_dir(&self.dir.join(META))? {
            let Some(id) = parse_meta_name(&name) else {
                continue;
            };
            let path = self.meta_path(id);
            let read = self.fs.file_size(&path).and_then(|n| {
                if n > MAX_META_BYTES {
                    Err(Error::corruption(&path, 0, "backup meta too large"))
                } else {
                    io::read_all(&*self.fs, &path)
                }
            });
            match read.and_then(|b| Meta::decode(&b).map_err(|e| e.in_file(&path, 0))) {
                Ok(m) if m.id == id => {
                    cat.metas.insert(id, m);
                }
                Ok(m) => cat.damaged.push((
                    id,
                    Error::corruption(&path, 0, format!("holds backup {}", m.id)),
                )),
                Err(e @ Error::Corruption { .. }) => cat.damaged.push((id, e)),
                Err(Error::NotSupported(why)) => cat.foreign.push((
                    id,
                    Error::NotSupported(format!("{}: {why}", path.display())),
                )),
                Err(e) => return Err(e),
            }
        }
        Ok(cat)
    }

    /// Backup `id`'s meta, or the newest intact one's.
    fn pick(&self, id: Option<u64>) -> Result<Meta> {
        let mut cat = self.catalog()?;
        let id = match id {
            Some(id) => id,
            None => *cat
                .metas
                .keys()
                .next_back()
                .ok_or_else(|| Error::NotFound(self.dir.join(META)))?,
        };
        if let Some(at) = cat.damaged.iter().position(|(d, _)| *d == id) {
            return Err(cat.damaged.swap_remove(at).1);
        }
        if let Some(at) = cat.foreign.iter().position(|(d, _)| *d == id) {
            return Err(cat.foreign.swap_remove(at).1);
        }
        cat.metas
            .remove(&id)
            .ok_or_else(|| Error::NotFound(self.meta_path(id)))
    }

    /// Removes every file in `shared/` no intact backup names (and every
    /// temporary file); returns their bytes. Removes nothing while a backup
    /// of a newer format is in the store: which files it holds is unknown.
    fn collect_garbage(&self) -> Result<u64> {
        let cat = self.catalog()?;
        if !cat.foreign.is_empty() {
            return Ok(0);
        }
        let keep = cat.shared();
        let dir = self.dir.join(SHARED);
        let mut freed = 0;
        let mut removed = false;
        for name in self.fs.list_dir(&dir)? {
            if keep.contains_key(name.as_str()) {
                continue;
            }
            let path = dir.join(&name);
            freed += self.fs.file_size(&path).unwrap_or(0);
            self.fs.remove_file(&path)?;
            removed = true;
        }
        if removed {
            self.fs.sync_dir(&dir)?;
        }
        Ok(freed)
    }

    /// Removes the temporary files a failed or cut backup left in
    /// `shared/` and `meta/`.
    fn remove_temporaries(&self) -> Result<()> {
        for sub in [SHARED, META] {
            let dir = self.dir.join(sub);
            let mut removed = false;
            for name in self.fs.list_dir(&dir)? {
                if name.ends_with(TMP_SUFFIX) {
                    self.fs.remove_file(&dir.join(&name))?;
                    removed = true;
                }
            }
            if removed {
                self.fs.sync_dir(&dir)?;
            }
        }
        Ok(())
    }

    fn shared_path(&self, name: &str) -> PathBuf {
        self.dir.join(SHARED).join(name)
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join(META).join(meta_name(id))
    }
}

fn info(m: &Meta) -> BackupInfo {
    BackupInfo {
        id: m.id,
        created_ms: m.created_ms,
        last_sequence: m.last_sequence,
        files: m.files.len() as u64,
        bytes: m.files.iter().map(|f| f.size).sum(),
        copied_bytes: 0,
    }
}

fn meta_name(id: u64) -> String {
    format!("{id:08}{META_SUFFIX}")
}

/// The id of a meta file's name, if it is exactly `meta_name(id)`.
fn parse_meta_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(META_SUFFIX)?;
    let id = stem
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| stem.parse().ok())
        .flatten()?;
    (meta_name(id) == name).then_some(id)
}

/// The name a file's copy has under `shared/`: number, size and identity
/// (`u` and the table's unique id, or `x` and the 64-bit xxh3 of the
/// file's bytes, read here, for rows and for tables written before unique
/// ids).
fn store_name(fs: &dyn FileSystem, f: &SourceFile) -> Result<String> {
    let (ext, unique) = match f.kind {
        Kind::Table => {
            let file = fs.open_random(&f.path)?;
            let cache = Arc::new(BlockCache::new(0));
            let t = Table::open(file, f.path.clone(), f.number, cache, true)?;
            ("table", t.properties().unique_id)
        }
        Kind::Row => ("row", 0),
    };
    let name = if unique != 0 {
        format!("{:06}-{}-u{unique:016x}.{ext}", f.number, f.size)
    } else {
        let (_, _, hash) = hash_file(fs, &f.path)?;
        format!("{:06}-{}-x{hash:016x}.{ext}", f.number, f.size)
    };
    debug_assert!(is_plain_name(&name));
    Ok(name)
}

/// `Corruption` naming `path` unless `n` bytes with crc32c `crc` are what
/// `f` records.
fn check(path: &Path, f: &Entry, n: u64, crc: u32) -> Result<()> {
    if n != f.size {
        return Err(Error::corruption(
            path,
            n.min(f.size),
            format!("{n} bytes where the backup recorded {}", f.size),
        ));
    }
    if crc != f.crc {
        return Err(Error::corruption(
            path,
            0,
            format!("crc32c {crc:08x} where the backup recorded {:08x}", f.crc),
        ));
    }
    Ok(())
}

/// The length, crc32c and xxh3 (64-bit) of a file.
fn hash_file(fs: &dyn FileSystem, path: &Path) -> Result<(u64, u32, u64)> {
    let mut src = fs.open_sequential(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut n, mut crc) = (0u64, 0u32);
    let mut xxh = xxhash_rust::xxh3::Xxh3::new();
    loop {
        let got = src.read(&mut buf)?;
        if got == 0 {
            return Ok((n, crc, xxh.digest()));
        }
        crc = crc32c::crc32c_append(crc, &buf[..got]);
        xxh.update(&buf[..got]);
        n += got as u64;
    }
}

/// Copies `from` (on `from_fs`) to a new file `to` (on `to_fs`), syncs it
/// and returns its length and crc32c. On an error `to` is removed.
fn copy_summing(
    from_fs: &dyn FileSystem,
    from: &Path,
    to_fs: &dyn FileSystem,
    to: &Path,
) -> Result<(u64, u32)> {
    let copied = (|| {
        let mut src = from_fs.open_sequential(from)?;
        let mut dst = to_fs.create(to)?;
        let mut buf = vec![0u8; 1 << 20];
        let (mut n, mut crc) = (0u64, 0u32);
        loop {
            let got = src.read(&mut buf)?;
            if got == 0 {
                break;
            }
            let chunk = &buf[..got];
            crc = crc32c::crc32c_append(crc, chunk);
            dst.append(chunk)?;
            n += got as u64;
        }
        dst.sync()?;
        Ok((n, crc))
    })();
    if copied.is_err() {
        let _ = to_fs.remove_file(to);
    }
    copied
}
