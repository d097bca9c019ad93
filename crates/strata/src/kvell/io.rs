//! How a KVell worker submits page I/O: io_uring (one ring per worker, up to
//! `kvell_batch` requests per submission) or, where the kernel refuses
//! io_uring, one pread/pwrite call per request. Chosen at open, reported in
//! the statistics.

use crate::error::{Error, Result};
use crate::options::KvellIo;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A zeroed buffer whose start is 4 KiB aligned (O_DIRECT needs it), made
/// from an over-allocated `Vec` rather than a custom allocation.
pub struct AlignedBuf {
    raw: Vec<u8>,
    off: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> Self {
        const ALIGN: usize = 4096;
        let raw = vec![0u8; len + ALIGN];
        let off = raw.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf { raw, off, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.off..self.off + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }

    pub fn copy(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(self.len);
        b.as_mut_slice().copy_from_slice(self.as_slice());
        b
    }
}

/// One page I/O: `buf` is read from, or written to, `file` at `offset`.
pub struct Req<'a> {
    pub file: &'a File,
    pub path: &'a PathBuf,
    pub offset: u64,
    pub buf: &'a mut AlignedBuf,
}

/// Counts of what a backend submitted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Submitted {
    pub batches: u64,
    pub ios: u64,
    pub max_batch: u64,
}

