//! The operating system's file system.

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(target_os = "linux")]
mod direct;
mod log;
mod page_filler;
mod random;
mod writable;

#[cfg(target_os = "linux")]
use direct::PosixDirect;
use log::PosixLog;
use random::{PosixMapped, PosixRandom};
use writable::PosixWritable;

/// [`FileSystem`] over `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

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
pub(crate) const TMPFS: u64 = 0x0102_1994;

/// The `f_type` of the file system the file at `path` lives on
/// (`statfs(2)`).
pub(crate) fn fs_type(path: &Path) -> Option<u64> {
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

/// `posix_fadvise(2)` of `[offset, offset + len)` of `file` (`len` 0: to
/// the end). Advice is a hint: a kernel that refuses it reads as before,
/// so its errors are ignored; a no-op off Linux.
fn fadvise(file: &File, offset: u64, len: u64, advice: libc::c_int) {
    #[cfg(target_os = "linux")]
    if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
        use std::os::fd::AsRawFd;
        // SAFETY: posix_fadvise(2) on a descriptor `file` owns and keeps
        // open for the call; it reads no user memory.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), offset, len, advice);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len, advice);
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

/// What one `ftruncate(2)` takes off a file being removed
/// ([`shrink_in_pieces`]).
const SHRINK_PIECE: u64 = 8 << 20;

/// Before a file larger than [`SHRINK_PIECE`] is removed, takes it down
/// to its first piece a piece at a time from its end, offering the core
/// ([`crate::sched::yield_point`]) between pieces. Removing a file frees its
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
        crate::sched::yield_point();
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

impl PosixFs {
    /// `path` opened for buffered reads by offset.
    fn open_buffered(&self, path: &Path) -> Result<PosixRandom> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(PosixRandom {
            path: path.to_path_buf(),
            file,
            len,
        })
    }
}

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
        Ok(Arc::new(self.open_buffered(path)?))
    }

    fn open_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
            {
                Ok(file) => {
                    let buffered = self.open_buffered(path)?;
                    return Ok(Arc::new(PosixDirect { file, buffered }));
                }
                // A file system without direct I/O (tmpfs, some FUSE
                // mounts) refuses the flag: read through the page cache.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        self.open_random(path)
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

    /// A hard link; a copy where the file system refuses one (another
    /// device, no hard links, too many links).
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<u64> {
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(0),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
                ) =>
            {
                super::copy_file(self, from, to)
            }
            Err(e) => Err(Error::io(to, e)),
        }
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
    use super::writable::WRITE_BUFFER;
    use super::*;

    /// A file larger than a piece is taken down in pieces and removed; a
    /// file with a second link keeps every byte under that link.
    #[test]
    fn removal_in_pieces_removes_and_spares_hard_links() {
        let dir = tempfile::tempdir().expect("temp dir");
        let big = dir.path().join("big");
        let data: Vec<u8> = (0..(SHRINK_PIECE * 2 + 12_345)).map(|i| i as u8).collect();
        std::fs::write(&big, &data).expect("write");
        crate::sched::enter_background(Arc::new(std::sync::atomic::AtomicBool::new(true)));
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
