//! A log's fragments as the reader finds them, and how it tells a torn
//! tail from damage in the middle of a log (sync marks, or a valid record
//! after the damage).

use super::Reader;
use crate::coding::{get_u32, get_u64, unmask_crc};
use crate::wal::format::{
    tagged_fragment_crc, FragmentType, BLOCK_SIZE, HEADER_SIZE, SYNCED_MARK_LEN,
    TAGGED_FILE_HEADER_LEN, TAGGED_HEADER_SIZE,
};

/// One fragment as found at an offset.
pub(super) enum Frag {
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
pub(super) enum Raw {
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

impl Reader {
    /// A write-ahead log of format version 3 or later: its syncs are
    /// marked ([`FragmentType::Synced`]).
    pub(super) fn has_sync_marks(&self) -> bool {
        (self.log_number.is_some() && self.version >= 3) || self.tag.is_some()
    }

    /// The tag named by a tagged fragment that verifies: right after a
    /// format-4 header record, at the start of a later block (each block of
    /// a log begins with a fragment), or a sync mark anywhere (found by its
    /// shape: type 6, length 8).
    pub(super) fn tag_in_later_fragments(&self) -> Option<u32> {
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
    pub(super) fn ours_from(&self, pos: usize) -> impl Iterator<Item = usize> + '_ {
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
    pub(super) fn synced_after(&self, from: usize) -> usize {
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
    pub(super) fn valid_record_from(&self, mut pos: usize) -> bool {
        loop {
            match self.next_raw(pos) {
                Raw::Record { .. } => return true,
                Raw::Eof => return false,
                Raw::Damage { probe, .. } => pos = probe,
            }
        }
    }

    /// Assembles the record whose first fragment is at or after `pos`.
    pub(super) fn next_raw(&self, mut pos: usize) -> Raw {
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
    pub(super) fn fragment(&self, mut pos: usize) -> Frag {
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
pub(super) fn next_block(offset: usize) -> usize {
    (offset / BLOCK_SIZE + 1) * BLOCK_SIZE
}
