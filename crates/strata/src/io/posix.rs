//! The operating system's file system.

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Appends go through a user-space buffer of up to this size, and each
/// `write(2)` ends at a multiple of it in the file (unless the caller
/// flushes or syncs), so the page cache can hold the file in folios of
/// this size. 2 MiB pieces (folios a map advised `MADV_HUGEPAGE` could map
/// with one PMD entry) make a load of 4 KiB values slower, while warm
/// lookups gain nothing from PMD-mapped tables (why:
/// docs/design/2026-11-29-code-comment-measurements.md §write-buffer).
const WRITE_BUFFER: usize = 256 << 10;

/// [`FileSystem`] over `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

struct PosixWritable {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    len: u64,
    /// End of the zeros written by `preallocate` (0 when none).
    zeroed: u64,
    /// A write or sync failed. The file may end in part of what was being
    /// written (a short write before ENOSPC), so nothing more may follow it:
    /// writing the buffer again would put whole records after a torn one,
    /// which recovery must treat as damage in the middle of a log.
    failed: bool,
}

impl PosixWritable {
    fn new(path: &Path, file: File) -> Self {
        PosixWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
            zeroed: 0,
            failed: false,
        }
    }

    fn failed_before(&self) -> Error {
        failed_before(&self.path)
    }

    /// Runs `op` unless an earlier call failed; a failure fails the file.
    fn guarded(&mut self, op: impl FnOnce(&mut Self) -> std::io::Result<()>) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        op(self).map_err(|e| {
            self.failed = true;
            self.buf.clear();
            Error::io(&self.path, e)
        })
    }

    fn write_out(&mut self) -> Result<()> {
        if self.buf.is_empty() && !self.failed {
            return Ok(());
        }
        self.guarded(|w| {
            w.file.write_all(&w.buf)?;
            w.buf.clear();
            Ok(())
        })
    }
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        // File offset of the buffer's first byte, and the bytes from there
        // to the next multiple of `WRITE_BUFFER`.
        let start = self.len - self.buf.len() as u64;
        let mut limit = WRITE_BUFFER - (start % WRITE_BUFFER as u64) as usize;
        self.len += data.len() as u64;
        let mut data = data;
        loop {
            let room = limit - self.buf.len();
            if data.len() < room {
                self.buf.extend_from_slice(data);
                return Ok(());
            }
            if self.buf.is_empty() {
                // Whole pieces straight from `data`, ending on a boundary.
                let whole = limit + (data.len() - limit) / WRITE_BUFFER * WRITE_BUFFER;
                let (head, rest) = data.split_at(whole);
                self.guarded(|w| w.file.write_all(head))?;
                data = rest;
            } else {
                let (head, rest) = data.split_at(room);
                self.buf.extend_from_slice(head);
                self.write_out()?;
                data = rest;
            }
            limit = WRITE_BUFFER;
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.guarded(|w| w.file.sync_data())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, upto: u64) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        // Buffered bytes go to `len - buf.len() .. len`: the zeros start
        // at `len` at the earliest and never overlap them.
        zero_ahead(&self.file, &self.path, &mut self.zeroed, self.len, upto)
    }
}

impl Drop for PosixWritable {
    fn drop(&mut self) {
        // Best effort: a writer dropped without flush still hands its bytes to
        // the OS (never after a failure: see `failed`). Errors here cannot be
        // reported; callers that care flush first.
        if !self.failed {
            let _ = self.write_out();
        }
    }
}

/// A mapped log ([`FileSystem::create_log`]) maps its file this many bytes
/// at a time (address space only: pages appear as they are written).
const LOG_WINDOW: u64 = 64 << 20;
/// ...and grows the file, reserving its blocks, this many bytes at a time.
const LOG_RESERVE: u64 = 1 << 20;

