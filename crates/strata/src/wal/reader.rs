//! Reads records back from a write-ahead log, applying a [`WalRecovery`] mode.

use super::format::{
    tagged_fragment_crc, FragmentType, BLOCK_SIZE, FILE_HEADER_LEN, HEADER_SIZE, SYNCED_MARK_LEN,
    TAGGED_FILE_HEADER_LEN, TAGGED_HEADER_SIZE, TAGGED_VERSION, WAL_MAGIC, WAL_VERSION,
};
use crate::coding::{get_u32, get_u64, unmask_crc};
use crate::error::{Error, Result};
use crate::io::SequentialFile;
use crate::options::WalRecovery;
use std::path::PathBuf;

/// One fragment as found at an offset.
enum Frag {
    /// End of the data (possibly after a block trailer).
    Eof,
    /// Bytes that are no fragment of this log (a tagged log only: the tag
    /// field is not the log's): zeros ahead of the records, or a recycled
    /// file's earlier life. The end of the log unless fragments of the log
    /// follow ([`Reader::ours_from`]).
    Foreign { offset: usize },
    /// A fragment whose checksum verified.
    Ok {
        ty: FragmentType,
        start: usize,
        payload: (usize, usize),
        next: usize,
    },
    /// Damage at `offset`; nothing in this block after it can be trusted.
    /// `skip` is where the next fragment would be if the header's length
    /// field is right (used only to look for valid records after damage).
    Bad {
        offset: usize,
        reason: String,
        skip: Option<usize>,
    },
}

