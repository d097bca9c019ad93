//! Reads records back from a write-ahead log, applying a [`WalRecovery`] mode.

use super::format::{
    FragmentType, FILE_HEADER_LEN, HEADER_SIZE, TAGGED_FILE_HEADER_LEN, TAGGED_VERSION, WAL_MAGIC,
    WAL_VERSION,
};
use crate::coding::{get_u32, get_u64};
use crate::error::{Error, Result};
use crate::io::SequentialFile;
use crate::options::WalRecovery;
use std::path::PathBuf;

mod fragments;

use fragments::{next_block, Frag, Raw};

/// Reads the records of one log file, front to back.
///
/// The file is read into memory on the first call to
/// [`read_record`](Self::read_record) (logs are bounded by the write buffer
/// size). Damage is classified as a *torn tail* or as *mid-file corruption*
/// (in a log with sync marks: whether a mark after it says a sync completed
/// past it; otherwise: whether a complete valid record follows it anywhere
/// in the file); the [`WalRecovery`] mode decides what each means (see
/// `read_record`).
pub struct Reader {
    file: Option<Box<dyn SequentialFile>>,
    path: PathBuf,
    mode: WalRecovery,
    data: Vec<u8>,
    /// Where the next fragment is looked for.
    pos: usize,
    header_checked: bool,
    log_number: Option<u64>,
    version: u32,
    /// The log's tag (format 4 on), from its header record: fragments
    /// after the header record are tagged exactly when it is known.
    tag: Option<u32>,
    last_good: u64,
    dropped: Option<(u64, String)>,
    skipped: u64,
    /// In `SkipAnyCorrupted`, true while inside a damaged region (between
    /// damage and the next good record), so a region counts once.
    in_damage: bool,
    done: bool,
    /// A sticky error: returned again by later calls.
    failed: Option<Error>,
    /// Take a zero-filled rest of the file as its end (write-ahead logs,
    /// see [`Reader::zero_filled_end`]).
    zero_filled_end: bool,
    /// With `zero_filled_end`: one past the last non-zero byte of `data`.
    data_end: usize,
}

impl Reader {
    /// A reader of `file`, which lives at `path` (used in errors).
    pub fn new(file: Box<dyn SequentialFile>, path: PathBuf, mode: WalRecovery) -> Self {
        Reader {
            file: Some(file),
            path,
            mode,
            data: Vec::new(),
            pos: 0,
            header_checked: false,
            log_number: None,
            version: WAL_VERSION,
            tag: None,
            last_good: 0,
            dropped: None,
            skipped: 0,
            in_damage: false,
            done: false,
            failed: None,
            zero_filled_end: false,
            data_end: 0,
        }
    }

    /// Makes a zero-filled rest of the file (from where a fragment would
    /// start) a clean end of the log in every mode, for write-ahead logs,
    /// which `Writer::sync_ahead` zero-fills and a mapped log
    /// (`FileSystem::create_log`) reserves ahead of their records.
    /// Without it (the manifest, which is never zero-filled) such a tail is
    /// damage like any other.
    pub fn zero_filled_end(mut self) -> Self {
        self.zero_filled_end = true;
        self
    }

