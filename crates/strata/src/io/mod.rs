//! The file layer. Every file operation of the engine goes through
//! [`FileSystem`], so tests can inject faults and simulate power loss, and a
//! second tier (level 0's fast directory) can use another implementation.
//!
//! Thread-safety: a `FileSystem` and a `RandomAccessFile` are shared between
//! threads; a `WritableFile` and a `SequentialFile` have one owner.

pub mod fault;
pub mod mem;
mod memory;
mod posix;

pub use fault::{FaultError, FaultFs, FaultHandle};
pub use mem::{CrashKind, MemFs, MemOp, OpRecord};
pub use memory::memory_limit;
pub use posix::PosixFs;
#[cfg(test)]
pub(crate) use posix::{fs_type, TMPFS};

use crate::error::{Error, Result};
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

/// A file opened for appending.
pub trait WritableFile: Send {
    /// Appends `data` (may stay in a user-space buffer until `flush`).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered data to the operating system: it survives a process crash.
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes the data durable (`fdatasync`): it survives power loss.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Makes the file read as zeros from the end of the appended bytes (or
    /// of an earlier preallocation) up to offset `upto`, its blocks
    /// allocated, without moving the append position, so that later
    /// appends there do not grow the file: their `sync` then writes little
    /// file metadata. Plain files write zeros; a mapped log reserves the
    /// blocks with `fallocate(2)` (which writes nothing, see `PosixLog`). The
    /// file is then longer than [`len`](Self::len); readers of such a file
    /// must take a zero-filled rest as its end (the WAL reader does).
    /// Nothing is synced here, and a failure leaves the file usable (the
    /// zeros written so far are harmless). The default does nothing (the
    /// in-memory file system does not model it).
    fn preallocate(&mut self, upto: u64) -> Result<()> {
        let _ = upto;
        Ok(())
    }
    /// Reserves the file's blocks up to offset `upto` where that writes no
    /// data (`fallocate(2)` for a mapped log), so that appends up to there
    /// do not wait on the file system for space; elsewhere, and by default,
    /// it does nothing. A failure leaves the file usable: the append that
    /// needs the room reserves it or reports the error.
    fn reserve(&mut self, upto: u64) -> Result<()> {
        let _ = upto;
        Ok(())
    }
}

/// A read-only memory map of a whole file (see [`FileSystem::open_mapped`]).
/// It dereferences to the [`memmap2::Mmap`]; dropping it releases its pages
/// in pieces before the unmap (see [`release_in_pieces`]).
#[derive(Debug)]
pub struct Mapping(memmap2::Mmap);

impl Mapping {
    pub fn new(map: memmap2::Mmap) -> Self {
        Mapping(map)
    }
}

impl std::ops::Deref for Mapping {
    type Target = memmap2::Mmap;
    fn deref(&self) -> &memmap2::Mmap {
        &self.0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let len = self.0.len();
        release_in_pieces(len, |at, n| {
            // SAFETY: the map is being dropped: no reference into it is
            // left (every `&[u8]` view borrows the `Arc<Mapping>`, whose
            // last owner is running this), so no one can see the pages the
            // advice takes away; the file's bytes stay in the page cache.
            unsafe {
                self.0
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, n)
            }
        });
    }
}

/// Pages released per call of [`release_in_pieces`]: one page table's worth.
const RELEASE_PIECE: usize = 2 << 20;

/// Drops the page-table entries of a map about to be unmapped, in
/// [`RELEASE_PIECE`] pieces (`f(offset, len)`, `MADV_DONTNEED`; errors are
/// ignored: the unmap then does it all). An unmap of a large map whose
/// pages are mapped walks them all while it holds the process's memory-map
/// lock (long enough to show in put latencies for a 64 MiB log, why:
/// docs/design/2026-11-29-code-comment-measurements.md §release-in-pieces), and
/// a writer that meanwhile touches a new page of the next log (a page
/// fault, which takes that lock) waits behind it. `MADV_DONTNEED` holds
/// the lock for reading, one piece at a time, so a fault or a map change
/// waits at most for a piece, and the unmap that follows finds nothing
/// left to walk.
/// A shared file map loses nothing: its dirty pages stay in the page cache
/// (the kernel marks them dirty as it drops the entries).
pub(crate) fn release_in_pieces(
    len: usize,
    mut f: impl FnMut(usize, usize) -> std::io::Result<()>,
) {
    let mut at = 0;
    while at < len {
        let n = RELEASE_PIECE.min(len - at);
        if f(at, n).is_err() {
            return;
        }
        at += n;
        crate::sched::yield_point();
    }
}

