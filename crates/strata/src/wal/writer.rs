//! Appends records to a write-ahead log.

use super::format::{
    fragment_header, log_tag, tagged_fragment_header, FragmentType, BLOCK_SIZE, HEADER_SIZE,
    MANIFEST_LOG_VERSION, SYNCED_MARK_LEN, TAGGED_FILE_HEADER_LEN, TAGGED_HEADER_SIZE,
    TAGGED_VERSION, WAL_MAGIC, WAL_VERSION,
};
use crate::coding::{put_u32, put_u64};
use crate::error::{Error, Result};
use crate::io::WritableFile;

/// [`Writer::sync_ahead`] zero-fills this many bytes past the records...
const PREALLOCATE: u64 = 1 << 20;
/// ...when fewer than this many zero-filled bytes are left.
const PREALLOCATE_LOW: u64 = 256 << 10;

/// Writes records to a new log file.
///
/// After any failed append, flush or sync the writer refuses further calls
/// with the first error: what reached the file is unknown, so the log must be
/// abandoned (the database poisons itself and recovery decides).
pub struct Writer {
    file: Box<dyn WritableFile>,
    log_number: u64,
    /// The log's tag, carried by every fragment after the header record
    /// (write-ahead logs of format 4 on; `None`: untagged fragments, and
    /// while the header record, always untagged, is written).
    tag: Option<u32>,
    /// Offset inside the current block.
    block_offset: usize,
    /// End of the zero-filled region `sync_ahead` asked for.
    preallocated: u64,
    /// Write a [`FragmentType::Synced`] mark after each completed sync, in
    /// front of the next append (write-ahead logs, see [`Writer::new_wal`]).
    marks: bool,
    /// The file length when the last sync completed.
    synced: u64,
    /// A sync completed and no mark says so yet: the next append starts
    /// with one.
    confirm_pending: bool,
    failed: Option<Error>,
}

impl Writer {
    /// Starts a manifest log in an empty `file` and writes its header
    /// record (buffered: nothing is flushed).
    pub fn new(file: Box<dyn WritableFile>, log_number: u64) -> Result<Self> {
        Self::start(file, log_number, MANIFEST_LOG_VERSION)
    }

    /// Starts a write-ahead log (format version 4) in an empty `file`, with
    /// a fresh tag ([`log_tag`]) in its header record and in every fragment
    /// after it. The first append after each completed sync begins with a
    /// [`FragmentType::Synced`] mark holding how far that sync reached
    /// (written after the sync returned, so it proves it). Recovery uses
    /// the marks to tell damage a power loss may leave in blocks written
    /// since the last sync (a torn tail, even with valid records after it:
    /// pages of a reserved or zero-filled log can reach the disk in any
    /// order) from damage to synced records.
    pub fn new_wal(file: Box<dyn WritableFile>, log_number: u64) -> Result<Self> {
        Self::new_wal_format(file, log_number, WAL_VERSION)
    }

    /// [`new_wal`](Self::new_wal) writing an older format `version` (3:
    /// sync marks, untagged fragments), which tests use to show what this
    /// build reads.
    pub(crate) fn new_wal_format(
        file: Box<dyn WritableFile>,
        log_number: u64,
        version: u32,
    ) -> Result<Self> {
        let mut w = Self::start(file, log_number, version)?;
        w.marks = version >= 3;
        Ok(w)
    }

