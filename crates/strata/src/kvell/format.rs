//! KVell's on-disk formats (docs/FORMAT.md §13): the `KVELL` file, the slab
//! file's header page, and the slot (item or tombstone) with its 24-byte
//! header. Every slot carries its own (masked) crc32c, so a torn page write can only
//! damage the slot being written: the other slots of the page are rewritten
//! with the bytes they already had.

use crate::coding::mask_crc;
use crate::error::{Error, Result};
use crate::types::{MAX_KEY_LEN, MAX_VALUE_LEN};
use std::path::Path;

/// The unit of every slab read and write.
pub const PAGE: usize = 4096;
/// Bytes before a slot's key.
pub const SLOT_HEADER: usize = 24;
/// The `KVELL` file and every slab header page start with it.
pub const MAGIC: &[u8; 8] = b"STRATAKV";
pub const VERSION: u32 = 1;
/// A slot header's magic (after the crc).
pub const SLOT_MAGIC: u16 = 0x4B56;
pub const SLOT_VERSION: u8 = 1;
/// The name of the file that marks a KVell directory.
pub const META_FILE: &str = "KVELL";
/// Bytes of the `KVELL` file.
pub const META_LEN: usize = 20;

/// A slot's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Item = 1,
    Tombstone = 2,
}

/// Slot sizes of the classes that share a page: ⌊4096 / n⌋ for n slots per
/// page, so no slot spans two pages and little of a page is left over.
const SMALL: [usize; 11] = [64, 128, 256, 409, 512, 682, 819, 1024, 1365, 2048, 4096];

/// Page counts of the classes whose slot spans whole pages (after the 4096 B
/// class): about ×1.5 apart, up to the largest item.
fn large_pages() -> &'static [u32] {
    static PAGES: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    PAGES.get_or_init(|| {
        let max = (SLOT_HEADER + MAX_KEY_LEN + MAX_VALUE_LEN).div_ceil(PAGE) as u32;
        let mut v = vec![2u32, 3];
        while *v.last().unwrap_or(&max) < max {
            let n = v.len();
            // 2, 3, 4, 6, 8, 12, 16, 24, ...: each twice the one two back.
            v.push(v[n - 2] * 2);
        }
        v
    })
}

/// The number of size classes.
pub fn classes() -> usize {
    SMALL.len() + large_pages().len()
}

/// Slot geometry of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// Bytes of a slot.
    pub slot: usize,
    /// Slots per page (1 for classes of whole pages).
    pub per_page: u32,
    /// Pages per slot (1 for classes sharing a page).
    pub pages: u32,
}

impl Class {
    pub fn of(index: usize) -> Option<Class> {
        if let Some(&slot) = SMALL.get(index) {
            return Some(Class {
                slot,
                per_page: (PAGE / slot) as u32,
                pages: 1,
            });
        }
        let pages = *large_pages().get(index - SMALL.len())?;
        Some(Class {
            slot: pages as usize * PAGE,
            per_page: 1,
            pages,
        })
    }

    /// The first page (counting the header page 0) and the byte offset in it
    /// of slot `s`.
    pub fn locate(&self, s: u32) -> (u64, usize) {
        if self.pages == 1 {
            let page = 1 + u64::from(s / self.per_page);
            (page, (s % self.per_page) as usize * self.slot)
        } else {
            (1 + u64::from(s) * u64::from(self.pages), 0)
        }
    }

    /// Slots held by `pages` data pages.
    pub fn slots_in(&self, pages: u64) -> u64 {
        if self.pages == 1 {
            pages * u64::from(self.per_page)
        } else {
            pages / u64::from(self.pages)
        }
    }
}

/// The smallest class whose slot holds an item of `key` and `value` bytes.
pub fn class_for(key: usize, value: usize) -> usize {
    let need = SLOT_HEADER + key + value;
    if let Some(i) = SMALL.iter().position(|&s| s >= need) {
        return i;
    }
    let pages = need.div_ceil(PAGE) as u32;
    SMALL.len()
        + large_pages()
            .iter()
            .position(|&p| p >= pages)
            .unwrap_or(large_pages().len() - 1)
}