    /// The next complete record's payload, or `Ok(None)` at the end.
    ///
    /// With [`zero_filled_end`](Self::zero_filled_end), a zero-filled rest
    /// of the file is its end. Damage (bad checksum, truncated header or
    /// payload, zeros followed by anything else, a fragment crossing a
    /// block, a broken fragment sequence, an unknown type) is handled by
    /// the recovery mode:
    ///
    /// | mode                   | torn tail              | mid-file damage          |
    /// |------------------------|------------------------|--------------------------|
    /// | TolerateCorruptedTail  | `Ok(None)`, `dropped()`| `Err(Corruption)`        |
    /// | AbsoluteConsistency    | `Err(Corruption)`      | `Err(Corruption)`        |
    /// | PointInTime            | `Ok(None)`, `dropped()`| `Ok(None)`, `dropped()`  |
    /// | SkipAnyCorrupted       | `Ok(None)`, `dropped()`| skip, count, continue    |
    ///
    /// In a log of format 3 or later (sync marks, [`FragmentType::Synced`]),
    /// damage is a torn tail unless an intact mark after it says a sync had
    /// completed past it (in format 4, a mark of this log: tagged with its
    /// tag; in format 3, any mark whose value is not past its own offset);
    /// in older logs and manifests, unless a complete valid record follows
    /// it. In a tagged log (format 4), bytes that carry another tag (zeros,
    /// a recycled file's earlier life) where a fragment would start are the
    /// end of the log when no fragment of the log follows them anywhere,
    /// and damage otherwise.
    ///
    /// A header record that verifies but has the wrong magic or length is
    /// `Corruption` in every mode, a newer format version `NotSupported`; a
    /// damaged header is treated like any other damage, except that valid
    /// records after it are `Corruption` in every mode (the log cannot be
    /// identified) — unless, with `zero_filled_end`, the header reads as
    /// zeros and no mark says a sync completed (a log never synced, whose
    /// first page a power loss may have lost). An empty file is a valid
    /// empty log. Errors are sticky.
    pub fn read_record(&mut self) -> Result<Option<Vec<u8>>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.read_inner();
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// Offset just past the last good record returned so far (or past the
    /// header record).
    pub fn last_good_offset(&self) -> u64 {
        self.last_good
    }

    /// `Some((offset, reason))` of the first damage if the reader stopped
    /// early or skipped damage.
    pub fn dropped(&self) -> Option<(u64, String)> {
        self.dropped.clone()
    }

    /// Damaged regions skipped in `SkipAnyCorrupted` mode (a region is a run
    /// of damage between two good records, or before the end of the file).
    pub fn skipped_records(&self) -> u64 {
        self.skipped
    }

    /// The format version in the file's header (valid once a record was
    /// read): how the records' write batches are encoded
    /// ([`crate::WriteBatch::decode_format`]).
    pub fn format_version(&self) -> u32 {
        self.version
    }

    /// The log number in the file header, once it has been read.
    pub fn log_number(&self) -> Option<u64> {
        self.log_number
    }

