//! An in-memory [`FileSystem`] that can simulate a process crash and a power
//! loss, the way LevelDB's fault-injection environment does.
//!
//! Model (per file, an *inode*):
//! - appends go to a per-handle buffer until `flush` (like [`PosixFs`]'s
//!   user-space buffer: a process crash loses them);
//! - `flush` moves them into the inode's contents (the "page cache": they
//!   survive a process crash, not a power loss);
//! - `sync` makes the inode's contents durable (they survive a power loss).
//!
//! Directory entries (creations, renames, removals) change the directory's
//! *current* entries at once and become durable only when that directory is
//! synced with `sync_dir`. A power loss reverts every directory to its
//! durable entries and every surviving file to its durable contents. A disk
//! may also have written back some unsynced directory changes before the
//! power went: [`CrashKind::PowerLossDirPrefix`] keeps a random prefix of
//! them, in the order they were made, which catches a removal made durable
//! before the edit that allows it.
//!
//! Simplifications: `create` always makes a fresh inode (what the engine
//! does: it never rewrites a file in place), so files are append-only and
//! "durable contents" is a prefix length; directories themselves are durable
//! as soon as they are created. Locks are in memory.
//!
//! [`MemFs::crash_at`] arms a crash point: when the counter of mutating
//! operations reaches `n`, the state a power loss (or a process crash) would
//! leave at that instant is captured atomically, while the engine runs on.
//! [`MemFs::record_ops`] keeps a journal of the mutating operations (which
//! thread, which file), so a test can tell what work a crash point hit.
//!
//! [`PosixFs`]: super::PosixFs

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod files;

/// What a simulated crash keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// The process died; the OS kept running: every flushed byte and every
    /// directory change survives, unflushed handle buffers are lost.
    Process,
    /// The machine lost power: only synced file contents and synced
    /// directory entries survive.
    PowerLoss,
    /// A power loss where the disk had already written back a random prefix
    /// of each file's unsynced tail (seeded). Directory changes are still
    /// all-or-nothing per `sync_dir`.
    PowerLossPartial(u64),
    /// A power loss where the disk had already written back a random prefix
    /// (seeded), in operation order across all directories, of the
    /// directory changes made since each directory's last `sync_dir`:
    /// creations, renames and removals. File contents are the synced ones.
    /// A removal (of a log, a table, a manifest) can so be durable while the
    /// manifest edit that made the file obsolete is not.
    PowerLossDirPrefix(u64),
    /// A power loss where the disk had written back a random subset of the
    /// 4 KiB pages of each write-ahead log's unsynced tail (seeded), in no
    /// particular order, and the log was longer than its records (its
    /// blocks reserved ahead, `FileSystem::create_log`): pages not written
    /// back read as zeros, and so do up to 64 KiB past the end. What a
    /// zero-filled or mapped log can show after a power loss. Other files
    /// keep a random prefix of their unsynced tail, as in
    /// `PowerLossPartial`; directory changes are all-or-nothing per
    /// `sync_dir`.
    PowerLossScattered(u64),
}

/// The kind of a mutating file operation (see [`MemFs::record_ops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOp {
    Create,
    Append,
    Flush,
    Sync,
    Rename,
    Remove,
    SyncDir,
}

/// One mutating operation of the journal: its number (the value of
/// [`MemFs::ops`] once it was counted), kind, path (the target of a rename,
/// the directory of a `sync_dir`) and the name of the thread that made it.
#[derive(Debug, Clone)]
pub struct OpRecord {
    pub n: u64,
    pub op: MemOp,
    pub path: PathBuf,
    pub thread: String,
}

/// An unsynced directory change, in the order made (`seq`).
#[derive(Debug, Clone)]
struct DirChange {
    seq: u64,
    /// Entries removed, then entries inserted (a rename within one
    /// directory is one change: both or neither).
    remove: Option<String>,
    insert: Option<(String, u64)>,
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// Length of the prefix of `data` that is durable.
    durable: usize,
    /// Made by `create_log` (see `CrashKind::PowerLossScattered`).
    log: bool,
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Debug, Default, Clone)]
struct Dir {
    current: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    /// Changes since the last `sync_dir`, oldest first.
    pending: Vec<DirChange>,
}

