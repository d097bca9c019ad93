//! One bloom filter per table over user keys.
//!
//! Two encodings, told apart by the first byte (docs/FORMAT.md, "Filter
//! block"):
//!
//! - version 1, the standard bloom filter: `u8 1 | u8 k | u32 LE num_bits |
//!   bitmap[num_bits/8]`. Probe `i` (0..k) tests bit `(h1 + i*h2) mod
//!   num_bits` with `h = xxh3_64(key)`, `h1 = h`, `h2 = h.rotate_left(32) |
//!   1` (wrapping u64 arithmetic); bit `b` is bit `b % 8` of byte `b / 8`.
//!   Its k probes land on up to k cache lines.
//! - version 2, the cache-local filter written since the fourteenth
//!   session: `u8 2 | u8 k | u32 LE num_lines | lines[num_lines][64]`. The
//!   low 32 bits of `h` pick one 64-byte line (`(lo * num_lines) >> 32`);
//!   all k probes test bits of that line, so a lookup touches one cache
//!   line. Probe bits come from the high 32 bits `g`: probe `i` tests bit
//!   `g_i >> 23` (0..512) of the line, with `g_0 = g` and `g_{i+1} =
//!   g_i * 0x9E37_79B9` (wrapping u32). Bit `b` of a line is bit `b % 8` of
//!   its byte `b / 8`.
//!
//! An empty filter block means "may contain".

use crate::coding::{put_u32, Reader};
use crate::error::{corrupt, Result};
use xxhash_rust::xxh3::xxh3_64;

/// The standard bloom filter (read only; tables written before version 2).
const STANDARD: u8 = 1;
/// The cache-local filter the builder writes.
const LOCAL: u8 = 2;
const HEADER_LEN: usize = 6;
/// Bytes of one line of a cache-local filter.
const LINE: usize = 64;
/// Lines cap: a 512 MiB filter (about the standard filter's cap).
const MAX_LINES: usize = 1 << 23;
/// Multiplier stepping a cache-local filter's probe bits (odd; the golden
/// ratio's 32-bit fraction).
const STEP: u32 = 0x9E37_79B9;

/// Number of probes for `bits_per_key`: round(bits * ln 2), clamped to 1..=30.
pub fn num_probes(bits_per_key: usize) -> u8 {
    ((bits_per_key as f64 * 0.69).round() as usize).clamp(1, 30) as u8
}

#[inline]
fn probe_pair(h: u64) -> (u64, u64) {
    (h, h.rotate_left(32) | 1)
}

/// The line of a cache-local filter of `lines` lines that `h` maps to.
#[inline]
pub(crate) fn line_of(h: u64, lines: usize) -> usize {
    (((h & 0xffff_ffff) * lines as u64) >> 32) as usize
}

/// The bits (0..512) the k probes of `h` test in its line.
#[inline]
pub(crate) fn local_bits(h: u64, k: u8) -> impl Iterator<Item = usize> {
    let mut g = (h >> 32) as u32;
    (0..k).map(move |_| {
        let b = (g >> 23) as usize;
        g = g.wrapping_mul(STEP);
        b
    })
}

/// Collects key hashes while a table is written.
#[derive(Debug, Default)]
pub struct BloomBuilder {
    hashes: Vec<u64>,
}

impl BloomBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a user key (callers skip consecutive duplicates).
    pub fn add(&mut self, user_key: &[u8]) {
        self.hashes.push(xxh3_64(user_key));
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Encodes the cache-local filter (version 2); empty when there are no
    /// keys or `bits_per_key == 0`.
    pub fn finish(&self, bits_per_key: usize) -> Vec<u8> {
        if bits_per_key == 0 || self.hashes.is_empty() {
            return Vec::new();
        }
        let k = num_probes(bits_per_key);
        let bits = self.hashes.len().saturating_mul(bits_per_key);
        let lines = bits.div_ceil(LINE * 8).clamp(1, MAX_LINES);
        let mut out = Vec::with_capacity(HEADER_LEN + lines * LINE);
        out.push(LOCAL);
        out.push(k);
        put_u32(&mut out, lines as u32);
        out.resize(HEADER_LEN + lines * LINE, 0);
        let map = out.get_mut(HEADER_LEN..).unwrap_or_default();
        for (i, &h) in self.hashes.iter().enumerate() {
            if i % 4096 == 4095 {
                crate::sched::yield_point();
            }
            let base = line_of(h, lines) * LINE;
            for b in local_bits(h, k) {
                if let Some(byte) = map.get_mut(base + b / 8) {
                    *byte |= 1 << (b % 8);
                }
            }
        }
        out
    }

    /// Encodes the standard filter (version 1) that tables written before
    /// version 2 carry; kept to test that they still read.
    #[cfg(test)]
    pub fn finish_standard(&self, bits_per_key: usize) -> Vec<u8> {
        if bits_per_key == 0 || self.hashes.is_empty() {
            return Vec::new();
        }
        let k = num_probes(bits_per_key);
        let bits = (self.hashes.len().saturating_mul(bits_per_key)).max(64);
        let bits = bits.div_ceil(8).min((u32::MAX / 8) as usize) * 8;
        let mut out = Vec::with_capacity(HEADER_LEN + bits / 8);
        out.push(STANDARD);
        out.push(k);
        put_u32(&mut out, bits as u32);
        out.resize(HEADER_LEN + bits / 8, 0);
        let map = out.get_mut(HEADER_LEN..).unwrap_or_default();
        let nbits = bits as u64;
        for &h in &self.hashes {
            let (h1, h2) = probe_pair(h);
            for i in 0..u64::from(k) {
                let b = h1.wrapping_add(i.wrapping_mul(h2)) % nbits;
                if let Some(byte) = map.get_mut((b / 8) as usize) {
                    *byte |= 1 << (b % 8);
                }
            }
        }
        out
    }
}