    fn load(&mut self) -> Result<()> {
        let Some(mut f) = self.file.take() else {
            return Ok(());
        };
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            let n = f.read(&mut chunk)?;
            if n == 0 {
                if self.zero_filled_end {
                    self.data_end = self.data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                }
                return Ok(());
            }
            self.data.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
        }
    }

    fn corruption(&self, offset: usize, reason: impl Into<String>) -> Error {
        Error::corruption(&self.path, offset as u64, reason)
    }

    fn read_inner(&mut self) -> Result<Option<Vec<u8>>> {
        self.load()?;
        if self.done {
            return Ok(None);
        }
        if !self.header_checked {
            self.header_checked = true;
            if !self.check_header()? {
                self.done = true;
                return Ok(None);
            }
        }
        loop {
            match self.next_raw(self.pos) {
                Raw::Record { payload, end } => {
                    self.pos = end;
                    self.last_good = end as u64;
                    self.in_damage = false;
                    return Ok(Some(payload));
                }
                Raw::Eof => {
                    self.done = true;
                    return Ok(None);
                }
                Raw::Damage {
                    offset,
                    reason,
                    resume,
                    probe,
                } => {
                    if self.mode == WalRecovery::SkipAnyCorrupted {
                        if !self.in_damage {
                            self.skipped += 1;
                            self.in_damage = true;
                        }
                        self.note_dropped(offset, &reason);
                        self.pos = resume;
                        continue;
                    }
                    self.done = true;
                    let tail = if self.has_sync_marks() {
                        // Blocks written since the last completed sync can
                        // reach the disk in any order, so valid records
                        // after damage there prove nothing; damage before
                        // where a sync is known to have completed is
                        // damage to synced records.
                        offset >= self.synced_after(offset)
                    } else {
                        !self.valid_record_from(probe)
                    };
                    return match (self.mode, tail) {
                        (WalRecovery::AbsoluteConsistency, _)
                        | (WalRecovery::TolerateCorruptedTail, false) => {
                            let what = if tail { "torn tail: " } else { "" };
                            Err(self.corruption(offset, format!("{what}{reason}")))
                        }
                        _ => {
                            self.note_dropped(offset, &reason);
                            Ok(None)
                        }
                    };
                }
            }
        }
    }

    fn note_dropped(&mut self, offset: usize, reason: &str) {
        if self.dropped.is_none() {
            self.dropped = Some((offset as u64, reason.to_string()));
        }
    }

    /// Verifies the header record. `Ok(false)` when the log is empty or its
    /// header is a torn tail that the mode tolerates.
    fn check_header(&mut self) -> Result<bool> {
        if self.data.is_empty() {
            return Ok(false);
        }
        match self.fragment(0) {
            Frag::Ok {
                ty: FragmentType::Header,
                payload: (a, b),
                next,
                ..
            } => {
                let p = self.data.get(a..b).unwrap_or(&[]);
                if p.len() != FILE_HEADER_LEN && p.len() != TAGGED_FILE_HEADER_LEN {
                    return Err(
                        self.corruption(0, format!("WAL header record of {} bytes", p.len()))
                    );
                }
                let magic = get_u64(p, 0).unwrap_or(0);
                if magic != WAL_MAGIC {
                    return Err(
                        self.corruption(0, format!("not a WAL file: bad magic {magic:#018x}"))
                    );
                }
                let version = get_u32(p, 8).unwrap_or(0);
                if version == 0 {
                    return Err(self.corruption(0, "WAL header has version 0"));
                }
                if version > WAL_VERSION {
                    return Err(Error::NotSupported(format!(
                        "{}: WAL format version {version} (this build reads up to {WAL_VERSION})",
                        self.path.display()
                    )));
                }
                let want = if version >= TAGGED_VERSION {
                    TAGGED_FILE_HEADER_LEN
                } else {
                    FILE_HEADER_LEN
                };
                if p.len() != want {
                    return Err(self.corruption(
                        0,
                        format!("WAL header of format {version} with {} bytes", p.len()),
                    ));
                }
                if version >= TAGGED_VERSION {
                    let tag = get_u32(p, 20).unwrap_or(0);
                    if tag == 0 {
                        return Err(self.corruption(0, "WAL header has tag 0"));
                    }
                    self.tag = Some(tag);
                }
                self.log_number = get_u64(p, 12);
                self.version = version;
                self.pos = next;
                self.last_good = next as u64;
                Ok(true)
            }
            Frag::Ok { ty, .. } => Err(self.corruption(
                0,
                format!("missing WAL header: first fragment has type {ty:?}"),
            )),
            Frag::Eof => Ok(false),
            // Untagged framing is used for the header: never foreign.
            Frag::Foreign { offset } => Err(self.corruption(offset, "missing WAL header")),
            Frag::Bad {
                offset,
                reason,
                skip,
            } => {
                let reason = format!("damaged WAL header: {reason}");
                // A tagged log's fragments name its tag: with it, its
                // records and marks can be found after a damaged header
                // (write-ahead logs only: manifests are never tagged).
                if self.zero_filled_end {
                    if let Some(tag) = self.tag_in_later_fragments() {
                        self.tag = Some(tag);
                        self.version = TAGGED_VERSION;
                    }
                }
                let header_len = HEADER_SIZE
                    + if self.tag.is_some() {
                        TAGGED_FILE_HEADER_LEN
                    } else {
                        FILE_HEADER_LEN
                    };
                // A write-ahead log whose header still reads as zeros and
                // no mark of which says a sync completed was never synced:
                // a power loss can leave its later pages without its first
                // (see `has_sync_marks`), so what follows proves nothing.
                let never_synced = self.zero_filled_end
                    && self
                        .data
                        .get(..header_len)
                        .is_some_and(|h| h.iter().all(|&b| b == 0))
                    && self.synced_after(0) == 0;
                // Where records would resume: a tagged log's next fragment
                // (the damaged header's length cannot be trusted to find it).
                let probe = match self.tag {
                    Some(_) => self.ours_from(0).next().unwrap_or(self.data.len()),
                    None => skip.unwrap_or_else(|| next_block(offset)),
                };
                if !never_synced && self.valid_record_from(probe) {
                    return Err(self.corruption(offset, reason));
                }
                if self.mode == WalRecovery::AbsoluteConsistency {
                    return Err(self.corruption(offset, format!("torn tail: {reason}")));
                }
                if self.mode == WalRecovery::SkipAnyCorrupted {
                    self.skipped += 1;
                }
                self.note_dropped(offset, &reason);
                Ok(false)
            }
        }
    }
}