impl Dir {
    fn change(&mut self, seq: u64, remove: Option<String>, insert: Option<(String, u64)>) {
        if let Some(name) = &remove {
            self.current.remove(name);
        }
        if let Some((name, ino)) = &insert {
            self.current.insert(name.clone(), *ino);
        }
        self.pending.push(DirChange {
            seq,
            remove,
            insert,
        });
    }

    /// The durable entries plus the pending changes numbered below `cut`.
    fn entries_until(&self, cut: u64) -> BTreeMap<String, u64> {
        let mut e = self.durable.clone();
        for c in self.pending.iter().take_while(|c| c.seq < cut) {
            if let Some(name) = &c.remove {
                e.remove(name);
            }
            if let Some((name, ino)) = &c.insert {
                e.insert(name.clone(), *ino);
            }
        }
        e
    }
}

#[derive(Debug, Default)]
struct State {
    dirs: BTreeMap<PathBuf, Dir>,
    inodes: HashMap<u64, InodeRef>,
    next_inode: u64,
    locks: BTreeSet<PathBuf>,
    /// Mutating operations so far (create, append, flush, sync, rename,
    /// remove, sync_dir).
    ops: u64,
    crash_at: Option<(u64, CrashKind)>,
    captured: Option<MemFs>,
    /// Directory changes made so far (orders `DirChange::seq`).
    dir_changes: u64,
    journal: Option<Vec<OpRecord>>,
}

/// The in-memory file system. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

fn not_found(path: &Path) -> Error {
    Error::io(path, std::io::Error::from(ErrorKind::NotFound))
}

fn split(path: &Path) -> Result<(&Path, String)> {
    let parent = path.parent().ok_or_else(|| not_found(path))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| not_found(path))?;
    Ok((parent, name.to_string()))
}

/// `data` as a power loss may leave a log whose blocks were reserved
/// ahead: the synced prefix, then each 4 KiB page of the rest either
/// written back or still zeros (one coin per page), then up to 64 KiB of
/// zeros.
fn scattered(data: &[u8], durable: usize, seed: &mut u64) -> Vec<u8> {
    const PAGE: usize = 4096;
    let mut out = data.to_vec();
    let mut page = durable / PAGE * PAGE;
    while page < out.len() {
        let end = (page + PAGE).min(out.len());
        if splitmix(seed) & 1 == 0 {
            if let Some(unsynced) = out.get_mut(page.max(durable)..end) {
                unsynced.fill(0);
            }
        }
        page = end;
    }
    let reserved = (splitmix(seed) % (64 << 10)) as usize;
    out.resize(out.len() + reserved, 0);
    out
}