/// One 64-byte line of a cache-local filter, aligned so that a probe
/// touches one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; LINE]);

/// The bitmap of a decoded filter.
#[derive(Debug, Clone)]
enum Bits {
    Standard { num_bits: u64, bits: Vec<u8> },
    Local(Vec<Line>),
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct Bloom {
    k: u8,
    bits: Bits,
}

impl Bloom {
    /// Decodes a filter block; `Ok(None)` for an empty block (no filter).
    pub fn decode(buf: &[u8]) -> Result<Option<Bloom>> {
        if buf.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(buf);
        let version = r.u8().ok_or_else(|| corrupt(0, "short filter"))?;
        if version != STANDARD && version != LOCAL {
            return Err(corrupt(0, format!("unknown filter version {version}")));
        }
        let k = r.u8().ok_or_else(|| corrupt(1, "short filter"))?;
        if !(1..=30).contains(&k) {
            return Err(corrupt(1, format!("bad filter probe count {k}")));
        }
        let n = r.u32().ok_or_else(|| corrupt(2, "short filter"))?;
        let map = r.remaining();
        let bits = if version == STANDARD {
            if n == 0 || n % 8 != 0 || map.len() != n as usize / 8 {
                return Err(corrupt(
                    2,
                    format!("filter of {n} bits has {} bitmap bytes", map.len()),
                ));
            }
            Bits::Standard {
                num_bits: u64::from(n),
                bits: map.to_vec(),
            }
        } else {
            let lines = n as usize;
            if lines == 0 || lines > MAX_LINES || map.len() != lines * LINE {
                return Err(corrupt(
                    2,
                    format!("filter of {n} lines has {} bitmap bytes", map.len()),
                ));
            }
            Bits::Local(
                map.chunks_exact(LINE)
                    .map(|c| {
                        let mut l = Line([0; LINE]);
                        l.0.copy_from_slice(c);
                        l
                    })
                    .collect(),
            )
        };
        Ok(Some(Bloom { k, bits }))
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(xxh3_64(user_key))
    }

    /// The hash [`may_contain_hash`](Self::may_contain_hash) takes for
    /// `user_key`, after asking the CPU for the line it will test (a
    /// cache-local filter's one line), so that work done meanwhile waits
    /// for the miss together with it.
    pub fn prefetch(&self, user_key: &[u8]) -> u64 {
        let h = xxh3_64(user_key);
        if let Bits::Local(lines) = &self.bits {
            let i = line_of(h, lines.len());
            if let Some(line) = lines.get(i..=i) {
                super::prefetch::prefetch_lines(line);
            }
        }
        h
    }

    /// [`may_contain`](Self::may_contain) of the key whose hash is `h`.
    pub fn may_contain_hash(&self, h: u64) -> bool {
        match &self.bits {
            Bits::Local(lines) => {
                let Some(line) = lines.get(line_of(h, lines.len())) else {
                    return true;
                };
                local_bits(h, self.k).all(|b| line.0[b / 8] & (1 << (b % 8)) != 0)
            }
            Bits::Standard { num_bits, bits } => {
                let (h1, h2) = probe_pair(h);
                (0..u64::from(self.k)).all(|i| {
                    let b = h1.wrapping_add(i.wrapping_mul(h2)) % num_bits;
                    bits.get((b / 8) as usize)
                        .is_some_and(|byte| byte & (1 << (b % 8)) != 0)
                })
            }
        }
    }