/// A worker's I/O path.
pub trait Io: Send {
    fn name(&self) -> &'static str;
    /// Reads every request's buffer in full.
    fn read(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()>;
    /// Writes every request's buffer in full.
    fn write(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()>;
    /// Makes what was written to `file` durable (`fdatasync`).
    fn sync(&mut self, file: &File, path: &PathBuf) -> Result<()> {
        file.sync_data().map_err(|e| Error::io(path, e))
    }
}

fn io_err(path: &PathBuf, e: std::io::Error) -> Error {
    Error::io(path, e)
}

/// Reads `buf.len()` bytes at `off`, the bytes past the end of the file as
/// zeros (a slot whose tail was never written, or whose file a crash left
/// short, reads as it would in a scan: its crc then decides).
pub fn read_zero_filled(file: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => {
                buf[done..].fill(0);
                break;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One system call per request.
pub struct Pread {
    batch: usize,
}

impl Io for Pread {
    fn name(&self) -> &'static str {
        "pread"
    }
    fn read(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        for chunk in reqs.chunks_mut(self.batch) {
            note(counts, chunk.len());
            for r in chunk.iter_mut() {
                read_zero_filled(r.file, r.buf.as_mut_slice(), r.offset)
                    .map_err(|e| io_err(r.path, e))?;
            }
        }
        Ok(())
    }
    fn write(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        for chunk in reqs.chunks_mut(self.batch) {
            note(counts, chunk.len());
            for r in chunk.iter_mut() {
                r.file
                    .write_all_at(r.buf.as_slice(), r.offset)
                    .map_err(|e| io_err(r.path, e))?;
            }
        }
        Ok(())
    }
}

fn note(counts: &mut Submitted, n: usize) {
    counts.batches += 1;
    counts.ios += n as u64;
    counts.max_batch = counts.max_batch.max(n as u64);
}

/// An io_uring ring: each chunk of up to `batch` requests is pushed and
/// submitted with one `io_uring_enter`, which waits for all of them.
pub struct Uring {
    ring: io_uring::IoUring,
    batch: usize,
}

impl Uring {
    /// A ring, after checking that the kernel supports the read and write
    /// opcodes (Linux 5.6; before it a ring and a no-op work but every read
    /// and write fails) and runs a no-op on it (some sandboxes create rings
    /// but refuse to run them).
    fn new(batch: usize) -> std::io::Result<Uring> {
        let mut ring = io_uring::IoUring::new((batch as u32).next_power_of_two().max(8))?;
        let mut probe = io_uring::Probe::new();
        // A kernel without the probe (before 5.6) lacks the opcodes too.
        ring.submitter().register_probe(&mut probe)?;
        for (code, name) in [
            (io_uring::opcode::Read::CODE, "READ"),
            (io_uring::opcode::Write::CODE, "WRITE"),
        ] {
            if !probe.is_supported(code) {
                return Err(std::io::Error::other(format!(
                    "the kernel's io_uring lacks IORING_OP_{name}"
                )));
            }
        }
        let nop = io_uring::opcode::Nop::new().build().user_data(0);
        // SAFETY: a no-op entry refers to no memory.
        unsafe { ring.submission().push(&nop) }
            .map_err(|_| std::io::Error::other("io_uring submission queue full"))?;
        ring.submit_and_wait(1)?;
        let res = ring.completion().next().map(|c| c.result());
        match res {
            Some(r) if r >= 0 => Ok(Uring { ring, batch }),
            Some(r) => Err(std::io::Error::from_raw_os_error(-r)),
            None => Err(std::io::Error::other("io_uring returned no completion")),
        }
    }

    fn run(&mut self, reqs: &mut [Req<'_>], write: bool, counts: &mut Submitted) -> Result<()> {
        for chunk in reqs.chunks_mut(self.batch) {
            note(counts, chunk.len());
            for (i, r) in chunk.iter_mut().enumerate() {
                let fd = io_uring::types::Fd(r.file.as_raw_fd());
                let len = r.buf.len() as u32;
                let entry = if write {
                    io_uring::opcode::Write::new(fd, r.buf.as_slice().as_ptr(), len)
                        .offset(r.offset)
                        .build()
                } else {
                    io_uring::opcode::Read::new(fd, r.buf.as_mut_slice().as_mut_ptr(), len)
                        .offset(r.offset)
                        .build()
                };
                // SAFETY: the buffer and the file outlive the request: this
                // function waits below for every completion of the chunk
                // before it returns or touches the buffers again.
                unsafe { self.ring.submission().push(&entry.user_data(i as u64)) }
                    .map_err(|_| Error::io(r.path, std::io::Error::other("ring full")))?;
            }
            let mut done = vec![None; chunk.len()];
            let mut left = chunk.len();
            let mut failed_since: Option<std::time::Instant> = None;
            while left > 0 {
                if let Err(e) = self.ring.submit_and_wait(left) {
                    // EINTR, EAGAIN and EBUSY are transient (a signal, the
                    // kernel short of resources or completions to reap):
                    // reap and submit again.
                    let transient = e.kind() == std::io::ErrorKind::Interrupted
                        || matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY));
                    let since = *failed_since.get_or_insert_with(std::time::Instant::now);
                    if transient && since.elapsed() <= std::time::Duration::from_secs(30) {
                        if e.kind() != std::io::ErrorKind::Interrupted {
                            std::thread::yield_now();
                        }
                    } else {
                        // The kernel may still own the buffers: never
                        // return before every request completed. Keep
                        // reaping; if the ring stays broken, stop the
                        // process rather than free memory the kernel may
                        // still write.
                        if since.elapsed() > std::time::Duration::from_secs(30) {
                            eprintln!("strata: io_uring failed with requests in flight: {e}");
                            std::process::abort();
                        }
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                for c in self.ring.completion() {
                    if let Some(slot) = done.get_mut(c.user_data() as usize) {
                        if slot.is_none() {
                            *slot = Some(c.result());
                            left -= 1;
                        }
                    }
                }
            }
            // Only a request that failed is an error: a refused submission
            // whose requests all completed lost nothing.
            for (r, res) in chunk.iter_mut().zip(done) {
                let mut n = res.unwrap_or(-libc::EIO);
                if n == -libc::EAGAIN || n == -libc::EINTR {
                    // A transient refusal of one request: done below with
                    // a plain call, as a short transfer is.
                    n = 0;
                }
                if n < 0 {
                    return Err(Error::io(r.path, std::io::Error::from_raw_os_error(-n)));
                }
                let n = n as usize;
                if n < r.buf.len() {
                    // A short transfer: finish it with a plain call.
                    let off = r.offset + n as u64;
                    if write {
                        r.file.write_all_at(&r.buf.as_slice()[n..], off)
                    } else {
                        read_zero_filled(r.file, &mut r.buf.as_mut_slice()[n..], off)
                    }
                    .map_err(|e| Error::io(r.path, e))?;
                }
            }
        }
        Ok(())
    }
}

impl Io for Uring {
    fn name(&self) -> &'static str {
        "io_uring"
    }
    fn read(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        self.run(reqs, false, counts)
    }
    fn write(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        self.run(reqs, true, counts)
    }
}

/// Makes a worker's I/O backend (tests substitute one that records writes
/// to simulate a power loss).
pub type MakeIo = dyn Fn() -> Result<Box<dyn Io>> + Send + Sync;

/// The backend `choice` names; `Auto` falls back to pread/pwrite when the
/// kernel refuses io_uring.
pub fn backend(choice: KvellIo, batch: usize) -> Result<Box<dyn Io>> {
    match choice {
        KvellIo::Pread => Ok(Box::new(Pread { batch })),
        KvellIo::Uring => Uring::new(batch)
            .map(|u| Box::new(u) as Box<dyn Io>)
            .map_err(|e| Error::NotSupported(format!("io_uring is unavailable here: {e}"))),
        KvellIo::Auto => Ok(match Uring::new(batch) {
            Ok(u) => Box::new(u),
            Err(_) => Box::new(Pread { batch }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers() {
        for len in [4096, 8192, 3 * 4096] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
            assert_eq!(b.len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn both_backends_read_what_they_wrote() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut backends: Vec<Box<dyn Io>> = vec![Box::new(Pread { batch: 3 })];
        if let Ok(u) = Uring::new(3) {
            backends.push(Box::new(u));
        }
        for (n, io) in backends.iter_mut().enumerate() {
            let mut bufs: Vec<AlignedBuf> = (0..7u8)
                .map(|i| {
                    let mut b = AlignedBuf::zeroed(4096);
                    b.as_mut_slice().fill(i + 10 * n as u8);
                    b
                })
                .collect();
            let mut counts = Submitted::default();
            let mut reqs: Vec<Req<'_>> = bufs
                .iter_mut()
                .enumerate()
                .map(|(i, buf)| Req {
                    file: &file,
                    path: &path,
                    offset: i as u64 * 4096,
                    buf,
                })
                .collect();
            io.write(&mut reqs, &mut counts)?;
            assert_eq!((counts.batches, counts.ios, counts.max_batch), (3, 7, 3));
            let mut back: Vec<AlignedBuf> = (0..7).map(|_| AlignedBuf::zeroed(4096)).collect();
            let mut reqs: Vec<Req<'_>> = back
                .iter_mut()
                .enumerate()
                .map(|(i, buf)| Req {
                    file: &file,
                    path: &path,
                    offset: i as u64 * 4096,
                    buf,
                })
                .collect();
            io.read(&mut reqs, &mut counts)?;
            for (i, b) in back.iter().enumerate() {
                assert!(
                    b.as_slice().iter().all(|&x| x == i as u8 + 10 * n as u8),
                    "{}",
                    io.name()
                );
            }
        }
        Ok(())
    }
}
