//! One bloom filter per table over user keys.
//!
//! Encoding: `u8 version(=1) | u8 k | u32 LE num_bits | bitmap[ceil(num_bits/8)]`.
//! Probe `i` (0..k) sets bit `(h1 + i*h2) mod num_bits` with `h = xxh3_64(key)`,
//! `h1 = h`, `h2 = h.rotate_left(32) | 1` (wrapping u64 arithmetic). Bit `b`
//! is bit `b % 8` of byte `b / 8`. An empty filter block means "may contain".

use crate::coding::{put_u32, Reader};
use crate::error::{corrupt, Result};
use xxhash_rust::xxh3::xxh3_64;

const FILTER_VERSION: u8 = 1;
const HEADER_LEN: usize = 6;

/// Number of probes for `bits_per_key`: round(bits * ln 2), clamped to 1..=30.
pub fn num_probes(bits_per_key: usize) -> u8 {
    ((bits_per_key as f64 * 0.69).round() as usize).clamp(1, 30) as u8
}

#[inline]
fn probe_pair(h: u64) -> (u64, u64) {
    (h, h.rotate_left(32) | 1)
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

    /// Encodes the filter; empty when there are no keys or `bits_per_key == 0`.
    pub fn finish(&self, bits_per_key: usize) -> Vec<u8> {
        if bits_per_key == 0 || self.hashes.is_empty() {
            return Vec::new();
        }
        let k = num_probes(bits_per_key);
        let bits = (self.hashes.len().saturating_mul(bits_per_key)).max(64);
        let bits = bits.div_ceil(8).min((u32::MAX / 8) as usize) * 8;
        let mut out = Vec::with_capacity(HEADER_LEN + bits / 8);
        out.push(FILTER_VERSION);
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

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct Bloom {
    k: u8,
    num_bits: u64,
    bits: Vec<u8>,
}

impl Bloom {
    /// Decodes a filter block; `Ok(None)` for an empty block (no filter).
    pub fn decode(buf: &[u8]) -> Result<Option<Bloom>> {
        if buf.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(buf);
        let version = r.u8().ok_or_else(|| corrupt(0, "short filter"))?;
        if version != FILTER_VERSION {
            return Err(corrupt(0, format!("unknown filter version {version}")));
        }
        let k = r.u8().ok_or_else(|| corrupt(1, "short filter"))?;
        if !(1..=30).contains(&k) {
            return Err(corrupt(1, format!("bad filter probe count {k}")));
        }
        let num_bits = r.u32().ok_or_else(|| corrupt(2, "short filter"))?;
        let map = r.remaining();
        if num_bits == 0 || num_bits % 8 != 0 || map.len() != num_bits as usize / 8 {
            return Err(corrupt(
                2,
                format!("filter of {num_bits} bits has {} bitmap bytes", map.len()),
            ));
        }
        Ok(Some(Bloom {
            k,
            num_bits: u64::from(num_bits),
            bits: map.to_vec(),
        }))
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let (h1, h2) = probe_pair(xxh3_64(user_key));
        (0..u64::from(self.k)).all(|i| {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.num_bits;
            self.bits
                .get((b / 8) as usize)
                .is_some_and(|byte| byte & (1 << (b % 8)) != 0)
        })
    }

    /// Memory held by the bitmap.
    pub fn size(&self) -> usize {
        self.bits.len()
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

    #[test]
    fn false_positive_rate_is_about_one_percent() {
        let mut b = BloomBuilder::new();
        for i in 0..10_000u32 {
            b.add(format!("key{i:08}").as_bytes());
        }
        let f = Bloom::decode(&b.finish(10))
            .expect("decodes")
            .expect("non-empty");
        for i in 0..10_000u32 {
            assert!(
                f.may_contain(format!("key{i:08}").as_bytes()),
                "false negative {i}"
            );
        }
        let fp = (0..10_000u32)
            .filter(|i| f.may_contain(format!("absent{i:08}").as_bytes()))
            .count();
        let rate = fp as f64 / 10_000.0;
        assert!(rate < 0.02, "false positive rate {rate}");
        assert!(rate > 0.001, "suspiciously low false positive rate {rate}");
    }

    #[test]
    fn empty_filter_and_garbage() {
        assert!(BloomBuilder::new().finish(10).is_empty());
        assert!(Bloom::decode(&[]).expect("ok").is_none());
        assert!(Bloom::decode(&[1]).is_err());
        assert!(Bloom::decode(&[1, 0, 8, 0, 0, 0, 0xff]).is_err());
        assert!(Bloom::decode(&[1, 7, 16, 0, 0, 0, 0xff]).is_err());
        assert!(Bloom::decode(&[2, 7, 8, 0, 0, 0, 0xff]).is_err());
        let f = Bloom::decode(&[1, 7, 8, 0, 0, 0, 0xff])
            .expect("ok")
            .expect("some");
        assert!(f.may_contain(b"anything"));
    }
}