    fn start(file: Box<dyn WritableFile>, log_number: u64, version: u32) -> Result<Self> {
        if !file.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "a WAL writer needs an empty file, this one has {} bytes",
                file.len()
            )));
        }
        let tag = (version >= TAGGED_VERSION).then(|| log_tag(log_number));
        let mut w = Writer {
            file,
            log_number,
            tag: None,
            block_offset: 0,
            preallocated: 0,
            marks: false,
            synced: 0,
            confirm_pending: false,
            failed: None,
        };
        let mut header = Vec::with_capacity(TAGGED_FILE_HEADER_LEN);
        put_u64(&mut header, WAL_MAGIC);
        put_u32(&mut header, version);
        put_u64(&mut header, log_number);
        if let Some(tag) = tag {
            put_u32(&mut header, tag);
        }
        // The header record itself is untagged: a reader learns the tag from it.
        w.guard(|w| w.emit(FragmentType::Header, &header))?;
        w.tag = tag;
        Ok(w)
    }

    /// Appends one record (any length, including 0), split into fragments
    /// that never cross a block boundary. Buffered: call [`flush`](Self::flush)
    /// or [`sync`](Self::sync) to make it survive a crash.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.guard(|w| {
            w.confirm()?;
            w.write_record(payload)
        })
    }

    /// Hands buffered bytes to the operating system (survives a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.guard(|w| w.file.flush())
    }

    /// Flushes and `fdatasync`s (survives power loss).
    pub fn sync(&mut self) -> Result<()> {
        self.guard(|w| w.sync_now())
    }

    /// [`sync`](Self::sync) for a log that takes no more writes (at close,
    /// and for the log of a memtable that was switched out): a write-ahead
    /// log then also gets the mark that says this sync completed, synced
    /// in turn, so that damage anywhere in its records is found to be
    /// damage to synced records. Calling it again with nothing appended in
    /// between writes nothing.
    pub fn sync_final(&mut self) -> Result<()> {
        self.guard(|w| {
            if !w.marks {
                return w.file.sync();
            }
            if w.file.len() != w.synced {
                w.sync_now()?;
            }
            if w.confirm_pending {
                w.confirm()?;
                w.file.sync()?;
                w.synced = w.file.len();
            }
            Ok(())
        })
    }

    /// [`sync`](Self::sync) for a log that takes synced writes: first keeps
    /// at least 256 KiB past the records allocated and reading as zeros
    /// (1 MiB at a time, [`WritableFile::preallocate`]: written zeros, or
    /// blocks reserved with `fallocate(2)` for a mapped log), so that most
    /// syncs do not grow the file. On this machine's ext4 a 130-byte
    /// append + `fdatasync` ran 1.4-1.7x faster there than at the end of
    /// the file. The WAL
    /// reader ([`Reader::zero_filled_end`](super::Reader::zero_filled_end))
    /// takes a zero-filled rest of the file as the end of the log.
    pub fn sync_ahead(&mut self) -> Result<()> {
        self.guard(|w| {
            let len = w.file.len();
            if w.preallocated < len.saturating_add(PREALLOCATE_LOW) {
                let upto = len.saturating_add(PREALLOCATE);
                // Best effort: without the zeros the sync below is only
                // slower; a full disk shows up in the append or the sync.
                let _ = w.file.preallocate(upto);
                w.preallocated = upto;
            }
            w.sync_now()
        })
    }

    /// Reserves room for `bytes` more of records where that writes no
    /// data ([`WritableFile::reserve`]). Best effort: without it appends
    /// reserve as they go, and a full disk shows up in the append.
    pub fn reserve(&mut self, bytes: u64) {
        let upto = self.file.len().saturating_add(bytes);
        let _ = self.file.reserve(upto);
    }

    /// Bytes written to the file so far (buffered bytes included).
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Always false: the header record is written on creation.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// The log number recorded in the header.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The tag of a write-ahead log of format 4 or later.
    pub fn tag(&self) -> Option<u32> {
        self.tag
    }

    fn guard(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        op(self).inspect_err(|e| self.failed = Some(e.clone()))
    }

    fn sync_now(&mut self) -> Result<()> {
        self.file.sync()?;
        self.synced = self.file.len();
        self.confirm_pending = self.marks;
        Ok(())
    }

    /// The mark for a completed sync no mark reports yet, if any.
    fn confirm(&mut self) -> Result<()> {
        if self.confirm_pending {
            self.mark()?;
            self.confirm_pending = false;
        }
        Ok(())
    }

    /// Appends a [`FragmentType::Synced`] mark holding `synced`. A block
    /// with too little room left for it is filled with a short mark.
    fn mark(&mut self) -> Result<()> {
        let hs = self.header_size();
        let leftover = BLOCK_SIZE - self.block_offset;
        if leftover < hs + SYNCED_MARK_LEN {
            if leftover >= hs {
                let filler = [0u8; SYNCED_MARK_LEN];
                self.emit(FragmentType::Synced, &filler[..leftover - hs])?;
            } else if leftover > 0 {
                self.file.append(&[0u8; TAGGED_HEADER_SIZE][..leftover])?;
            }
            self.block_offset = 0;
        }
        self.emit(FragmentType::Synced, &self.synced.to_le_bytes())
    }

    fn write_record(&mut self, payload: &[u8]) -> Result<()> {
        let mut left = payload;
        let mut begin = true;
        let hs = self.header_size();
        loop {
            let leftover = BLOCK_SIZE - self.block_offset;
            if leftover < hs {
                // Too little room for a header: zero-pad to the next block.
                if leftover > 0 {
                    self.file.append(&[0u8; TAGGED_HEADER_SIZE][..leftover])?;
                }
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - hs;
            let n = left.len().min(avail);
            let (frag, rest) = left.split_at(n);
            let end = rest.is_empty();
            let ty = match (begin, end) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, false) => FragmentType::Middle,
                (false, true) => FragmentType::Last,
            };
            self.emit(ty, frag)?;
            left = rest;
            begin = false;
            if end {
                return Ok(());
            }
        }
    }

    /// The size of the next fragment's header.
    fn header_size(&self) -> usize {
        if self.tag.is_some() {
            TAGGED_HEADER_SIZE
        } else {
            HEADER_SIZE
        }
    }

    fn emit(&mut self, ty: FragmentType, payload: &[u8]) -> Result<()> {
        let hs = self.header_size();
        if self.block_offset + hs + payload.len() > BLOCK_SIZE {
            // A fragment across a block boundary could not be read back.
            return Err(Error::InvalidArgument(format!(
                "a WAL fragment of {} bytes at offset {} of its block",
                payload.len(),
                self.block_offset
            )));
        }
        match self.tag {
            Some(tag) => self
                .file
                .append(&tagged_fragment_header(ty, tag, payload))?,
            None => self.file.append(&fragment_header(ty, payload))?,
        }
        self.file.append(payload)?;
        self.block_offset += hs + payload.len();
        Ok(())
    }
}