/// splitmix64: a tiny seeded generator (no dependency).
pub(crate) fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl State {
    fn inode(&self, path: &Path) -> Result<InodeRef> {
        let (parent, name) = split(path)?;
        self.dirs
            .get(parent)
            .and_then(|d| d.current.get(&name))
            .and_then(|i| self.inodes.get(i))
            .cloned()
            .ok_or_else(|| not_found(path))
    }

    fn dir_mut(&mut self, path: &Path) -> Result<&mut Dir> {
        self.dirs.get_mut(path).ok_or_else(|| not_found(path))
    }

    /// Counts a mutating operation (journals it when asked); captures the
    /// crash state when armed.
    fn tick(&mut self, op: MemOp, path: &Path) {
        self.ops += 1;
        if let Some(j) = &mut self.journal {
            j.push(OpRecord {
                n: self.ops,
                op,
                path: path.to_path_buf(),
                thread: std::thread::current()
                    .name()
                    .unwrap_or("unnamed")
                    .to_string(),
            });
        }
        if let Some((at, kind)) = self.crash_at {
            if self.ops >= at && self.captured.is_none() {
                self.captured = Some(self.crashed(kind));
                self.crash_at = None;
            }
        }
    }

    /// A directory change numbered `seq` from now.
    fn next_change(&mut self) -> u64 {
        self.dir_changes += 1;
        self.dir_changes
    }

    /// The state a crash of `kind` would leave, as a new file system.
    fn crashed(&self, kind: CrashKind) -> MemFs {
        let mut seed = match kind {
            CrashKind::PowerLossPartial(s)
            | CrashKind::PowerLossDirPrefix(s)
            | CrashKind::PowerLossScattered(s) => s,
            _ => 0,
        };
        // For `PowerLossDirPrefix`: the unsynced directory changes numbered
        // below `cut` (of all directories) reached the disk.
        let cut = match kind {
            CrashKind::PowerLossDirPrefix(_) => {
                let mut seqs: Vec<u64> = self
                    .dirs
                    .values()
                    .flat_map(|d| d.pending.iter().map(|c| c.seq))
                    .collect();
                seqs.sort_unstable();
                let keep = (splitmix(&mut seed) % (seqs.len() as u64 + 1)) as usize;
                seqs.get(keep).copied().unwrap_or(u64::MAX)
            }
            _ => 0,
        };
        let mut out = State {
            next_inode: self.next_inode,
            ..State::default()
        };
        for (path, dir) in &self.dirs {
            let entries = match kind {
                CrashKind::Process => dir.current.clone(),
                CrashKind::PowerLossDirPrefix(_) => dir.entries_until(cut),
                _ => dir.durable.clone(),
            };
            for ino in entries.values() {
                if out.inodes.contains_key(ino) {
                    continue;
                }
                let Some(src) = self.inodes.get(ino) else {
                    continue;
                };
                let src = src.lock();
                let keep = match kind {
                    CrashKind::Process => src.data.len(),
                    CrashKind::PowerLoss | CrashKind::PowerLossDirPrefix(_) => src.durable,
                    CrashKind::PowerLossPartial(_) | CrashKind::PowerLossScattered(_) => {
                        let tail = (src.data.len() - src.durable) as u64;
                        src.durable + (splitmix(&mut seed) % (tail + 1)) as usize
                    }
                };
                let data = match kind {
                    CrashKind::PowerLossScattered(_) if src.log => {
                        scattered(&src.data, src.durable, &mut seed)
                    }
                    _ => src.data.get(..keep).unwrap_or(&src.data).to_vec(),
                };
                out.inodes.insert(
                    *ino,
                    Arc::new(Mutex::new(Inode {
                        durable: data.len(),
                        data,
                        log: src.log,
                    })),
                );
            }
            out.dirs.insert(
                path.clone(),
                Dir {
                    current: entries.clone(),
                    durable: entries,
                    pending: Vec::new(),
                },
            );
        }
        MemFs {
            state: Arc::new(Mutex::new(out)),
        }
    }
}

impl MemFs {
    /// An empty file system (the root `/` exists).
    pub fn new() -> Self {
        let fs = MemFs::default();
        fs.state
            .lock()
            .dirs
            .insert(PathBuf::from("/"), Dir::default());
        fs
    }

    /// The state after a power loss now: unsynced file tails dropped and
    /// unsynced directory changes reverted. `self` is unchanged.
    pub fn power_loss(&self) -> MemFs {
        self.state.lock().crashed(CrashKind::PowerLoss)
    }

    /// The state a crash of `kind` would leave now. `self` is unchanged.
    pub fn crash_clone(&self, kind: CrashKind) -> MemFs {
        self.state.lock().crashed(kind)
    }

    /// Arms a crash point: when the mutating-operation counter reaches `n`
    /// the crash state is captured (see [`captured`](Self::captured)).
    pub fn crash_at(&self, n: u64, kind: CrashKind) {
        let mut st = self.state.lock();
        st.captured = None;
        st.crash_at = Some((n, kind));
        if st.ops >= n {
            st.captured = Some(st.crashed(kind));
            st.crash_at = None;
        }
    }

    /// The state captured by an armed crash point, once reached.
    pub fn captured(&self) -> Option<MemFs> {
        self.state.lock().captured.clone()
    }

    /// True once an armed crash point has been reached.
    pub fn crashed(&self) -> bool {
        self.state.lock().captured.is_some()
    }

    /// Mutating operations so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Starts (`true`, with an empty journal) or stops keeping the journal
    /// of mutating operations.
    pub fn record_ops(&self, on: bool) {
        self.state.lock().journal = on.then(Vec::new);
    }