/// A write-ahead log written through a shared memory map of its file.
///
/// With `sync` off a WAL group's bytes must survive a process crash, which
/// with a plain file costs one `write(2)` per group, a sizeable share of a
/// small put. Bytes copied into a shared map of the file are in the page
/// cache at once, so they survive a process crash the same way, for the
/// cost of a `memcpy` and a page fault per 4 KiB, several times less per
/// record (why: docs/design/2026-11-29-code-comment-measurements.md §mapped-wal).
///
/// The file is grown 1 MiB ahead of the records with `fallocate(2)`, which
/// reserves its blocks: a full disk is an `ENOSPC` from `append`, never a
/// `SIGBUS` from writing into a sparse page (only on file systems where
/// that holds, see `reserves_blocks`; elsewhere `create_log` returns a
/// plain log). Until then the reserved rest
/// reads as zeros, which the WAL reader takes as the end of the log
/// ([`crate::wal::Reader::zero_filled_end`]). `sync` is `fdatasync(2)` on
/// the file, which on Linux writes back the pages dirtied through the map
/// as well. The map is advised `MADV_RANDOM`: without it the first fault in
/// a window reads around (here zeroed) up to `read_ahead_kb` of pages at
/// once, a stall for the write that touched it (why:
/// docs/design/2026-11-29-code-comment-measurements.md §mapped-wal). Full
/// windows are unmapped only when the log is dropped (after its memtable is
/// flushed, on a background thread), so an unsynced write never waits for
/// an unmap; a sync unmaps the window being written and the appends after
/// it use `pwrite(2)` (see [`SYNCED_APPENDS`]).
/// Dropping the log also cuts the file back to the bytes appended.
struct PosixLog {
    path: PathBuf,
    file: File,
    /// The window being written (`None` before the first append, and
    /// from a sync until appends go back to the map). Shared with the
    /// page filler ([`fill_ahead`]) while it fills a piece of it; only
    /// this log writes its bytes.
    map: Option<Arc<memmap2::MmapRaw>>,
    /// Full windows, kept mapped until the log is dropped.
    retired: Vec<Arc<memmap2::MmapRaw>>,
    /// File offset of `map[0]`.
    map_start: u64,
    len: u64,
    /// The file's size: its blocks up to here are reserved.
    reserved: u64,
    /// A reservation, map or sync failed: nothing more may be appended
    /// (see `PosixWritable::failed`).
    failed: bool,
    /// Appends left to write with `pwrite(2)` rather than through the map
    /// (see [`SYNCED_APPENDS`]).
    written_appends: u32,
    /// Those appends not written yet: they go out in one `pwrite(2)` at
    /// the next flush or sync (or before an append through the map), from
    /// file offset `len - pending.len()`. A synced put is four appends (the
    /// last sync's mark and the record, each a header and a body): written
    /// one by one they were four system calls.
    pending: Vec<u8>,
    /// End of the zeros written by `preallocate` (0 when none).
    zeroed: u64,
    /// File offset up to which the window's pages were handed to the page
    /// filler ([`FILL_STEP`]).
    filled: u64,
    /// The page filler (`None` without one: the pages then fault).
    filler: Option<Arc<page_filler::Filler>>,
}

/// Pages of a log's window are made present and writable by the page
/// filler thread (`MADV_POPULATE_WRITE`) in pieces of this size, kept
/// [`FILL_AHEAD`] ahead of the appends. The log's blocks are reserved
/// unwritten, so each page of a fresh log is a major fault for the first
/// copy into it. Populating in the writer's thread (one call per 256 KiB)
/// speeds puts up but makes an occasional put wait for the call; from a
/// thread of its own the writer finds the pages present (why:
/// docs/design/2026-11-29-code-comment-measurements.md §wal-page-filler). Populated
/// pages not yet written hold zeros, which the WAL reader takes as the end
/// of the log, as it does the reserved blocks'.
const FILL_STEP: u64 = 256 << 10;

/// How far ahead of the appends the page filler is asked to be.
const FILL_AHEAD: u64 = 2 * FILL_STEP;

/// Appends written with `pwrite(2)` after each sync, which also unmaps the
/// window being written. A synced write through the map pays for the map:
/// the page `fdatasync` writes back is write-protected in the map again,
/// and the next copy faults, so a synced put is slower through the map
/// than with `mmap_writes=false` (why:
/// docs/design/2026-11-29-code-comment-measurements.md §synced-appends). Logs
/// synced on every write (or every few) are thus written with `pwrite`; a
/// log not synced for this many appends goes back to a new window; logs
/// never synced stay on the map.
const SYNCED_APPENDS: u32 = 64;

impl PosixLog {
    /// A log over `file`, just created (empty) at `path`.
    fn new(path: &Path, file: File) -> Self {
        PosixLog {
            path: path.to_path_buf(),
            file,
            map: None,
            retired: Vec::new(),
            map_start: 0,
            len: 0,
            reserved: 0,
            failed: false,
            written_appends: 0,
            pending: Vec::new(),
            zeroed: 0,
            filled: 0,
            filler: page_filler::filler(),
        }
    }

    fn failed_before(&self) -> Error {
        failed_before(&self.path)
    }

    fn fail(&mut self, e: std::io::Error) -> Error {
        self.failed = true;
        Error::io(&self.path, e)
    }

