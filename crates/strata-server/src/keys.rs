//! How Redis keys of every type are laid out on strata's ordered key space
//! (docs/SERVER.md, "Encodings"). Every record starts with a one-byte tag,
//! so the types never interleave:
//!
//! | record | key | value |
//! | --- | --- | --- |
//! | metadata (every key) | `k` + key | type, expire-at, payload |
//! | hash field | `h` + len(key) u32 BE + key + field | field value |
//! | zset member | `z` + len(key) + key + member | score (order-preserving f64) |
//! | zset score index | `Z` + len(key) + key + score + member | empty |
//! | expiry index | `e` + expire-at u64 BE + key | empty |
//!
//! Metadata value: type byte (`s` string, `h` hash, `z` zset), expire-at in
//! Unix milliseconds as u64 BE (0 = none), then for a string its bytes, for
//! a hash or zset the number of fields/members as u64 BE.

pub const META: u8 = b'k';
pub const HASH: u8 = b'h';
pub const ZMEMBER: u8 = b'z';
pub const ZSCORE: u8 = b'Z';
pub const EXPIRY: u8 = b'e';

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Hash,
    ZSet,
}

impl Kind {
    pub fn tag(self) -> u8 {
        match self {
            Kind::String => b's',
            Kind::Hash => b'h',
            Kind::ZSet => b'z',
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::ZSet => "zset",
        }
    }
    fn from_tag(t: u8) -> Option<Kind> {
        match t {
            b's' => Some(Kind::String),
            b'h' => Some(Kind::Hash),
            b'z' => Some(Kind::ZSet),
            _ => None,
        }
    }
}

/// A decoded metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Unix milliseconds; 0 = no expiry.
    pub expire_at: u64,
    /// String bytes, or the u64 BE count of a hash/zset.
    pub payload: Vec<u8>,
}

impl Meta {
    pub fn string(value: Vec<u8>, expire_at: u64) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at,
            payload: value,
        }
    }
    pub fn container(kind: Kind, count: u64) -> Meta {
        Meta {
            kind,
            expire_at: 0,
            payload: count.to_be_bytes().to_vec(),
        }
    }
    pub fn count(&self) -> u64 {
        self.payload
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0)
    }
    pub fn set_count(&mut self, n: u64) {
        self.payload = n.to_be_bytes().to_vec();
    }
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9 + self.payload.len());
        v.push(self.kind.tag());
        v.extend_from_slice(&self.expire_at.to_be_bytes());
        v.extend_from_slice(&self.payload);
        v
    }
    pub fn decode(v: &[u8]) -> Option<Meta> {
        let kind = Kind::from_tag(*v.first()?)?;
        let expire_at = u64::from_be_bytes(v.get(1..9)?.try_into().ok()?);
        Some(Meta {
            kind,
            expire_at,
            payload: v[9..].to_vec(),
        })
    }
}

pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(META);
    k.extend_from_slice(key);
    k
}

/// `tag` + len(key) + key: the prefix of every sub-record of a hash or zset.
pub fn sub_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + key.len() + 16);
    k.push(tag);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

pub fn sub_key(tag: u8, key: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(tag, key);
    k.extend_from_slice(rest);
    k
}

pub fn zscore_key(key: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(ZSCORE, key);
    k.extend_from_slice(&encode_score(score));
    k.extend_from_slice(member);
    k
}

pub fn expiry_key(expire_at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.push(EXPIRY);
    k.extend_from_slice(&expire_at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The smallest key greater than every key starting with `prefix` (None:
/// no such key, the prefix is all 0xff).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// An order-preserving encoding of an f64: byte order equals numeric order
/// (-inf < ... < -0 < +0 < ... < +inf). NaN is never stored.
pub fn encode_score(f: f64) -> [u8; 8] {
    // -0.0 and 0.0 are the same score.
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

pub fn decode_score(b: &[u8]) -> Option<f64> {
    let ordered = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    Some(f64::from_bits(bits))
}

/// Formats a score as Redis does for the common cases: integers without a
/// fraction, `inf`/`-inf`, otherwise the shortest round-tripping form.
pub fn format_score(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == f.trunc() && f.abs() < 1e17 {
        return format!("{}", f as i64);
    }
    format!("{f}")
}

/// Redis' glob matching (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), on bytes.
pub fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    // Backtracking point for the last `*`.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                b'?' if i < s.len() => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' if i < s.len() => {
                    if let Some((matched, next)) = class_match(pat, p, s[i]) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pat.len() && i < s.len() && pat[p + 1] == s[i] => {
                    p += 2;
                    i += 1;
                    continue;
                }
                c if i < s.len() && c == s[i] && c != b'?' && c != b'[' && c != b'\\' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp + 1;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the class starting at `pat[p] == '['`; returns
/// (matched, index after the class), or None for an unterminated class.
fn class_match(pat: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = pat.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut matched = false;
    loop {
        let b = *pat.get(j)?;
        if b == b']' {
            break;
        }
        if b == b'\\' {
            j += 1;
            if *pat.get(j)? == c {
                matched = true;
            }
            j += 1;
        } else if pat.get(j + 1) == Some(&b'-') && pat.get(j + 2).is_some_and(|&e| e != b']') {
            let (lo, hi) = (b.min(pat[j + 2]), b.max(pat[j + 2]));
            if (lo..=hi).contains(&c) {
                matched = true;
            }
            j += 3;
        } else {
            if b == c {
                matched = true;
            }
            j += 1;
        }
    }
    Some((matched != negate, j + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_sort_as_numbers() {
        let v = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -1e-300,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for w in v.windows(2) {
            assert!(encode_score(w[0]) < encode_score(w[1]), "{w:?}");
        }
        for f in v {
            assert_eq!(decode_score(&encode_score(f)), Some(f));
        }
        assert_eq!(encode_score(-0.0), encode_score(0.0));
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"user:*", b"user:42"));
        assert!(!glob_match(b"user:*", b"use"));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"*a*b*", b"xxaxxbxx"));
        assert!(glob_match(b"a\\*", b"a*"));
        assert!(!glob_match(b"a\\*", b"ab"));
    }

    #[test]
    fn meta_roundtrip_and_prefix_end() {
        let m = Meta::string(b"v".to_vec(), 5);
        assert_eq!(Meta::decode(&m.encode()), Some(m));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(format_score(1.0), "1");
        assert_eq!(format_score(1.5), "1.5");
        assert_eq!(format_score(f64::NEG_INFINITY), "-inf");
    }
}
