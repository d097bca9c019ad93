//! Table files read with direct I/O (`O_DIRECT`): reads go from the
//! device into the process's memory without passing through the page
//! cache, so a table larger than memory costs no page-cache insertion,
//! no reclaim and no copy out of the kernel, and the block cache is the
//! only cache of its blocks.
//!
//! Reads in order (a scan's or a compaction's pieces) go through the page
//! cache instead, on a second descriptor: there the read-ahead they ask
//! for ahead of themselves overlaps their work, which a direct read
//! cannot.
//!
//! Direct reads must start and end on the device's logical blocks and
//! land in aligned memory: each read is widened to [`ALIGN`] on both
//! sides, read into a per-thread aligned buffer and the asked-for bytes
//! copied out. Reads are never served from the page cache (a table just
//! written is synced before it is read, and the kernel writes back any
//! dirty range before a direct read of it).

use super::random::PosixRandom;
use crate::error::{Error, Result};
use crate::io::RandomAccessFile;
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Alignment of a direct read's offset, length and buffer: a page, which
/// every logical block size Linux supports divides.
pub(super) const ALIGN: usize = 4096;

#[derive(Debug)]
pub(super) struct PosixDirect {
    /// Opened with `O_DIRECT`.
    pub(super) file: File,
    /// The same file opened for buffered reads (its path and length too):
    /// reads in order and the read-ahead they ask for.
    pub(super) buffered: PosixRandom,
}

impl RandomAccessFile for PosixDirect {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.buffered.len)
            .ok_or_else(|| {
                Error::io(
                    &self.buffered.path,
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("read of {} bytes at {offset} past the end", buf.len()),
                    ),
                )
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let start = offset & !(ALIGN as u64 - 1);
        let stop = end.next_multiple_of(ALIGN as u64);
        let skip = (offset - start) as usize;
        let span = usize::try_from(stop - start).map_err(|_| {
            Error::io(
                &self.buffered.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "read too large"),
            )
        })?;
        let mut read = |bounce: &mut Vec<u8>| -> Result<()> {
            let aligned = aligned(bounce, span);
            // The file's last block may be short: a direct read stops at
            // the end of the file, which `end <= len` keeps past the bytes
            // asked for.
            let want = skip + buf.len();
            let mut got = 0;
            let mut stalls = 0;
            while got < want {
                match self.file.read_at(&mut aligned[got..], start + got as u64) {
                    Ok(0) => {
                        return Err(Error::io(
                            &self.buffered.path,
                            std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                format!("direct read at {} ended early", start + got as u64),
                            ),
                        ))
                    }
                    // A short read that does not reach the asked-for bytes
                    // goes on from the last aligned offset it reached (a
                    // direct read cannot start elsewhere).
                    Ok(n) if got + n >= want => got += n,
                    Ok(n) => {
                        let step = n - n % ALIGN;
                        stalls = if step == 0 { stalls + 1 } else { 0 };
                        if stalls > 3 {
                            return Err(Error::io(
                                &self.buffered.path,
                                std::io::Error::other("direct read makes no progress"),
                            ));
                        }
                        got += step;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io(&self.buffered.path, e)),
                }
            }
            buf.copy_from_slice(&aligned[skip..want]);
            Ok(())
        };
        // The thread's buffer, or (while the thread is being torn down, or
        // should this read ever run inside another) one of its own.
        match BOUNCE.try_with(|b| b.try_borrow_mut().ok().map(|mut b| read(&mut b))) {
            Ok(Some(done)) => done,
            _ => read(&mut Vec::new()),
        }
    }

    fn read_sequential_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.buffered.read_exact_at(offset, buf)
    }

    // Direct reads have no read-around; the buffered descriptor's reads
    // in order ask for what they need (`prefetch`).
    fn advise_random(&self) {
        self.buffered.advise_random();
    }

    fn prefetch(&self, offset: u64, len: u64) {
        self.buffered.prefetch(offset, len);
    }

    fn direct(&self) -> bool {
        true
    }

    fn len(&self) -> u64 {
        self.buffered.len
    }
}

thread_local! {
    /// Each reading thread's buffer for direct reads, grown to its largest
    /// read (plus [`ALIGN`] to place an aligned slice in it).
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// An [`ALIGN`]-aligned slice of `len` bytes of `buf` (`len` a multiple
/// of [`ALIGN`]), grown first if it has no room; its contents are
/// unspecified (zeros or an earlier read's bytes).
fn aligned(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len + ALIGN {
        buf.resize((len + ALIGN).next_power_of_two(), 0);
    }
    let pad = buf.as_ptr().align_offset(ALIGN);
    &mut buf[pad..pad + len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::posix::{fs_type, PosixFs, TMPFS};
    use crate::io::FileSystem;

    /// A file of `len` bytes where byte `i` is `i * 7 % 251`.
    fn file(dir: &std::path::Path, len: usize) -> (std::path::PathBuf, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let path = dir.join("t");
        std::fs::write(&path, &bytes).expect("write");
        (path, bytes)
    }

    #[test]
    fn direct_reads_return_the_asked_for_bytes_at_any_offset() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Not a multiple of the alignment: the last read is short.
        let (path, bytes) = file(dir.path(), 3 * ALIGN + 1234);
        let f = PosixFs.open_direct(&path).expect("open");
        // tmpfs has no direct I/O: the file is then read through the
        // page cache, and everything else below holds the same.
        assert_eq!(f.direct(), fs_type(dir.path()) != Some(TMPFS));
        assert_eq!(f.len(), bytes.len() as u64);
        for (offset, len) in [
            (0, 1),
            (0, ALIGN),
            (1, ALIGN),
            (ALIGN - 1, 2),
            (100, 2 * ALIGN + 77),
            (bytes.len() - 1, 1),
            (bytes.len() - 5000, 5000),
            (0, bytes.len()),
            (17, 0),
        ] {
            let mut buf = vec![0xAA; len];
            f.read_exact_at(offset as u64, &mut buf).expect("read");
            assert_eq!(buf, bytes[offset..offset + len], "at {offset}, {len}");
        }
        let mut seq = vec![0; 5000];
        f.prefetch(100, 5000);
        f.read_sequential_at(100, &mut seq).expect("read in order");
        assert_eq!(seq, bytes[100..5100]);
        let mut past = vec![0; 2];
        assert!(f.read_exact_at(bytes.len() as u64 - 1, &mut past).is_err());
        assert!(f.read_exact_at(u64::MAX, &mut past).is_err());
    }

    #[test]
    fn the_aligned_slice_is_aligned_and_as_long_as_asked() {
        let mut buf = Vec::new();
        for len in [ALIGN, 3 * ALIGN, ALIGN] {
            let s = aligned(&mut buf, len);
            assert_eq!(s.len(), len);
            assert_eq!(s.as_ptr() as usize % ALIGN, 0);
        }
    }
}