    /// Makes the file at least `upto` bytes long with its blocks reserved.
    fn reserve(&mut self, upto: u64) -> std::io::Result<()> {
        if upto <= self.reserved {
            return Ok(());
        }
        let (Ok(offset), Ok(len)) = (
            libc::off_t::try_from(self.reserved),
            libc::off_t::try_from(upto - self.reserved),
        ) else {
            return Err(std::io::Error::other("log file offset out of range"));
        };
        let rc = loop {
            // SAFETY: a plain system call on a file descriptor this struct
            // owns; no memory is passed.
            let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, offset, len) };
            if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break rc;
            }
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) {
                return Err(e);
            }
            // A file system without fallocate: written zeros reserve the
            // blocks just as well.
            write_zeros(&self.file, self.reserved, upto)?;
        }
        self.reserved = upto;
        Ok(())
    }

    /// Maps the next window, from the append position on.
    fn next_window(&mut self) -> std::io::Result<()> {
        let start = self.len;
        // The map covers `[start, start + LOG_WINDOW)` of a file this
        // struct created and alone writes (the directory LOCK keeps other
        // strata processes out). Its bytes are only reached through
        // `copy_in` (see the SAFETY note there), and `append` writes
        // only below `reserved`, up to which `reserve` made the file long
        // with its blocks allocated, so no access lies past the end of the
        // file or can fault for want of space. What this cannot rule out
        // (pwrite(2) would return `EIO` instead): another program
        // truncating the log, or a device failing a page, either of which
        // faults the process (SIGBUS). `mmap_writes = false` is the choice
        // where that is a real risk.
        let map = memmap2::MmapOptions::new()
            .offset(start)
            .len(LOG_WINDOW as usize)
            .map_raw(&self.file)?;
        // A hint: refused, faults only read around (zero) more pages.
        let _ = map.advise(memmap2::Advice::Random);
        if let Some(full) = self.map.replace(Arc::new(map)) {
            self.retired.push(full);
        }
        self.map_start = start;
        // Pages filled through an earlier window are not in this one.
        self.filled = start;
        Ok(())
    }

    /// Hands the page filler the next [`FILL_STEP`] of the window when the
    /// appends are within [`FILL_AHEAD`] of what it was given, reserving
    /// the blocks first. Best effort: a refused reservation or a busy
    /// filler leaves the pages to fault as the appends reach them (and the
    /// append that needs the room reports the reservation's error).
    fn fill_ahead(&mut self) {
        if self.len + FILL_AHEAD <= self.filled {
            return;
        }
        let Some(map) = self.map.as_ref() else {
            return;
        };
        let window_end = self.map_start + map.len() as u64;
        let from = self.filled.max(self.len);
        let upto = (from + FILL_STEP).min(window_end);
        if upto <= from {
            return;
        }
        if upto > self.reserved && self.reserve(self.reserved + LOG_RESERVE).is_err() {
            return;
        }
        let Some(map) = self.map.as_ref() else {
            return;
        };
        let upto = upto.min(self.reserved);
        let (Ok(at), Ok(n)) = (
            usize::try_from(from - self.map_start),
            usize::try_from(upto - from),
        ) else {
            return;
        };
        if self.filler.as_ref().is_some_and(|f| f.request(map, at, n)) {
            self.filled = upto;
        }
    }

    /// Writes the [`pending`](Self::pending) appends with one `pwrite(2)`
    /// at the end of the records (the page cache is the map's, so later
    /// copies through the map continue after them).
    fn write_pending(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let start = self.len - self.pending.len() as u64;
        if self.len > self.reserved {
            self.reserve(self.len.max(start + LOG_RESERVE))?;
        }
        self.file.write_all_at(&self.pending, start)?;
        self.pending.clear();
        Ok(())
    }

    fn copy_in(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            if self.len >= self.reserved {
                self.reserve(self.len + LOG_RESERVE)?;
            }
            let at = usize::try_from(self.len - self.map_start).unwrap_or(usize::MAX);
            let room = self.map.as_ref().map_or(0, |m| m.len().saturating_sub(at));
            if room == 0 {
                self.next_window()?;
                continue;
            }
            self.fill_ahead();
            let reserved = usize::try_from(self.reserved - self.len).unwrap_or(usize::MAX);
            let n = room.min(reserved).min(data.len());
            let (head, rest) = data.split_at(n);
            let map = self
                .map
                .as_ref()
                .ok_or_else(|| std::io::Error::other("log map missing"))?;
            // SAFETY: `at + n <= map.len()` (`n <= room`), so the copy stays
            // inside the map, and below `reserved`, so inside the file and
            // its allocated blocks (see `next_window`). Only this log writes
            // the map's bytes (the page filler only advises the kernel about
            // its pages), and `&mut self` makes this the only write at a
            // time; no reference into the map is held anywhere, so nothing
            // observes the bytes while they change.
            unsafe {
                std::ptr::copy_nonoverlapping(head.as_ptr(), map.as_mut_ptr().add(at), n);
            }
            self.len += n as u64;
            data = rest;
        }
        Ok(())
    }
}

/// True when `file` lives on a file system where `fallocate(2)` reserves
/// blocks that a write through a map then only fills (ext2/3/4, XFS,
/// tmpfs): there a full disk is an error from `fallocate`. Elsewhere (a
/// copy-on-write file system such as btrfs or ZFS allocates anew at each
/// write; network and FUSE mounts) a fault in a mapped page could raise
/// SIGBUS instead of returning an error, so logs there are written with
/// `write(2)`.
fn reserves_blocks(path: &Path) -> bool {
    matches!(fs_type(path), Some(EXT4 | XFS | TMPFS))
}

const EXT4: u64 = 0xef53;
const XFS: u64 = 0x5846_5342;
const TMPFS: u64 = 0x0102_1994;

