//! Table files read with `pread(2)` or through a memory map.

use super::large_folios;
use crate::error::{Error, Result};
use crate::io::{Mapping, RandomAccessFile};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct PosixRandom {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) len: u64,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn advise_random(&self) {
        super::fadvise(&self.file, 0, 0, libc::POSIX_FADV_RANDOM);
    }

    fn prefetch(&self, offset: u64, len: u64) {
        super::fadvise(&self.file, offset, len, libc::POSIX_FADV_WILLNEED);
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A file read through a memory map.
#[derive(Debug)]
pub(super) struct PosixMapped {
    pub(super) path: PathBuf,
    pub(super) map: Arc<Mapping>,
    /// `MADV_HUGEPAGE` was given: `prefetch` asks for nothing.
    pub(super) huge: std::sync::atomic::AtomicBool,
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

    fn mapping(&self) -> Option<&Arc<Mapping>> {
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
