//! A write-ahead log written through a map of blocks reserved ahead of it.

use super::page_filler;
use super::{failed_before, write_zeros, zero_ahead};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
pub(super) struct PosixLog {
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
    pub(super) fn new(path: &Path, file: File) -> Self {
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
    pub(super) fn reserve(&mut self, upto: u64) -> std::io::Result<()> {
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
            crate::io::release_in_pieces(map.len(), |at, n| {
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