/// The `f_type` of the file system the file at `path` lives on
/// (`statfs(2)`).
fn fs_type(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c_path` is a NUL-terminated string and `st` a writable
    // `statfs`, both alive for the duration of the call, which fills `st`.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `statfs` succeeded, so it initialised `st` (and all-zero is
    // a valid `statfs` anyway).
    let st = unsafe { st.assume_init() };
    u64::try_from(st.f_type).ok()
}

/// The running kernel's (major, minor) version, from `uname(2)`.
fn kernel_version() -> Option<(u32, u32)> {
    static VERSION: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let mut u = std::mem::MaybeUninit::<libc::utsname>::zeroed();
        // SAFETY: `u` is a writable `utsname` the call fills.
        if unsafe { libc::uname(u.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: `uname` succeeded and filled `u` (all-zero is valid too).
        let u = unsafe { u.assume_init() };
        let release: String = u
            .release
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8 as char)
            .collect();
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    })
}

/// True when the page cache of the file at `path` holds large folios, so
/// that a map advised `MADV_HUGEPAGE` is filled and mapped in 2 MiB
/// pieces: XFS from Linux 5.18, ext4 from 6.16. Elsewhere the advice would
/// only switch off read-ahead requests and warming for nothing
/// (`Options::mmap_huge`).
fn large_folios(path: &Path) -> bool {
    let Some(v) = kernel_version() else {
        return false;
    };
    match fs_type(path) {
        Some(XFS) => v >= (5, 18),
        Some(EXT4) => v >= (6, 16),
        _ => false,
    }
}

/// `WritableFile::preallocate` for a file whose appends end at `len` and
/// whose zeros written so far end at `zeroed`.
fn zero_ahead(file: &File, path: &Path, zeroed: &mut u64, len: u64, upto: u64) -> Result<()> {
    let from = (*zeroed).max(len);
    if from < upto {
        write_zeros(file, from, upto).map_err(|e| Error::io(path, e))?;
        *zeroed = upto;
    }
    Ok(())
}

/// The error of a call on a file after an earlier write or sync failed.
fn failed_before(path: &Path) -> Error {
    Error::io(
        path,
        std::io::Error::other("an earlier write or sync of this file failed"),
    )
}

/// Writes zeros to `file` over `[from, upto)`.
fn write_zeros(file: &File, from: u64, upto: u64) -> std::io::Result<()> {
    let zeros = [0u8; 64 << 10];
    let mut at = from;
    while at < upto {
        let n = usize::try_from(upto - at).map_or(zeros.len(), |n| n.min(zeros.len()));
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl WritableFile for PosixLog {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        if self.written_appends > 0 {
            self.written_appends -= 1;
            self.pending.extend_from_slice(data);
            self.len += data.len() as u64;
            return Ok(());
        }
        let written = self.write_pending().and_then(|()| self.copy_in(data));
        written.map_err(|e| self.fail(e))
    }

    fn flush(&mut self) -> Result<()> {
        // Bytes in the map are in the page cache already.
        if self.failed {
            return Err(self.failed_before());
        }
        self.write_pending().map_err(|e| self.fail(e))
    }

    fn sync(&mut self) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        self.write_pending().map_err(|e| self.fail(e))?;
        self.file.sync_data().map_err(|e| self.fail(e))?;
        self.written_appends = SYNCED_APPENDS;
        // Unmapped, the synced pages are written back without the map's
        // write protection: with the window kept mapped (even while
        // appending with `pwrite`) synced puts are slower (why:
        // docs/design/2026-11-29-code-comment-measurements.md §synced-appends). The
        // unmap waits for no I/O; a log synced on every write pays it once.
        self.map = None;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, upto: u64) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        // Called for logs that take synced writes: their blocks ahead are
        // reserved and then written with zeros (which the WAL reader takes
        // as the end of the log), so that a sync writes back into blocks
        // already written. Into reserved (unwritten) blocks, the first sync
        // in each 4 KiB block also converts it at I/O completion, which
        // makes a share of synced puts markedly slower (why:
        // docs/design/2026-11-29-code-comment-measurements.md §synced-appends). The
        // zeros cost one sync of 1 MiB per 1 MiB of records. A
        // failed reservation or write here leaves the log usable: the
        // append that needs the room reports it.
        PosixLog::reserve(self, upto).map_err(|e| Error::io(&self.path, e))?;
        zero_ahead(&self.file, &self.path, &mut self.zeroed, self.len, upto)
    }

    fn reserve(&mut self, upto: u64) -> Result<()> {
        if self.failed {
            return Err(self.failed_before());
        }
        PosixLog::reserve(self, upto).map_err(|e| Error::io(&self.path, e))
    }
}

impl Drop for PosixLog {
    fn drop(&mut self) {
        for map in self.retired.iter().chain(self.map.as_ref()) {
            super::release_in_pieces(map.len(), |at, n| {
                // SAFETY: a shared map of the log's file, being dropped: no
                // reference into it is left (appends copy in and return),
                // and its dirty pages stay in the page cache.
                unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, n) }
            });
        }
        self.map = None;
        self.retired.clear();
        // Appends never flushed are written as a buffered file's would be.
        if !self.failed && self.write_pending().is_err() {
            self.failed = true;
        }
        // Best effort: the reserved zeros past the records are harmless
        // (the reader stops there), so an error here loses nothing. After a
        // failure the file is left as it is.
        if !self.failed && self.reserved > self.len {
            let _ = self.file.set_len(self.len);
        }
    }
}

/// What one `ftruncate(2)` takes off a file being removed
/// ([`shrink_in_pieces`]).
const SHRINK_PIECE: u64 = 8 << 20;

/// Before a file larger than [`SHRINK_PIECE`] is removed, takes it down
/// to its first piece a piece at a time from its end, offering the core
/// ([`super::yield_point`]) between pieces. Removing a file frees its
/// cached pages inside one `unlink(2)`, milliseconds of CPU for a table or
/// log of tens of MiB (longer in wall time once its blocks were written,
/// waiting for the discards), during which a writer the scheduler had
/// queued on that core waits (why: docs/design/2026-11-29-code-comment-measurements.md
/// §shrink). A piece costs a fraction of that (RocksDB's `DeleteScheduler`
/// also truncates files in chunks before it deletes them). Only a plain file
/// with one link is shrunk (a hard link made elsewhere, say by a backup,
/// keeps its data); callers ([`FileSystem::remove_unused_file`]) remove a
/// file this process no longer maps, and a crash between the pieces
/// leaves a shorter obsolete file that the next open removes, as it would
/// the whole one. Errors leave the rest to the removal.
fn shrink_in_pieces(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(file) = OpenOptions::new().write(true).open(path) else {
        return;
    };
    let Ok(meta) = file.metadata() else {
        return;
    };
    if !meta.is_file() || meta.nlink() != 1 {
        return;
    }
    let mut len = meta.len();
    while len > SHRINK_PIECE {
        len -= SHRINK_PIECE;
        if file.set_len(len).is_err() {
            return;
        }
        super::yield_point();
    }
}

#[derive(Debug)]
struct PosixRandom {
    path: PathBuf,
    file: File,
    len: u64,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(&self.path, e))
    }

    // Advice is a hint: a kernel that refuses it reads as before, so its
    // errors are ignored.
    fn advise_random(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: posix_fadvise(2) on a descriptor this file owns and keeps
        // open for the call; it reads no user memory.
        unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
    }

    fn prefetch(&self, offset: u64, len: u64) {
        #[cfg(target_os = "linux")]
        if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
            // SAFETY: as in `advise_random`.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    offset,
                    len,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A file read through a memory map.
#[derive(Debug)]
struct PosixMapped {
    path: PathBuf,
    map: Arc<super::Mapping>,
    /// `MADV_HUGEPAGE` was given: `prefetch` asks for nothing.
    huge: std::sync::atomic::AtomicBool,
}

impl PosixMapped {
    /// `[offset, offset + len)` clipped to the map, as (start, len).
    fn clip(&self, offset: u64, len: u64) -> Option<(usize, usize)> {
        let end = self.map.len() as u64;
        let start = offset.min(end);
        let len = len.min(end - start);
        (len > 0).then_some((start as usize, len as usize))
    }
}

impl RandomAccessFile for PosixMapped {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| self.map.get(start..start.checked_add(buf.len())?));
        match src {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read of {} bytes at {offset} past the end", buf.len()),
                ),
            )),
        }
    }

    fn mapping(&self) -> Option<&Arc<super::Mapping>> {
        Some(&self.map)
    }

    // Advice is a hint: a kernel that refuses it reads as before, so its
    // errors are ignored.
    fn advise_random(&self) {
        let _ = self.map.advise(memmap2::Advice::Random);
    }

    fn prefetch(&self, offset: u64, len: u64) {
        if self.huge.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Some((start, len)) = self.clip(offset, len) {
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, start, len);
        }
    }

    fn advise_huge(&self) -> bool {
        #[cfg(target_os = "linux")]
        if large_folios(&self.path) && self.map.advise(memmap2::Advice::HugePage).is_ok() {
            self.huge.store(true, std::sync::atomic::Ordering::Relaxed);
            return true;
        }
        false
    }

    fn populate(&self, offset: u64, len: u64) {
        // Linux 5.14 and later; an older kernel refuses it (EINVAL), and
        // the reads queued by `prefetch` are all there is.
        #[cfg(target_os = "linux")]
        if let Some((start, n)) = self.clip(offset, len) {
            let _ = self
                .map
                .advise_range(memmap2::Advice::PopulateRead, start, n);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }
}

struct PosixSequential {
    path: PathBuf,
    file: File,
}

impl SequentialFile for PosixSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
    }
}

#[derive(Debug)]
struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

impl FileSystem for PosixFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(PosixWritable::new(path, file)))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        if !reserves_blocks(path) {
            return Ok(Box::new(PosixWritable::new(path, file)));
        }
        Ok(Box::new(PosixLog::new(path, file)))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Arc::new(PosixRandom {
            path: path.to_path_buf(),
            file,
            len,
        }))
    }

    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            // An empty file cannot be mapped; reads of it fail either way.
            return self.open_random(path);
        }
        // SAFETY: the map is read-only and only ever made of immutable files
        // (tables are written once, synced, then only read and deleted, and
        // the directory LOCK keeps other strata processes out), so the bytes
        // behind the `&[u8]` views never change. Deleting the file keeps the
        // mapped pages valid. What this cannot rule out, and pread(2) would
        // turn into an `Error::Io` instead: another program truncating or
        // rewriting a table of a live database, or the device failing a read
        // of a mapped page — either faults the process (SIGBUS) or shows it
        // changed bytes. `mmap_reads = false` is the choice for file systems
        // where that is a real risk (network or FUSE mounts).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Ok(Arc::new(PosixMapped {
            path: path.to_path_buf(),
            map: Arc::new(super::Mapping::new(map)),
            huge: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Box::new(PosixSequential {
            path: path.to_path_buf(),
            file,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn remove_unused_file(&self, path: &Path) -> Result<()> {
        shrink_in_pieces(path);
        self.remove_file(path)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::io(path, e))? {
            let entry = entry.map_err(|e| Error::io(path, e))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len())
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let dir = File::open(path).map_err(|e| Error::io(path, e))?;
        dir.sync_all().map_err(|e| Error::io(path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(PosixLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(Error::Locked(path.parent().unwrap_or(path).to_path_buf()))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file larger than a piece is taken down in pieces and removed; a
    /// file with a second link keeps every byte under that link.
    #[test]
    fn removal_in_pieces_removes_and_spares_hard_links() {
        let dir = tempfile::tempdir().expect("temp dir");
        let big = dir.path().join("big");
        let data: Vec<u8> = (0..(SHRINK_PIECE * 2 + 12_345)).map(|i| i as u8).collect();
        std::fs::write(&big, &data).expect("write");
        crate::io::enter_background(Arc::new(std::sync::atomic::AtomicBool::new(true)));
        PosixFs.remove_unused_file(&big).expect("remove");
        assert!(!big.exists());

        let linked = dir.path().join("linked");
        let other = dir.path().join("other");
        std::fs::write(&linked, &data).expect("write");
        std::fs::hard_link(&linked, &other).expect("link");
        PosixFs.remove_unused_file(&linked).expect("remove");
        assert!(!linked.exists());
        assert!(std::fs::read(&other).expect("read") == data);

        let missing = dir.path().join("missing");
        assert!(PosixFs.remove_unused_file(&missing).is_err());
    }

    /// Appends of every size around the buffer, with flushes between some:
    /// the file holds exactly the bytes appended, in order.
    #[test]
    fn appends_across_buffer_boundaries_keep_every_byte() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        let mut w = PosixFs.create(&path).expect("create");
        let mut want = Vec::new();
        let sizes = [
            1,
            WRITE_BUFFER - 1,
            2,
            WRITE_BUFFER,
            3 * WRITE_BUFFER + 5,
            7,
            WRITE_BUFFER - 12,
            100,
            2 * WRITE_BUFFER,
        ];
        for (i, &n) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
            w.append(&data).expect("append");
            want.extend_from_slice(&data);
            assert_eq!(w.len(), want.len() as u64);
            if i % 3 == 2 {
                w.flush().expect("flush");
            }
        }
        w.sync().expect("sync");
        drop(w);
        assert_eq!(std::fs::read(&path).expect("read back"), want);
    }

    /// A mapped log never synced, spanning many release pieces, dropped:
    /// its pages are released piece by piece before the unmap, and every
    /// byte written through the map is still the file's (the page cache
    /// keeps the dirty pages). A read map released the same way leaves the
    /// file as it was.
    #[test]
    fn releasing_maps_in_pieces_keeps_every_byte() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log");
        let mut w = PosixFs.create_log(&path).expect("create");
        let mut want = Vec::new();
        let mut i = 0u32;
        while want.len() < 9 << 20 {
            let data: Vec<u8> = (0..4099u32).map(|j| (i * 13 + j * 7) as u8).collect();
            w.append(&data).expect("append");
            want.extend_from_slice(&data);
            i += 1;
        }
        w.flush().expect("flush");
        drop(w);
        assert_eq!(std::fs::read(&path).expect("read back"), want);

        let f = PosixFs.open_mapped(&path).expect("map");
        let mut sum = 0u64;
        if let Some(m) = f.mapping() {
            sum = m.iter().step_by(4096).map(|&b| u64::from(b)).sum();
        }
        let expect: u64 = want.iter().step_by(4096).map(|&b| u64::from(b)).sum();
        assert_eq!(sum, expect);
        drop(f);
        assert_eq!(std::fs::read(&path).expect("read back"), want);
    }

    /// A mapped log that is synced now and then: appends after a sync are
    /// held and written together at the flush or sync (or before the
    /// next append through the map), `preallocate` writes zeros past
    /// them, and whatever the mix, the file holds exactly the bytes
    /// appended, also when dropped with appends never flushed.
    #[test]
    fn a_synced_mapped_log_keeps_every_byte_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        for unflushed_tail in [false, true] {
            // A mapped log where the file system reserves blocks (ext4,
            // XFS, tmpfs), a buffered one elsewhere: both must pass.
            let path = dir.path().join(format!("log{unflushed_tail}"));
            let mut w = PosixFs.create_log(&path).expect("create");
            let mut want = Vec::new();
            for i in 0..400u32 {
                let n = [7usize, 150, 4096, 9000][i as usize % 4];
                for piece in 0..(i % 3 + 1) {
                    let data: Vec<u8> = (0..n)
                        .map(|j| (i * 31 + piece * 5 + j as u32) as u8)
                        .collect();
                    w.append(&data).expect("append");
                    want.extend_from_slice(&data);
                    assert_eq!(w.len(), want.len() as u64);
                }
                match i % 10 {
                    // Syncs between runs of appends long enough to go back
                    // to the map (more than `SYNCED_APPENDS` appends).
                    0..=3 if i < 200 || i % 50 < 10 => {
                        w.preallocate(want.len() as u64 + (1 << 20)).expect("zeros");
                        w.sync().expect("sync");
                    }
                    4 => w.flush().expect("flush"),
                    _ => {}
                }
            }
            if !unflushed_tail {
                w.flush().expect("flush");
            }
            drop(w);
            assert_eq!(std::fs::read(&path).expect("read back"), want);
        }
    }
}

/// The page filler: one thread per process, while mapped logs exist, that
/// makes pages of those logs present and writable ahead of their appends
/// (`PosixLog::fill_ahead`, [`FILL_STEP`]). Started by the first log made
/// and joined when the last one is dropped; without it (no thread to be
/// had, or a kernel before 5.14 that refuses `MADV_POPULATE_WRITE`) the
/// pages fault as the appends reach them, as before.
mod page_filler {
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{sync_channel, SyncSender};
    use std::sync::{Arc, Weak};
    use std::thread::JoinHandle;

    /// A piece of a log's window: (map, offset in it, bytes).
    type Job = (Arc<memmap2::MmapRaw>, usize, usize);

    /// Requests waiting at most; more are refused (the pages then fault).
    const QUEUE: usize = 4;

    /// The filler thread, shared by every mapped log of the process while
    /// one exists: each log holds an `Arc` of it, and the last log dropped
    /// stops and joins the thread (no thread outlives the databases, and
    /// a program that closes them leaves none running at exit).
    pub(super) struct Filler {
        tx: Option<SyncSender<Job>>,
        thread: Option<JoinHandle<()>>,
    }

    /// The running filler, if any log holds it.
    static CURRENT: Mutex<Weak<Filler>> = Mutex::new(Weak::new());

    /// Set once the kernel refused the advice: no more requests.
    static REFUSED: AtomicBool = AtomicBool::new(false);

    /// The filler for a new log: the running one, or a new thread; `None`
    /// when the kernel refused the advice or no thread was to be had.
    pub(super) fn filler() -> Option<Arc<Filler>> {
        if REFUSED.load(Ordering::Relaxed) {
            return None;
        }
        let mut current = CURRENT.lock();
        if let Some(f) = current.upgrade() {
            return Some(f);
        }
        let f = Arc::new(spawn()?);
        *current = Arc::downgrade(&f);
        Some(f)
    }

    /// Starts a filler thread.
    fn spawn() -> Option<Filler> {
        // `std`'s channel, not crossbeam's: a send from a thread the
        // program did not start in Rust (a C caller's) must not make that
        // thread a `std::thread::Thread` handle, which nothing would free
        // (valgrind in the C examples' tests).
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let thread = std::thread::Builder::new()
            .name("strata-walfill".into())
            .spawn(move || {
                // The lowest priority of the normal policy, nice 19 (why:
                // docs/design/2026-11-29-code-comment-measurements.md
                // §wal-page-filler):
                // - at nice 0 or 7 a woken filler is placed on the
                //   writer's CPU whenever the other runs a flush, and at
                //   the next tick takes it for a whole fill;
                // - `SCHED_IDLE` runs it only on an idle CPU, so when it
                //   is preempted inside a populate call, holding the
                //   `mmap_lock` for reading, it may wait long for a CPU;
                //   a thread that maps (the memtable chunk filler's
                //   `mprotect`) queues for the lock behind it, and the
                //   writer's next page fault behind that;
                // - nice 19 keeps a share of a CPU, so a preempted filler
                //   gets back to release the lock within the scheduler's
                //   latency.
                crate::io::lower_priority(19);
                for (map, at, n) in rx {
                    fill(&map, at, n);
                }
            })
            .ok()?;
        Some(Filler {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    impl Filler {
        /// Queues `[at, at + n)` of `map` for filling; false when the
        /// filler is busy or refused by the kernel.
        pub(super) fn request(&self, map: &Arc<memmap2::MmapRaw>, at: usize, n: usize) -> bool {
            !REFUSED.load(Ordering::Relaxed)
                && self
                    .tx
                    .as_ref()
                    .is_some_and(|tx| tx.try_send((Arc::clone(map), at, n)).is_ok())
        }
    }

    impl Drop for Filler {
        fn drop(&mut self) {
            // Closing the channel ends the thread's loop once the pieces
            // queued (at most `QUEUE`, each under a millisecond) are done.
            drop(self.tx.take());
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    /// Bytes filled per call. The call holds the process's `mmap_lock`
    /// for reading; a thread that maps or unmaps (a table, a memtable
    /// chunk) waits for it, and page faults that need the lock then queue
    /// behind that thread.
    ///
    /// After each call the filler offers its core (`sched_yield(2)`,
    /// which returns at once when no other thread waits for it). Woken
    /// onto the core of a writer that never sleeps (the other core busy
    /// with a flush, or with another process), the filler, at nice 19,
    /// waits there until a scheduler tick (4 ms at HZ=250) gives it the
    /// core; kept for a whole [`super::FILL_STEP`], the core is then lost
    /// to the writer for all of it. Yielding after each piece, a writer
    /// waits for about one piece (why:
    /// docs/design/2026-11-29-code-comment-measurements.md §wal-page-filler).
    #[cfg(target_os = "linux")]
    const PIECE: usize = 32 << 10;

    #[cfg(target_os = "linux")]
    fn fill(map: &memmap2::MmapRaw, at: usize, n: usize) {
        // Pages past the end of the file (a log cut back when dropped)
        // return an error, not a SIGBUS; only a refusal of the advice
        // itself stops the filler.
        let end = at + n;
        let mut from = at;
        while from < end {
            let piece = (end - from).min(PIECE);
            if let Err(e) = map.advise_range(memmap2::Advice::PopulateWrite, from, piece) {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    REFUSED.store(true, Ordering::Relaxed);
                }
                return;
            }
            from += piece;
            std::thread::yield_now();
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn fill(_map: &memmap2::MmapRaw, _at: usize, _n: usize) {
        REFUSED.store(true, Ordering::Relaxed);
    }

    #[cfg(all(test, target_os = "linux"))]
    mod tests {
        use super::*;

        /// Pages of `[0, len)` of `map` in the page cache (`mincore(2)`).
        fn resident(map: &memmap2::MmapRaw, len: usize) -> usize {
            let mut vec = vec![0u8; len.div_ceil(4096)];
            // SAFETY: the map starts on a page boundary and covers `len`
            // bytes; `vec` has one byte per page of them for the call to
            // fill.
            let rc = unsafe { libc::mincore(map.as_mut_ptr().cast(), len, vec.as_mut_ptr()) };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            vec.iter().filter(|&&b| b & 1 == 1).count()
        }

        /// A new log in `dir` with `len` bytes reserved (unwritten), its
        /// file, and a map of those bytes.
        fn reserved_log(
            dir: &std::path::Path,
            len: usize,
        ) -> (std::fs::File, super::super::PosixLog, Arc<memmap2::MmapRaw>) {
            let path = dir.join("log");
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .expect("create");
            let mut log = super::super::PosixLog::new(&path, file.try_clone().expect("dup"));
            log.reserve(len as u64).expect("reserve");
            let map = memmap2::MmapOptions::new()
                .len(len)
                .map_raw(&file)
                .expect("map");
            (file, log, Arc::new(map))
        }

        /// A filled range of a log's reserved, never written blocks is
        /// resident afterwards (what the appends then find without a
        /// fault). On a file cut back below the range meanwhile (a log
        /// dropped while its last pieces were queued) the fill stops
        /// without a SIGBUS, does not count as a refusal, and leaves the
        /// file's length as it was.
        #[test]
        fn filled_pages_are_resident_and_a_cut_file_stops_the_fill() {
            let dir = tempfile::tempdir().expect("temp dir");
            let (file, log, map) = reserved_log(dir.path(), 2 << 20);
            assert_eq!(resident(&map, 1 << 20), 0);
            fill(&map, 0, 1 << 20);
            let supported = super::super::kernel_version().is_some_and(|v| v >= (5, 14));
            if supported {
                assert_eq!(resident(&map, 1 << 20), 256);
                assert!(!REFUSED.load(Ordering::Relaxed));
            } else {
                assert!(REFUSED.load(Ordering::Relaxed));
            }
            file.set_len(4096).expect("cut");
            fill(&map, 0, 2 << 20);
            assert_eq!(file.metadata().expect("meta").len(), 4096);
            assert_eq!(REFUSED.load(Ordering::Relaxed), !supported);
            drop(log);
        }

        /// A filler dropped with pieces queued fills them, then its thread
        /// ends and is joined: after the drop the pages are resident.
        #[test]
        fn a_dropped_filler_fills_its_queue_and_joins() {
            let dir = tempfile::tempdir().expect("temp dir");
            let (_file, log, map) = reserved_log(dir.path(), 1 << 20);
            let supported = super::super::kernel_version().is_some_and(|v| v >= (5, 14));
            let f = spawn().expect("a thread");
            let queued = [
                f.request(&map, 0, 512 << 10),
                f.request(&map, 512 << 10, 512 << 10),
            ];
            drop(f);
            if supported {
                assert_eq!(queued, [true, true]);
                assert_eq!(resident(&map, 1 << 20), 256);
            }
            // The thread dropped its copies of the map: this is the last.
            assert_eq!(Arc::strong_count(&map), 1);
            drop(log);
        }
    }
}
