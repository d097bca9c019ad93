//! A plain file written through a user-space buffer.

use super::{failed_before, zero_ahead};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Appends go through a user-space buffer of up to this size, and each
/// `write(2)` ends at a multiple of it in the file (unless the caller
/// flushes or syncs), so the page cache can hold the file in folios of
/// this size. 2 MiB pieces (folios a map advised `MADV_HUGEPAGE` could map
/// with one PMD entry) make a load of 4 KiB values slower, while warm
/// lookups gain nothing from PMD-mapped tables (why:
/// docs/design/2026-11-29-code-comment-measurements.md §write-buffer).
pub(super) const WRITE_BUFFER: usize = 256 << 10;

pub(super) struct PosixWritable {
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
    pub(super) fn new(path: &Path, file: File) -> Self {
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
