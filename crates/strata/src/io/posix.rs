//! The operating system's file system.

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Appends go through a user-space buffer of this size before a `write(2)`.
const WRITE_BUFFER: usize = 256 * 1024;

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
    fn failed_before(&self) -> Error {
        Error::io(
            &self.path,
            std::io::Error::other("an earlier write or sync of this file failed"),
        )
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
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.write_out()?;
            if data.len() >= WRITE_BUFFER {
                return self.guarded(|w| w.file.write_all(data));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
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
        let mut at = self.zeroed.max(self.len);
        let zeros = [0u8; 64 << 10];
        while at < upto {
            let n = usize::try_from(upto - at).map_or(zeros.len(), |n| n.min(zeros.len()));
            self.file
                .write_all_at(&zeros[..n], at)
                .map_err(|e| Error::io(&self.path, e))?;
            at += n as u64;
            self.zeroed = at;
        }
        Ok(())
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

    fn len(&self) -> u64 {
        self.len
    }
}

/// A file read through a memory map.
#[derive(Debug)]
struct PosixMapped {
    path: PathBuf,
    map: Arc<super::Mapping>,
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
        let end = self.map.len() as u64;
        let start = offset.min(end);
        let len = len.min(end - start);
        if len > 0 {
            let _ = self
                .map
                .advise_range(memmap2::Advice::WillNeed, start as usize, len as usize);
        }
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
        Ok(Box::new(PosixWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            len: 0,
            zeroed: 0,
            failed: false,
        }))
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
            map: Arc::new(map),
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