/// A file read by offset, from many threads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Fills `buf` from `offset` for a reader going through the file in
    /// order (a scan's or a compaction's pieces), after
    /// [`prefetch`](Self::prefetch) asked for what comes next. The default
    /// is [`read_exact_at`](Self::read_exact_at); a file read directly
    /// reads these through the page cache, where the read-ahead asked for
    /// lands.
    fn read_sequential_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_exact_at(offset, buf)
    }
    /// The whole file mapped into memory, when it was opened that way:
    /// readers may then use its bytes in place instead of copying them.
    fn mapping(&self) -> Option<&Arc<Mapping>> {
        None
    }
    /// Tells the OS that this file is read at random: a page fault of its
    /// mapping, or a read of the file, then reads what it needs alone
    /// instead of the pages around or after it (which, when memory is
    /// short, evict one another before they are used; `POSIX_FADV_RANDOM`
    /// for a file read with pread). No-op where the OS is not asked.
    fn advise_random(&self) {}
    /// Asks the OS to start reading `[offset, offset + len)` of the file
    /// into memory in the background (iterators call it ahead of their
    /// position: `MADV_WILLNEED` on a mapping, `POSIX_FADV_WILLNEED` on a
    /// file read with pread). No-op where the OS is not asked.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// Asks the OS to back the mapping with huge pages where the page cache
    /// allows (`Options::mmap_huge`). From then on [`prefetch`] asks for
    /// nothing (the fault path reads ahead in huge pieces, while
    /// `MADV_WILLNEED` would fill the cache with base pages that cannot be
    /// mapped huge). True when the OS took the advice; false (and nothing
    /// changed) where the file is not mapped or the OS refused.
    ///
    /// [`prefetch`]: Self::prefetch
    fn advise_huge(&self) -> bool {
        false
    }
    /// Reads `[offset, offset + len)` of the mapping into memory and maps
    /// it, returning when done (warming, off the read path, after
    /// [`prefetch`](Self::prefetch) queued the reads: a fault in a map
    /// advised random would read page by page). No-op where the file is
    /// not mapped or the OS cannot.
    fn populate(&self, _offset: u64, _len: u64) {}
    /// True when reads bypass the page cache (direct I/O, see
    /// [`FileSystem::open_direct`]).
    fn direct(&self) -> bool {
        false
    }
    /// The file's size when it was opened.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read front to back.
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; 0 means end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
}

/// An exclusive lock on a directory, released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// The operations the engine performs on a directory tree.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates `path` and its parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) a write-ahead log for appending. Only WALs
    /// are created this way: a writer may reserve space past the appended
    /// bytes, which then read as zeros until it is dropped (the WAL reader
    /// takes a zero-filled rest as the log's end). `PosixFs` writes them
    /// through a shared memory map; the default is [`FileSystem::create`].
    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Opens an existing file for random reads.
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens an existing, immutable file for random reads through a memory
    /// map where the implementation has one (the OS file system); the
    /// default is [`FileSystem::open_random`], so simulated and
    /// fault-injecting file systems see every read as a call.
    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }
    /// Opens an existing, immutable file for random reads that bypass the
    /// page cache (direct I/O) where the implementation and the file
    /// system allow it; otherwise (and by default) as
    /// [`FileSystem::open_random`]. For tables larger than the page
    /// cache's room: their blocks are cached only by the block cache.
    fn open_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }
    /// Opens an existing file for sequential reads.
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes `to` (which must not exist) hold the bytes of `from`, an
    /// existing file that no one changes meanwhile: a hard link where the
    /// implementation and the file system allow it, otherwise a copy,
    /// synced. Returns the bytes copied (0 for a link). The new directory
    /// entry is durable only after `sync_dir`. By default a copy
    /// ([`copy_file`]).
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<u64> {
        copy_file(self, from, to)
    }
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Removes a file that this process no longer maps or reads (an
    /// obsolete log or table whose last handle is closed), and may first
    /// give its cached pages back a piece at a time (`PosixFs` shrinks
    /// it from its end, see `posix.rs`). Only for such files: a map of a
    /// shrunk file faults (SIGBUS) past its new end.
    fn remove_unused_file(&self, path: &Path) -> Result<()> {
        self.remove_file(path)
    }
    /// Names of the entries of a directory.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>>;
    /// True when `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); `Error::Locked`
    /// when another process holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
}

/// Copies `from` to a new file `to` through `fs`, 1 MiB at a time, and
/// syncs it; returns the bytes copied. On an error `to` is removed.
pub fn copy_file<F: FileSystem + ?Sized>(fs: &F, from: &Path, to: &Path) -> Result<u64> {
    if fs.exists(to) {
        return Err(Error::InvalidArgument(format!(
            "{} exists: not copied over",
            to.display()
        )));
    }
    let copied = (|| {
        let mut src = fs.open_sequential(from)?;
        let mut dst = fs.create(to)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let got = src.read(&mut buf)?;
            if got == 0 {
                break;
            }
            dst.append(&buf[..got])?;
            n += got as u64;
        }
        dst.sync()?;
        Ok(n)
    })();
    if copied.is_err() {
        let _ = fs.remove_file(to);
    }
    copied
}

/// Creates `dir` and every missing parent, and syncs the parent of each
/// directory it created, so their entries survive a power loss.
pub fn create_dir_durable(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let mut created: Vec<&Path> = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !fs.exists(p)) {
        created.push(p);
        d = p.parent();
    }
    fs.create_dir_all(dir)?;
    for p in created {
        if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Reads a whole (small) file.
pub fn read_all(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    let mut f = fs.open_sequential(path)?;
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut chunk)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    }
}

/// Writes `data` to `path` atomically and durably: temp file, sync, rename,
/// sync directory.
pub fn write_atomic(fs: &dyn FileSystem, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs.create(&tmp)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &dir.join(name))?;
    fs.sync_dir(dir)
}