/// Checks a key and value against the limits every engine shares.
pub fn check_sizes(key: usize, value: usize) -> Result<()> {
    if key > MAX_KEY_LEN {
        return Err(Error::InvalidArgument(format!(
            "key of {key} bytes exceeds the limit of {MAX_KEY_LEN}"
        )));
    }
    if value > MAX_VALUE_LEN {
        return Err(Error::InvalidArgument(format!(
            "value of {value} bytes exceeds the limit of {MAX_VALUE_LEN}"
        )));
    }
    Ok(())
}

/// Writes a slot into `out` (at least `SLOT_HEADER + key + value` bytes).
pub fn encode_slot(out: &mut [u8], kind: Kind, ts: u64, key: &[u8], value: &[u8]) {
    let len = SLOT_HEADER + key.len() + value.len();
    out[4..6].copy_from_slice(&SLOT_MAGIC.to_le_bytes());
    out[6] = SLOT_VERSION;
    out[7] = kind as u8;
    out[8..12].copy_from_slice(&(key.len() as u32).to_le_bytes());
    out[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    out[16..24].copy_from_slice(&ts.to_le_bytes());
    out[SLOT_HEADER..SLOT_HEADER + key.len()].copy_from_slice(key);
    out[SLOT_HEADER + key.len()..len].copy_from_slice(value);
    let crc = mask_crc(crc32c::crc32c(&out[4..len]));
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Marks a slot free: zeroes its header (the magic no longer matches).
pub fn erase_slot(out: &mut [u8]) {
    out[..SLOT_HEADER].fill(0);
}

/// A decoded slot, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot<'a> {
    pub kind: Kind,
    pub ts: u64,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Why a slot's bytes are not a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// No slot header: a free or never-written slot.
    Empty,
    /// A header whose lengths or crc do not hold: torn or damaged.
    Damaged(&'static str),
}

/// Decodes the slot at the start of `b` (the slot's bytes).
pub fn decode_slot(b: &[u8]) -> std::result::Result<Slot<'_>, Bad> {
    if b.len() < SLOT_HEADER {
        return Err(Bad::Empty);
    }
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if u16::from_le_bytes([b[4], b[5]]) != SLOT_MAGIC {
        return Err(if b[..SLOT_HEADER].iter().all(|&x| x == 0) {
            Bad::Empty
        } else {
            Bad::Damaged("bad slot magic")
        });
    }
    if b[6] != SLOT_VERSION {
        return Err(Bad::Damaged("unknown slot version"));
    }
    let kind = match b[7] {
        1 => Kind::Item,
        2 => Kind::Tombstone,
        _ => return Err(Bad::Damaged("unknown slot kind")),
    };
    let klen = u32_at(8) as usize;
    let vlen = u32_at(12) as usize;
    if klen > MAX_KEY_LEN || vlen > MAX_VALUE_LEN || (kind == Kind::Tombstone && vlen != 0) {
        return Err(Bad::Damaged("slot lengths out of range"));
    }
    let len = SLOT_HEADER + klen + vlen;
    if len > b.len() {
        return Err(Bad::Damaged("slot longer than its class"));
    }
    if mask_crc(crc32c::crc32c(&b[4..len])) != u32_at(0) {
        return Err(Bad::Damaged("slot checksum mismatch"));
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&b[16..24]);
    Ok(Slot {
        kind,
        ts: u64::from_le_bytes(ts),
        key: &b[SLOT_HEADER..SLOT_HEADER + klen],
        value: &b[SLOT_HEADER + klen..len],
    })
}

/// The kind, timestamp and key the header of a slot that does not decode
/// still names: its magic, version and kind hold, its lengths are in range
/// and its key lies within `b` (the slot's bytes). `None` when the header
/// names nothing. The checksum is not checked (the caller found it wrong),
/// so the key named may itself be the damaged part.
pub fn named_by_header(b: &[u8]) -> Option<(Kind, u64, &[u8])> {
    if b.len() < SLOT_HEADER
        || u16::from_le_bytes([b[4], b[5]]) != SLOT_MAGIC
        || b[6] != SLOT_VERSION
    {
        return None;
    }
    let kind = match b[7] {
        1 => Kind::Item,
        2 => Kind::Tombstone,
        _ => return None,
    };
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    let (klen, vlen) = (u32_at(8), u32_at(12));
    if klen > MAX_KEY_LEN || vlen > MAX_VALUE_LEN || SLOT_HEADER + klen > b.len() {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&b[16..24]);
    Some((
        kind,
        u64::from_le_bytes(ts),
        &b[SLOT_HEADER..SLOT_HEADER + klen],
    ))
}

/// The header page of a slab file: magic, version, the worker and worker
/// count, the class and its slot size, crc32c of the 28 bytes before it.
pub fn encode_header(out: &mut [u8], worker: u32, workers: u32, class: u32) {
    let slot = Class::of(class as usize).map_or(0, |c| c.slot) as u32;
    out[..PAGE].fill(0);
    out[0..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&worker.to_le_bytes());
    out[16..20].copy_from_slice(&workers.to_le_bytes());
    out[20..24].copy_from_slice(&class.to_le_bytes());
    out[24..28].copy_from_slice(&slot.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&out[0..28]));
    out[28..32].copy_from_slice(&crc.to_le_bytes());
}