    /// The journal of mutating operations since `record_ops(true)`, oldest
    /// first (empty when not recording).
    pub fn journal(&self) -> Vec<OpRecord> {
        self.state.lock().journal.clone().unwrap_or_default()
    }

    /// Directory changes (creations, renames, removals) not yet made durable
    /// by a `sync_dir`, in all directories.
    pub fn unsynced_dir_changes(&self) -> usize {
        self.state
            .lock()
            .dirs
            .values()
            .map(|d| d.pending.len())
            .sum()
    }

    /// Current contents of a file (flushed bytes).
    pub fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        let ino = self.state.lock().inode(path)?;
        let data = ino.lock().data.clone();
        Ok(data)
    }

    /// Replaces byte `offset` of a file with `f(byte)` (to simulate a bad
    /// sector); the change counts as durable.
    pub fn corrupt(&self, path: &Path, offset: usize, f: impl Fn(u8) -> u8) -> Result<()> {
        let ino = self.state.lock().inode(path)?;
        let mut ino = ino.lock();
        let b = ino
            .data
            .get_mut(offset)
            .ok_or_else(|| Error::io(path, std::io::Error::from(ErrorKind::UnexpectedEof)))?;
        *b = f(*b);
        Ok(())
    }

    /// Total bytes of the current contents of all files.
    pub fn total_bytes(&self) -> u64 {
        let st = self.state.lock();
        let mut seen = BTreeSet::new();
        let mut total = 0;
        for d in st.dirs.values() {
            for ino in d.current.values() {
                if seen.insert(*ino) {
                    if let Some(i) = st.inodes.get(ino) {
                        total += i.lock().data.len() as u64;
                    }
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileSystem;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn unsynced_tail_and_unsynced_creation_are_lost() {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/db")).unwrap();
        let mut f = fs.create(&p("/db/a")).unwrap();
        f.append(b"hello").unwrap();
        f.sync().unwrap();
        f.append(b" world").unwrap();
        f.flush().unwrap();
        // File synced, directory not: the file is gone after power loss.
        assert!(!fs.power_loss().exists(&p("/db/a")));
        assert_eq!(
            fs.crash_clone(CrashKind::Process)
                .read_file(&p("/db/a"))
                .unwrap(),
            b"hello world"
        );
        fs.sync_dir(&p("/db")).unwrap();
        let after = fs.power_loss();
        assert_eq!(after.read_file(&p("/db/a")).unwrap(), b"hello");
        // Unflushed appends are lost even in a process crash.
        f.append(b"!").unwrap();
        assert_eq!(
            fs.crash_clone(CrashKind::Process)
                .read_file(&p("/db/a"))
                .unwrap(),
            b"hello world"
        );
    }

    #[test]
    fn rename_and_remove_revert_without_sync_dir() {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let mut f = fs.create(&p("/d/x.tmp")).unwrap();
        f.append(b"1").unwrap();
        f.sync().unwrap();
        drop(f);
        fs.rename(&p("/d/x.tmp"), &p("/d/x")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        let mut g = fs.create(&p("/d/y.tmp")).unwrap();
        g.append(b"2").unwrap();
        g.sync().unwrap();
        drop(g);
        fs.rename(&p("/d/y.tmp"), &p("/d/x")).unwrap();
        fs.remove_file(&p("/d/y.tmp")).unwrap_err();
        let lost = fs.power_loss();
        assert_eq!(lost.read_file(&p("/d/x")).unwrap(), b"1");
        assert!(!lost.exists(&p("/d/y.tmp")));
        fs.sync_dir(&p("/d")).unwrap();
        assert_eq!(fs.power_loss().read_file(&p("/d/x")).unwrap(), b"2");
        fs.remove_file(&p("/d/x")).unwrap();
        assert!(fs.power_loss().exists(&p("/d/x")));
    }

    #[test]
    fn dir_prefix_crash_keeps_unsynced_changes_in_order() {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let mut f = fs.create(&p("/d/old")).unwrap();
        f.append(b"o").unwrap();
        f.sync().unwrap();
        drop(f);
        fs.sync_dir(&p("/d")).unwrap();
        // Unsynced, in this order: create a, rename a -> b, remove old.
        let mut a = fs.create(&p("/d/a")).unwrap();
        a.append(b"A").unwrap();
        a.sync().unwrap();
        drop(a);
        fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
        fs.remove_file(&p("/d/old")).unwrap();
        assert_eq!(fs.unsynced_dir_changes(), 3);
        // Every seed keeps one of the four prefixes, and only those.
        let mut seen = BTreeSet::new();
        for seed in 0..64 {
            let c = fs.crash_clone(CrashKind::PowerLossDirPrefix(seed));
            let mut names = c.list_dir(&p("/d")).unwrap();
            names.sort();
            for n in &names {
                // Every kept entry opens, with its synced contents.
                let data = c.read_file(&p("/d").join(n)).unwrap();
                assert_eq!(data, if n == "old" { b"o" } else { b"A" });
            }
            seen.insert(names);
        }
        let want: BTreeSet<Vec<String>> =
            [vec!["old"], vec!["a", "old"], vec!["b", "old"], vec!["b"]]
                .into_iter()
                .map(|v| v.into_iter().map(String::from).collect())
                .collect();
        assert_eq!(seen, want);
        // A created-then-removed file may survive in a prefix that stops
        // between the two: its inode is kept for that.
        let mut t = fs.create(&p("/d/t")).unwrap();
        t.append(b"T").unwrap();
        t.sync().unwrap();
        drop(t);
        fs.remove_file(&p("/d/t")).unwrap();
        let with_t = (0..64)
            .map(|seed| fs.crash_clone(CrashKind::PowerLossDirPrefix(seed)))
            .find(|c| c.exists(&p("/d/t")))
            .expect("some prefix keeps t");
        assert_eq!(with_t.read_file(&p("/d/t")).unwrap(), b"T");
        fs.sync_dir(&p("/d")).unwrap();
        assert_eq!(fs.unsynced_dir_changes(), 0);
        let c = fs.crash_clone(CrashKind::PowerLossDirPrefix(1));
        assert_eq!(c.list_dir(&p("/d")).unwrap(), vec!["b".to_string()]);
    }

    #[test]
    fn journal_records_each_mutating_operation() {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        fs.record_ops(true);
        let mut f = fs.create(&p("/d/x.tmp")).unwrap();
        f.append(b"1").unwrap();
        f.flush().unwrap();
        f.sync().unwrap();
        drop(f);
        fs.rename(&p("/d/x.tmp"), &p("/d/x")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        fs.remove_file(&p("/d/x")).unwrap();
        let j = fs.journal();
        let ops: Vec<(u64, MemOp, &str)> = j
            .iter()
            .map(|r| (r.n, r.op, r.path.to_str().unwrap()))
            .collect();
        assert_eq!(
            ops,
            vec![
                (1, MemOp::Create, "/d/x.tmp"),
                (2, MemOp::Append, "/d/x.tmp"),
                (3, MemOp::Flush, "/d/x.tmp"),
                (4, MemOp::Sync, "/d/x.tmp"),
                (5, MemOp::Rename, "/d/x"),
                (6, MemOp::SyncDir, "/d"),
                (7, MemOp::Remove, "/d/x"),
            ]
        );
        assert!(j.iter().all(|r| r.thread == j[0].thread));
        fs.record_ops(false);
        assert!(fs.journal().is_empty());
    }

    #[test]
    fn crash_point_captures_state_and_locks_are_exclusive() {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        fs.crash_at(3, CrashKind::PowerLoss);
        let mut f = fs.create(&p("/d/a")).unwrap(); // 1
        f.append(b"ab").unwrap(); // 2
        assert!(!fs.crashed());
        f.sync().unwrap(); // 3: captured after the sync
        assert!(fs.crashed());
        let l = fs.lock(&p("/d/LOCK")).unwrap();
        assert!(matches!(fs.lock(&p("/d/LOCK")), Err(Error::Locked(_))));
        drop(l);
        fs.lock(&p("/d/LOCK")).unwrap();
    }
}