/// The result of assembling the next record.
enum Raw {
    Record {
        payload: Vec<u8>,
        end: usize,
    },
    Eof,
    /// Damage at `offset`; reading may resume at `resume` (always > the
    /// position the assembly started from: the next block after a bad
    /// fragment, whose length cannot be trusted). `probe` (>= the damaged
    /// fragment's end) trusts the bad fragment's length; it is only used to
    /// decide whether valid records follow the damage, where finding one too
    /// many errs on the side of reporting corruption.
    Damage {
        offset: usize,
        reason: String,
        resume: usize,
        probe: usize,
    },
}

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

    /// A write-ahead log of format version 3 or later: its syncs are
    /// marked ([`FragmentType::Synced`]).
    fn has_sync_marks(&self) -> bool {
        (self.log_number.is_some() && self.version >= 3) || self.tag.is_some()
    }

    /// The tag named by a tagged fragment that verifies: right after a
    /// format-4 header record, at the start of a later block (each block of
    /// a log begins with a fragment), or a sync mark anywhere (found by its
    /// shape: type 6, length 8).
    fn tag_in_later_fragments(&self) -> Option<u32> {
        let first = HEADER_SIZE + TAGGED_FILE_HEADER_LEN;
        let marks = self
            .data
            .windows(3)
            .enumerate()
            .filter(|(_, w)| *w == [SYNCED_MARK_LEN as u8, 0, FragmentType::Synced as u8])
            .filter_map(|(i, _)| i.checked_sub(4));
        std::iter::once(first)
            .chain((BLOCK_SIZE..self.data.len()).step_by(BLOCK_SIZE))
            .chain(marks)
            .find_map(|at| self.tagged_fragment_at(at, None))
    }

    /// The tag of a tagged fragment that verifies at `at` (with `want`,
    /// only one with that tag), whatever its type.
    fn tagged_fragment_at(&self, at: usize, want: Option<u32>) -> Option<u32> {
        let h = self.data.get(at..at + TAGGED_HEADER_SIZE)?;
        if BLOCK_SIZE - at % BLOCK_SIZE < TAGGED_HEADER_SIZE {
            return None;
        }
        let tag = get_u32(h, 7)?;
        if tag == 0 || want.is_some_and(|w| w != tag) {
            return None;
        }
        let n = usize::from(u16::from_le_bytes([h[4], h[5]]));
        if TAGGED_HEADER_SIZE + n > BLOCK_SIZE - at % BLOCK_SIZE {
            return None;
        }
        let payload = self
            .data
            .get(at + TAGGED_HEADER_SIZE..at + TAGGED_HEADER_SIZE + n)?;
        let ok = FragmentType::from_u8(h[6]).is_some_and(|t| t != FragmentType::Zero)
            && tagged_fragment_crc(h[6], tag, payload) == get_u32(h, 0)?;
        ok.then_some(tag)
    }

    /// Offsets after `pos` (exclusive) where a fragment of this (tagged)
    /// log verifies, found by its tag, in order.
    fn ours_from(&self, pos: usize) -> impl Iterator<Item = usize> + '_ {
        let tag = self.tag.unwrap_or(0).to_le_bytes();
        let from = pos + 1 + 7;
        let hay = self.data.get(from.min(self.data.len())..).unwrap_or(&[]);
        hay.windows(4)
            .enumerate()
            .filter(move |(_, w)| *w == tag)
            .map(move |(i, _)| from + i - 7)
            .filter(move |&at| self.tagged_fragment_at(at, self.tag).is_some())
    }

    /// The furthest offset up to which an intact sync mark at or after
    /// `from` says a sync had completed (0 when none). The block holding
    /// `from` is damaged there, so its marks are found by their shape (a
    /// type-6 header of length 8 whose checksum holds); every later block
    /// begins with a fragment and is parsed in order, by shape again only
    /// from damage in it on. (Parsing keeps a record's payload from being
    /// read as a mark wherever it can.)
    fn synced_after(&self, from: usize) -> usize {
        if self.tag.is_some() {
            // Marks of this log, found by its tag: no payload can forge one.
            let best = self
                .ours_from(from.saturating_sub(1))
                .filter_map(|at| match self.fragment(at) {
                    Frag::Ok {
                        ty, start, payload, ..
                    } if start == at => Some(self.mark_value(ty, start, payload)),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            return usize::try_from(best).unwrap_or(usize::MAX);
        }
        let end = self.data_end.max(from).min(self.data.len());
        let mut best = 0u64;
        let mut block = from / BLOCK_SIZE * BLOCK_SIZE;
        self.marks_by_shape(from, (block + BLOCK_SIZE).min(end), &mut best);
        block += BLOCK_SIZE;
        while block < end {
            let block_end = (block + BLOCK_SIZE).min(end);
            let mut pos = block;
            while pos < block_end && BLOCK_SIZE - pos % BLOCK_SIZE >= HEADER_SIZE {
                match self.fragment(pos) {
                    Frag::Ok {
                        ty,
                        start,
                        payload,
                        next,
                    } => {
                        best = best.max(self.mark_value(ty, start, payload));
                        pos = next;
                    }
                    Frag::Eof | Frag::Foreign { .. } => break,
                    Frag::Bad { .. } => {
                        self.marks_by_shape(pos, block_end, &mut best);
                        break;
                    }
                }
            }
            block += BLOCK_SIZE;
        }
        usize::try_from(best).unwrap_or(usize::MAX)
    }

    /// Raises `best` to the value of every intact mark starting in
    /// `[from, to)`, found by shape: wherever a type byte 6 could end a
    /// fragment header, that header is parsed like any other.
    fn marks_by_shape(&self, from: usize, to: usize, best: &mut u64) {
        let mut at = from;
        while let Some(i) = self
            .data
            .get(at..to)
            .and_then(|d| d.iter().position(|&b| b == FragmentType::Synced as u8))
        {
            let ty_at = at + i;
            at = ty_at + 1;
            let Some(pos) = ty_at.checked_sub(HEADER_SIZE - 1).filter(|&p| p >= from) else {
                continue;
            };
            if let Frag::Ok {
                ty, start, payload, ..
            } = self.fragment(pos)
            {
                if start == pos {
                    *best = (*best).max(self.mark_value(ty, start, payload));
                }
            }
        }
    }

    /// The offset a verified fragment at `start` says a sync reached, when
    /// it is a sync mark that carries one (0 otherwise). A mark is written
    /// after the sync it reports, so its value is never past its own
    /// offset: one that claims more is no mark (a payload's bytes in the
    /// shape of one, in an untagged log).
    fn mark_value(&self, ty: FragmentType, start: usize, (a, b): (usize, usize)) -> u64 {
        if ty != FragmentType::Synced || b - a != SYNCED_MARK_LEN {
            return 0;
        }
        let v = get_u64(&self.data, a).unwrap_or(0);
        if v <= start as u64 {
            v
        } else {
            0
        }
    }

    /// True when a complete valid record starts at or after `pos`.
    fn valid_record_from(&self, mut pos: usize) -> bool {
        loop {
            match self.next_raw(pos) {
                Raw::Record { .. } => return true,
                Raw::Eof => return false,
                Raw::Damage { probe, .. } => pos = probe,
            }
        }
    }

    /// Assembles the record whose first fragment is at or after `pos`.
    fn next_raw(&self, mut pos: usize) -> Raw {
        // (start offset, payload so far) of a fragmented record in progress.
        let mut partial: Option<(usize, Vec<u8>)> = None;
        loop {
            let (ty, start, (a, b), next) = match self.fragment(pos) {
                Frag::Eof => {
                    return match partial {
                        None => Raw::Eof,
                        Some((start, _)) => Raw::Damage {
                            offset: start,
                            reason: "file ends inside a fragmented record".into(),
                            resume: self.data.len(),
                            probe: self.data.len(),
                        },
                    }
                }
                Frag::Bad {
                    offset,
                    reason,
                    skip,
                } => {
                    let resume = next_block(offset);
                    return Raw::Damage {
                        offset,
                        reason,
                        resume,
                        probe: skip.unwrap_or(resume),
                    };
                }
                Frag::Foreign { offset } => {
                    // Reading resumes at the next fragment of the log, found
                    // once (each byte is searched once however long the
                    // foreign region).
                    let next = self.ours_from(offset).next();
                    return match (partial, next) {
                        (Some((start, _)), _) => {
                            let resume = next.unwrap_or(self.data.len());
                            Raw::Damage {
                                offset: start,
                                reason: format!(
                                    "record starting at {start} runs into bytes of no record \
                                     of this log at {offset}"
                                ),
                                resume,
                                probe: resume,
                            }
                        }
                        (None, Some(resume)) => Raw::Damage {
                            offset,
                            reason: "bytes of no record of this log, with records of it \
                                     after them"
                                .into(),
                            resume,
                            probe: resume,
                        },
                        (None, None) => Raw::Eof,
                    };
                }
                Frag::Ok {
                    ty,
                    start,
                    payload,
                    next,
                } => (ty, start, payload, next),
            };
            let payload = self.data.get(a..b).unwrap_or(&[]);
            match (ty, partial.as_mut()) {
                (FragmentType::Full | FragmentType::First, Some((first, _))) => {
                    // Re-read this fragment as the start of the next record.
                    return Raw::Damage {
                        offset: start,
                        reason: format!("record starting at {first} has no last fragment"),
                        resume: start,
                        probe: start,
                    };
                }
                (FragmentType::Full, None) => {
                    return Raw::Record {
                        payload: payload.to_vec(),
                        end: next,
                    }
                }
                (FragmentType::First, None) => partial = Some((start, payload.to_vec())),
                (FragmentType::Middle, Some((_, buf))) => buf.extend_from_slice(payload),
                (FragmentType::Last, Some((_, buf))) => {
                    buf.extend_from_slice(payload);
                    return Raw::Record {
                        payload: std::mem::take(buf),
                        end: next,
                    };
                }
                (FragmentType::Middle | FragmentType::Last, None) => {
                    return Raw::Damage {
                        offset: start,
                        reason: format!("{ty:?} fragment without a first fragment"),
                        resume: next,
                        probe: next,
                    }
                }
                // A sync mark between records is skipped; the writer never
                // puts one inside a record.
                (FragmentType::Synced, None) if self.has_sync_marks() => {}
                (FragmentType::Header | FragmentType::Zero | FragmentType::Synced, _) => {
                    return Raw::Damage {
                        offset: start,
                        reason: format!("unexpected {ty:?} fragment"),
                        resume: next,
                        probe: next,
                    }
                }
            }
            pos = next;
        }
    }

    /// Parses the fragment at `pos`, skipping a block trailer first. The
    /// header record at offset 0 is always untagged; every later fragment
    /// of a tagged log is tagged.
    fn fragment(&self, mut pos: usize) -> Frag {
        let len = self.data.len();
        let hs = if pos == 0 || self.tag.is_none() {
            HEADER_SIZE
        } else {
            TAGGED_HEADER_SIZE
        };
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if block_left < hs {
            pos += block_left;
        }
        if pos >= len {
            return Frag::Eof;
        }
        // A zero-filled rest of a write-ahead log is its end: the writer
        // zero-fills ahead of synced records (`Writer::sync_ahead`). Zeros
        // with anything after them are damage (in a tagged log: foreign
        // bytes, below).
        if self.zero_filled_end && pos >= self.data_end {
            return Frag::Eof;
        }
        let bad = |reason: String| Frag::Bad {
            offset: pos,
            reason,
            skip: None,
        };
        let bad_len = |reason: String, n: usize| Frag::Bad {
            offset: pos,
            reason,
            skip: Some(pos + hs + n),
        };
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        let Some(h) = self.data.get(pos..pos + hs) else {
            // Bytes of the tag field that are present and not the log's:
            // no fragment of it.
            if let (Some(tag), Some(part)) = (self.tag, self.data.get(pos + 7..)) {
                if hs == TAGGED_HEADER_SIZE
                    && !part.is_empty()
                    && !tag.to_le_bytes().starts_with(part)
                {
                    return Frag::Foreign { offset: pos };
                }
            }
            return bad(format!(
                "truncated fragment header ({} of {hs} bytes)",
                len - pos
            ));
        };
        let stored = get_u32(h, 0).unwrap_or(0);
        let n = usize::from(u16::from_le_bytes([h[4], h[5]]));
        let tyb = h[6];
        let tag = if hs == TAGGED_HEADER_SIZE {
            let tag = get_u32(h, 7).unwrap_or(0);
            let ours = self.tag.unwrap_or(0);
            if tag != ours {
                // A fragment of the log whose tag alone is damaged still
                // verifies with the log's tag: damage, not foreign bytes.
                let damaged_tag = hs + n <= block_left
                    && self
                        .data
                        .get(pos + hs..pos + hs + n)
                        .is_some_and(|p| tagged_fragment_crc(tyb, ours, p) == stored);
                if !damaged_tag {
                    return Frag::Foreign { offset: pos };
                }
                return bad_len(format!("fragment with a damaged tag (type {tyb})"), n);
            }
            Some(tag)
        } else {
            None
        };
        if tyb == FragmentType::Zero as u8 {
            let reason = if stored == 0 && n == 0 {
                "zero-filled region".to_string()
            } else {
                format!("fragment of reserved type 0 (length {n})")
            };
            return bad_len(reason, n.min(block_left - hs));
        }
        if hs + n > block_left {
            return bad(format!(
                "fragment length {n} crosses the block boundary ({block_left} bytes left in block)"
            ));
        }
        let (a, b) = (pos + hs, pos + hs + n);
        let Some(payload) = self.data.get(a..b) else {
            return bad(format!(
                "truncated fragment: length {n}, {} bytes present",
                len - a
            ));
        };
        let verified = match tag {
            Some(tag) => tagged_fragment_crc(tyb, tag, payload) == stored,
            None => crc32c::crc32c_append(crc32c::crc32c(&[tyb]), payload) == unmask_crc(stored),
        };
        if !verified {
            return bad_len(
                format!("fragment checksum mismatch (type {tyb}, length {n})"),
                n,
            );
        }
        match FragmentType::from_u8(tyb) {
            Some(ty) => Frag::Ok {
                ty,
                start: pos,
                payload: (a, b),
                next: b,
            },
            None => bad_len(format!("unknown fragment type {tyb}"), n),
        }
    }
}

/// The start of the block after the one holding `offset`.
fn next_block(offset: usize) -> usize {
    (offset / BLOCK_SIZE + 1) * BLOCK_SIZE
}