/// Checks a slab header page against the worker, worker count and class
/// the file name gives.
pub fn check_header(page: &[u8], file: &Path, worker: u32, workers: u32, class: u32) -> Result<()> {
    let bad = |reason: &str| Error::Corruption {
        file: file.to_path_buf(),
        offset: 0,
        reason: reason.to_string(),
    };
    if page.len() < 32 || &page[0..8] != MAGIC {
        return Err(bad("not a KVell slab (bad magic)"));
    }
    let u32_at = |i: usize| u32::from_le_bytes([page[i], page[i + 1], page[i + 2], page[i + 3]]);
    if mask_crc(crc32c::crc32c(&page[0..28])) != u32_at(28) {
        return Err(bad("slab header checksum mismatch"));
    }
    if u32_at(8) != VERSION {
        return Err(bad(&format!("unknown slab version {}", u32_at(8))));
    }
    let slot = Class::of(class as usize).map_or(0, |c| c.slot) as u32;
    if u32_at(12) != worker || u32_at(16) != workers || u32_at(20) != class || u32_at(24) != slot {
        return Err(bad("slab header does not match its file name"));
    }
    Ok(())
}

/// The `KVELL` file: magic, version, worker count, crc32c.
pub fn encode_meta(workers: u32) -> [u8; META_LEN] {
    let mut b = [0u8; META_LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&workers.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&b[0..16]));
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The worker count of a `KVELL` file.
pub fn decode_meta(b: &[u8], file: &Path) -> Result<u32> {
    let bad = |reason: &str| Error::Corruption {
        file: file.to_path_buf(),
        offset: 0,
        reason: reason.to_string(),
    };
    if b.len() != META_LEN || &b[0..8] != MAGIC {
        return Err(bad("not a KVell meta file"));
    }
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if mask_crc(crc32c::crc32c(&b[0..16])) != u32_at(16) {
        return Err(bad("meta checksum mismatch"));
    }
    if u32_at(8) != VERSION {
        return Err(bad(&format!("unknown KVell version {}", u32_at(8))));
    }
    let w = u32_at(12);
    if w == 0 || w > 256 {
        return Err(bad("worker count out of range"));
    }
    Ok(w)
}

/// The slab file of `worker` and `class`.
pub fn slab_name(worker: u32, class: u32) -> String {
    format!("slab-{worker:03}-{class:02}.kv")
}

/// The worker and class of a slab file name.
pub fn parse_slab_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("slab-")?.strip_suffix(".kv")?;
    let (w, c) = rest.split_once('-')?;
    if w.len() != 3 || c.len() != 2 {
        return None;
    }
    Some((w.parse().ok()?, c.parse().ok()?))
}