    /// Memory held by the bitmap.
    pub fn size(&self) -> usize {
        match &self.bits {
            Bits::Standard { bits, .. } => bits.len(),
            Bits::Local(lines) => lines.len() * LINE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_formula() {
        assert_eq!(num_probes(10), 7);
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(64), 30);
    }

    /// False-positive rate of a filter of 10 000 keys at 10 bits per key,
    /// after checking it has no false negative.
    fn fp_rate(encoded: &[u8]) -> f64 {
        let f = Bloom::decode(encoded).expect("decodes").expect("non-empty");
        for i in 0..10_000u32 {
            assert!(
                f.may_contain(format!("key{i:08}").as_bytes()),
                "false negative {i}"
            );
        }
        let fp = (0..10_000u32)
            .filter(|i| f.may_contain(format!("absent{i:08}").as_bytes()))
            .count();
        fp as f64 / 10_000.0
    }

    fn ten_thousand() -> BloomBuilder {
        let mut b = BloomBuilder::new();
        for i in 0..10_000u32 {
            b.add(format!("key{i:08}").as_bytes());
        }
        b
    }

    #[test]
    fn false_positive_rate_is_about_one_percent() {
        let b = ten_thousand();
        let encoded = b.finish(10);
        assert_eq!(
            encoded[0], LOCAL,
            "the builder writes the cache-local filter"
        );
        // 100 000 bits in 196 lines of 512.
        assert_eq!(encoded.len(), HEADER_LEN + 196 * LINE);
        let rate = fp_rate(&encoded);
        assert!(rate < 0.02, "false positive rate {rate}");
        assert!(rate > 0.001, "suspiciously low false positive rate {rate}");
    }

    #[test]
    fn standard_filters_of_older_tables_still_read() {
        let b = ten_thousand();
        let encoded = b.finish_standard(10);
        assert_eq!(encoded[0], STANDARD);
        let rate = fp_rate(&encoded);
        assert!(rate < 0.02, "false positive rate {rate}");
        assert!(rate > 0.001, "suspiciously low false positive rate {rate}");
    }

    #[test]
    fn local_probes_stay_in_one_line() {
        // Two keys in a filter of many lines: only the lines they hash to
        // have bits set, and each has at most k bits.
        let mut b = BloomBuilder::new();
        b.add(b"alpha");
        b.add(b"beta");
        let encoded = b.finish(4096);
        let lines: Vec<&[u8]> = encoded[HEADER_LEN..].chunks(LINE).collect();
        assert_eq!(lines.len(), 2 * 4096 / 512);
        let k = num_probes(4096) as u32;
        let busy: Vec<u32> = lines
            .iter()
            .map(|l| l.iter().map(|b| b.count_ones()).sum())
            .filter(|&n| n > 0)
            .collect();
        assert!(!busy.is_empty() && busy.len() <= 2, "{busy:?}");
        assert!(busy.iter().all(|&n| n <= 2 * k), "{busy:?}");
    }

    #[test]
    fn local_encoding_is_pinned() {
        // The layout is on disk: a change to hashing or bit order must
        // fail here rather than make old tables miss keys.
        let mut b = BloomBuilder::new();
        for i in 0..100u32 {
            b.add(format!("pin{i}").as_bytes());
        }
        let encoded = b.finish(10);
        assert_eq!(&encoded[..HEADER_LEN], &[2, 7, 2, 0, 0, 0]);
        assert_eq!(
            crc32c::crc32c(&encoded),
            PINNED_CRC,
            "{:#x}",
            crc32c::crc32c(&encoded)
        );
    }

    const PINNED_CRC: u32 = 0xb075_a9fa;

    #[test]
    fn empty_filter_and_garbage() {
        assert!(BloomBuilder::new().finish(10).is_empty());
        assert!(Bloom::decode(&[]).expect("ok").is_none());
        assert!(Bloom::decode(&[1]).is_err());
        assert!(Bloom::decode(&[1, 0, 8, 0, 0, 0, 0xff]).is_err());
        assert!(Bloom::decode(&[1, 7, 16, 0, 0, 0, 0xff]).is_err());
        assert!(Bloom::decode(&[2, 7, 8, 0, 0, 0, 0xff]).is_err());
        assert!(Bloom::decode(&[2, 7, 0, 0, 0, 0]).is_err());
        assert!(Bloom::decode(&[2, 0, 1, 0, 0, 0]).is_err());
        assert!(Bloom::decode(&[3, 7, 8, 0, 0, 0, 0xff]).is_err());
        let mut full = vec![2, 7, 1, 0, 0, 0];
        full.resize(HEADER_LEN + LINE, 0xff);
        assert!(Bloom::decode(&full)
            .expect("ok")
            .expect("some")
            .may_contain(b"anything"));
        full.push(0);
        assert!(Bloom::decode(&full).is_err());
        let f = Bloom::decode(&[1, 7, 8, 0, 0, 0, 0xff])
            .expect("ok")
            .expect("some");
        assert!(f.may_contain(b"anything"));
    }
}
