//! The record of one backup (`meta/NNNNNNNN.backup` in a backup store):
//! what it holds and the manifest that opens it. Layout in
//! `docs/FORMAT.md` §14.

use crate::coding::{mask_crc, put_bytes, put_u32, put_u64, put_varint, unmask_crc, Reader};
use crate::error::{Error, Result};

/// `"STRATABK"` read as big-endian, stored little-endian.
pub(crate) const BACKUP_MAGIC: u64 = 0x5354_5241_5441_424B;
/// The meta format this build writes and reads.
pub(crate) const BACKUP_VERSION: u32 = 1;
/// The largest meta file a store reads (a manifest of a million tables is
/// well below it).
pub(crate) const MAX_META_BYTES: u64 = 1 << 30;

/// What kind of database file a backed-up file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A table (`NNNNNN.table`).
    Table = 1,
    /// A level-0 matrix row (`NNNNNN.row`).
    Row = 2,
}

/// One file a backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: Kind,
    /// Its number in the database (its name there).
    pub number: u64,
    pub size: u64,
    /// crc32c of its bytes.
    pub crc: u32,
    /// Its name under the store's `shared/`.
    pub name: String,
}

/// A decoded meta file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub id: u64,
    /// When the backup was taken (ms since the Unix epoch).
    pub created_ms: u64,
    /// The newest sequence number the backup holds.
    pub last_sequence: u64,
    /// The number of the manifest a restore writes.
    pub manifest_number: u64,
    /// That manifest's snapshot record (a version edit, FORMAT §6).
    pub manifest: Vec<u8>,
    pub files: Vec<Entry>,
}

impl Meta {
    /// The file's bytes: magic, version, fields, masked crc32c.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.manifest.len() + self.files.len() * 48);
        put_u64(&mut out, BACKUP_MAGIC);
        put_u32(&mut out, BACKUP_VERSION);
        put_varint(&mut out, self.id);
        put_varint(&mut out, self.created_ms);
        put_varint(&mut out, self.last_sequence);
        put_varint(&mut out, self.manifest_number);
        put_bytes(&mut out, &self.manifest);
        put_varint(&mut out, self.files.len() as u64);
        for f in &self.files {
            out.push(f.kind as u8);
            put_varint(&mut out, f.number);
            put_varint(&mut out, f.size);
            put_u32(&mut out, f.crc);
            put_bytes(&mut out, f.name.as_bytes());
        }
        let crc = mask_crc(crc32c::crc32c(&out));
        put_u32(&mut out, crc);
        out
    }

    /// Decodes a meta file. `Corruption` (offsets within `buf`) for a
    /// wrong magic, a bad checksum, a malformed field or a file name that
    /// is not a plain name; `NotSupported` for another format version.
    pub(crate) fn decode(buf: &[u8]) -> Result<Meta> {
        let bad =
            |at: usize, why: &str| Error::corruption("", at as u64, format!("backup meta: {why}"));
        if buf.len() < 16 {
            return Err(bad(0, "too short"));
        }
        let (body, tail) = buf.split_at(buf.len() - 4);
        let mut r = Reader::new(body);
        if r.u64() != Some(BACKUP_MAGIC) {
            return Err(bad(0, "wrong magic"));
        }
        let stored = unmask_crc(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if stored != crc32c::crc32c(body) {
            return Err(bad(body.len(), "checksum mismatch"));
        }
        let version = r.u32().ok_or_else(|| bad(8, "truncated version"))?;
        if version != BACKUP_VERSION {
            return Err(Error::NotSupported(format!(
                "backup meta format version {version} (this build reads {BACKUP_VERSION})"
            )));
        }
        let field = |r: &mut Reader| r.varint().ok_or_else(|| bad(r.pos(), "truncated field"));
        let id = field(&mut r)?;
        let created_ms = field(&mut r)?;
        let last_sequence = field(&mut r)?;
        let manifest_number = field(&mut r)?;
        let manifest = r
            .len_prefixed()
            .ok_or_else(|| bad(r.pos(), "truncated manifest"))?
            .to_vec();
        let count = field(&mut r)?;
        // Each entry takes at least 8 bytes: no count can claim more.
        if count > (r.remaining().len() / 8) as u64 {
            return Err(bad(r.pos(), "file count larger than the record"));
        }
        let mut files = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let at = r.pos();
            let kind = match r.u8() {
                Some(1) => Kind::Table,
                Some(2) => Kind::Row,
                _ => return Err(bad(at, "unknown file kind")),
            };
            let number = field(&mut r)?;
            let size = field(&mut r)?;
            let crc = r.u32().ok_or_else(|| bad(r.pos(), "truncated crc"))?;
            let name = r
                .len_prefixed()
                .and_then(|b| std::str::from_utf8(b).ok())
                .filter(|n| is_plain_name(n))
                .ok_or_else(|| bad(at, "bad file name"))?
                .to_string();
            files.push(Entry {
                kind,
                number,
                size,
                crc,
                name,
            });
        }
        if !r.is_empty() {
            return Err(bad(r.pos(), "bytes after the last file"));
        }
        Ok(Meta {
            id,
            created_ms,
            last_sequence,
            manifest_number,
            manifest,
            files,
        })
    }
}

/// True for a name a store may join to its `shared/` directory: no path
/// separators, not `.` or `..`, not empty.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            id: 7,
            created_ms: 1_700_000_000_000,
            last_sequence: 12_345,
            manifest_number: 42,
            manifest: vec![1, 2, 3, 4],
            files: vec![
                Entry {
                    kind: Kind::Table,
                    number: 5,
                    size: 4096,
                    crc: 0xdead_beef,
                    name: "000005-4096-u0123456789abcdef.table".into(),
                },
                Entry {
                    kind: Kind::Row,
                    number: 9,
                    size: 100,
                    crc: 1,
                    name: "000009-100-c00000001.row".into(),
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(Meta::decode(&bytes).expect("decodes"), m);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(Meta::decode(&b).is_err(), "a flip at {i} went unseen");
        }
        for n in 0..bytes.len() {
            assert!(
                Meta::decode(&bytes[..n]).is_err(),
                "a cut at {n} went unseen"
            );
        }
    }

    #[test]
    fn refuses_a_name_with_a_path_and_a_newer_version() {
        let mut m = sample();
        m.files[0].name = "../escape".into();
        assert!(matches!(
            Meta::decode(&m.encode()),
            Err(Error::Corruption { .. })
        ));
        let mut b = sample().encode();
        b[8] = 2;
        let body = b.len() - 4;
        let crc = mask_crc(crc32c::crc32c(&b[..body]));
        b[body..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(Meta::decode(&b), Err(Error::NotSupported(_))));
    }
}