/// Every slot of a page of class `class` (a page of a small class, or the
/// first page of a large slot) that decodes or is damaged, for `strata
/// verify` and the fuzz target: `(slot index in the page, result)`.
pub fn decode_page(page: &[u8], class: usize) -> Vec<(usize, std::result::Result<Slot<'_>, Bad>)> {
    let Some(c) = Class::of(class) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in 0..c.per_page as usize {
        let start = i * c.slot;
        let end = (start + c.slot).min(page.len());
        if start >= end {
            break;
        }
        match decode_slot(&page[start..end]) {
            Err(Bad::Empty) => {}
            r => out.push((i, r)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_and_never_span_pages() {
        for i in 0..classes() {
            let c = Class::of(i).expect("class");
            if c.pages == 1 {
                assert!(c.slot * c.per_page as usize <= PAGE);
            } else {
                assert_eq!(c.slot, c.pages as usize * PAGE);
            }
        }
        assert!(Class::of(classes()).is_none());
        for (k, v) in [
            (0, 0),
            (16, 24),
            (16, 100),
            (16, 1024),
            (16, 4056),
            (16, 4057),
            (100, 1 << 20),
        ] {
            let c = Class::of(class_for(k, v)).expect("class");
            assert!(c.slot >= SLOT_HEADER + k + v, "{k}+{v} fits");
        }
        let big = class_for(MAX_KEY_LEN, MAX_VALUE_LEN);
        assert!(Class::of(big).expect("class").slot >= SLOT_HEADER + MAX_KEY_LEN + MAX_VALUE_LEN);
        // 1 KiB values with 16-byte keys: three per page.
        assert_eq!(Class::of(class_for(16, 1024)).expect("class").per_page, 3);
    }

    #[test]
    fn slots_round_trip_and_every_flipped_byte_is_caught() {
        let mut page = vec![0u8; PAGE];
        encode_slot(&mut page[64..], Kind::Item, 7, b"key", b"value");
        let s = decode_slot(&page[64..128]).expect("slot");
        assert_eq!(
            (s.kind, s.ts, s.key, s.value),
            (Kind::Item, 7, &b"key"[..], &b"value"[..])
        );
        for i in 0..SLOT_HEADER + 8 {
            let mut p = page.clone();
            p[64 + i] ^= 0x40;
            assert!(decode_slot(&p[64..128]).is_err(), "flip at {i}");
        }
        assert_eq!(decode_slot(&page[0..64]), Err(Bad::Empty));
        erase_slot(&mut page[64..]);
        assert_eq!(decode_slot(&page[64..128]), Err(Bad::Empty));
        encode_slot(&mut page[128..], Kind::Tombstone, 9, b"gone", b"");
        let t = decode_slot(&page[128..192]).expect("tombstone");
        assert_eq!((t.kind, t.value.len()), (Kind::Tombstone, 0));
        assert_eq!(decode_page(&page, 0).len(), 1);
    }

    #[test]
    fn a_damaged_slot_names_its_key_only_while_its_header_holds() {
        let mut slot = vec![0u8; 128];
        encode_slot(&mut slot, Kind::Item, 7, b"key", b"value");
        // Damage in the value: the header still names the key.
        slot[SLOT_HEADER + 4] ^= 1;
        assert!(matches!(decode_slot(&slot), Err(Bad::Damaged(_))));
        assert_eq!(named_by_header(&slot), Some((Kind::Item, 7, &b"key"[..])));
        // Damage in the magic, the kind or a length: nothing is named.
        for at in [4, 7, 11] {
            let mut s = slot.clone();
            s[at] ^= 0x80;
            assert_eq!(named_by_header(&s), None, "flip at {at}");
        }
        // A key running past the slot names nothing either.
        let mut s = slot.clone();
        s[8..12].copy_from_slice(&200u32.to_le_bytes());
        assert_eq!(named_by_header(&s), None);
        assert_eq!(named_by_header(&[0u8; 64]), None);
    }

    #[test]
    fn headers_and_names() {
        let mut page = vec![0u8; PAGE];
        encode_header(&mut page, 3, 4, 8);
        let f = Path::new("x");
        check_header(&page, f, 3, 4, 8).expect("header");
        assert!(check_header(&page, f, 2, 4, 8).is_err());
        page[9] ^= 1;
        assert!(check_header(&page, f, 3, 4, 8).is_err());
        assert_eq!(decode_meta(&encode_meta(5), f).expect("meta"), 5);
        let mut m = encode_meta(5);
        m[12] = 6;
        assert!(decode_meta(&m, f).is_err());
        assert_eq!(parse_slab_name(&slab_name(7, 12)), Some((7, 12)));
        assert_eq!(parse_slab_name("slab-7-12.kv"), None);
    }
}
