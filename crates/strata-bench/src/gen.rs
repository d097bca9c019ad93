//! Keys, values and request distributions.
//!
//! The YCSB generators follow YCSB's `ZipfianGenerator`,
//! `ScrambledZipfianGenerator` and `SkewedLatestGenerator` (Gray et al.,
//! "Quickly generating billion-record synthetic databases").

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// YCSB's default Zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item count YCSB's scrambled Zipfian draws from before hashing.
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// zeta(10^10, 0.99), precomputed by YCSB.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Key number `n` as a fixed-width key of `size` bytes: lower-case hex,
/// zero-padded. Keys of the same width sort like their numbers. Widths under
/// 16 keep only the low `4 * size` bits.
pub fn key_for(n: u64, size: usize) -> Vec<u8> {
    let n = if size < 16 {
        n & ((1u64 << (4 * size as u32)) - 1)
    } else {
        n
    };
    format!("{n:0size$x}").into_bytes()
}

/// Writes key number `n` into `buf` (cleared first) without allocating anew.
pub fn key_into(n: u64, size: usize, buf: &mut Vec<u8>) {
    use std::io::Write;
    buf.clear();
    let n = if size < 16 {
        n & ((1u64 << (4 * size as u32)) - 1)
    } else {
        n
    };
    // Writing into a Vec cannot fail.
    let _ = write!(buf, "{n:0size$x}");
}

/// 64-bit FNV-1a over the 8 bytes of `v`, as YCSB's `Utils.fnvhash64`.
pub fn fnv_hash64(mut v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    // YCSB takes the absolute value of the signed result.
    (h as i64).unsigned_abs()
}

/// A bijection on u64 (the splitmix64 finalizer): YCSB's "hashed" insert
/// order. Record `i` of a YCSB load is stored under `key_for(scatter(i))`.
pub fn scatter(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x
}

/// Deterministic, incompressible-ish values: slices of a seeded random pool.
pub struct ValuePool {
    pool: Vec<u8>,
}

impl ValuePool {
    /// A pool able to serve values of up to `max_size` bytes, of random
    /// (incompressible) bytes.
    pub fn new(seed: u64, max_size: usize) -> Self {
        Self::with_ratio(seed, max_size, 1.0)
    }

    /// As [`ValuePool::new`], with values that compress to about `ratio`
    /// of their size: each 100-byte stretch holds `ratio × 100` random
    /// bytes repeated to fill it (db_bench's `--compression_ratio`).
    pub fn with_ratio(seed: u64, max_size: usize, ratio: f64) -> Self {
        let len = (1 << 20).max(max_size * 2 + 1);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x005E_ED0F_7A1E);
        let mut pool = vec![0u8; len];
        rng.fill_bytes(&mut pool);
        if ratio < 1.0 {
            let raw = ((100.0 * ratio.max(0.01)).ceil() as usize).clamp(1, 100);
            for stretch in pool.chunks_mut(100) {
                for i in raw..stretch.len() {
                    stretch[i] = stretch[i % raw];
                }
            }
        }
        ValuePool { pool }
    }

    /// The value of key number `n` (of `size` bytes).
    pub fn value(&self, n: u64, size: usize) -> &[u8] {
        let span = (self.pool.len() - size) as u64;
        let off = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % span.max(1);
        &self.pool[off as usize..off as usize + size]
    }
}

/// YCSB's `ZipfianGenerator` over `[0, items)` with a growable item count.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    zeta2: f64,
    /// Item count `zetan` was computed for.
    count_for_zeta: u64,
}

fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

impl Zipfian {
    /// A Zipfian distribution over `items` items with constant `theta`.
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        Self::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Self {
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            zeta2,
            count_for_zeta: items,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Grows the item count (YCSB recomputes zeta incrementally).
    pub fn grow(&mut self, items: u64) {
        if items > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, items, self.theta, self.zetan);
            self.count_for_zeta = items;
            self.items = items;
            self.eta = self.compute_eta();
        }
    }

    /// The next item: 0 is the most popular.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// The request distributions of YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

impl Distribution {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "uniform" => Some(Self::Uniform),
            "zipfian" => Some(Self::Zipfian),
            "latest" => Some(Self::Latest),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Zipfian => "zipfian",
            Self::Latest => "latest",
        }
    }
}

/// Chooses record numbers among the `count` records inserted so far.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    Uniform,
    /// YCSB's scrambled Zipfian: popular items are spread over the key space.
    Zipfian(Zipfian),
    /// YCSB's skewed-latest: Zipfian over recency, the newest record hottest.
    Latest(Zipfian),
}

impl KeyChooser {
    /// A chooser for `count` existing records.
    pub fn new(dist: Distribution, count: u64) -> Self {
        match dist {
            Distribution::Uniform => KeyChooser::Uniform,
            Distribution::Zipfian => KeyChooser::Zipfian(Zipfian::with_zetan(
                SCRAMBLED_ITEMS,
                ZIPFIAN_CONSTANT,
                SCRAMBLED_ZETAN,
            )),
            Distribution::Latest => {
                KeyChooser::Latest(Zipfian::new(count.max(1), ZIPFIAN_CONSTANT))
            }
        }
    }

    /// A record number in `[0, count)`; `count` is the number of records now.
    pub fn next(&mut self, rng: &mut impl Rng, count: u64) -> u64 {
        let count = count.max(1);
        match self {
            KeyChooser::Uniform => rng.gen_range(0..count),
            KeyChooser::Zipfian(z) => fnv_hash64(z.next(rng)) % count,
            KeyChooser::Latest(z) => {
                z.grow(count);
                // YCSB: max - zipfian.nextLong(max), over the last value.
                let back = z.next(rng).min(count - 1);
                count - 1 - back
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(dist: Distribution, n: u64, draws: usize) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut c = KeyChooser::new(dist, n);
        let mut h = vec![0u64; n as usize];
        for _ in 0..draws {
            let k = c.next(&mut rng, n);
            assert!(k < n);
            h[k as usize] += 1;
        }
        h
    }

    /// Share of requests received by the hottest `frac` of keys.
    fn top_share(mut h: Vec<u64>, frac: f64) -> f64 {
        let total: u64 = h.iter().sum();
        h.sort_unstable_by(|a, b| b.cmp(a));
        let top = ((h.len() as f64 * frac).ceil() as usize).max(1);
        h[..top].iter().sum::<u64>() as f64 / total as f64
    }

    #[test]
    fn keys_are_fixed_width_and_ordered() {
        assert_eq!(key_for(255, 6), b"0000ff".to_vec());
        assert_eq!(key_for(u64::MAX, 16).len(), 16);
        assert_eq!(key_for(1, 24).len(), 24);
        assert!(key_for(9, 16) < key_for(10, 16));
        let mut b = Vec::new();
        key_into(300, 16, &mut b);
        assert_eq!(b, key_for(300, 16));
    }

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a of eight zero bytes, as YCSB's Utils.fnvhash64 computes it.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnv_hash64(0), (h as i64).unsigned_abs());
        assert_ne!(fnv_hash64(1), fnv_hash64(2));
    }

    #[test]
    fn scatter_is_injective_on_a_range() {
        let mut v: Vec<u64> = (0..100_000).map(scatter).collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 100_000);
    }

    #[test]
    fn values_are_deterministic() {
        let p = ValuePool::new(1, 4096);
        assert_eq!(p.value(5, 100), p.value(5, 100));
        assert_ne!(p.value(5, 100), p.value(6, 100));
        assert_eq!(p.value(9, 4096).len(), 4096);
    }

    #[test]
    fn uniform_is_flat() {
        let h = hits(Distribution::Uniform, 1000, 200_000);
        let share = top_share(h.clone(), 0.01);
        assert!(share < 0.02, "top 1% got {share}");
        let (mn, mx) = (h.iter().min().copied(), h.iter().max().copied());
        assert!(
            mn.unwrap_or(0) > 100 && mx.unwrap_or(u64::MAX) < 320,
            "{mn:?} {mx:?}"
        );
    }

    #[test]
    fn zipfian_is_skewed() {
        let h = hits(Distribution::Zipfian, 10_000, 200_000);
        let share = top_share(h, 0.01);
        // Zipf(0.99) over 10^10 items hashed into 10^4: the top 1 % of keys
        // receive far more than 1 % of the requests (about 1/5: the 100
        // hottest of 10^10 Zipf items carry H(100, 0.99) / zeta ≈ 0.2).
        assert!(share > 0.15, "top 1% got {share}");
    }

    #[test]
    fn plain_zipfian_item_zero_is_hottest() {
        let z = Zipfian::new(1000, ZIPFIAN_CONSTANT);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut h = [0u64; 1000];
        for _ in 0..100_000 {
            h[z.next(&mut rng) as usize] += 1;
        }
        assert!(h[0] > h[1] && h[1] > h[10] && h[10] > h[500]);
        // p(0) = 1/zeta(1000, 0.99) ≈ 0.13.
        let p0 = h[0] as f64 / 100_000.0;
        assert!((0.11..0.16).contains(&p0), "{p0}");
    }

    #[test]
    fn latest_favours_recent_records() {
        let n = 10_000;
        let h = hits(Distribution::Latest, n, 200_000);
        let newest: u64 = h[(n as usize - 100)..].iter().sum();
        assert!(newest as f64 / 200_000.0 > 0.5, "newest 1% got {newest}");
        assert!(h[n as usize - 1] > h[n as usize - 2]);
        // A growing count moves the hot spot along.
        let mut rng = SmallRng::seed_from_u64(1);
        let mut c = KeyChooser::new(Distribution::Latest, 100);
        let later: Vec<u64> = (0..1000).map(|_| c.next(&mut rng, 5000)).collect();
        let recent = later.iter().filter(|&&k| k >= 4950).count();
        assert!(recent > 500, "{recent}");
    }

    #[test]
    fn values_compress_as_asked() {
        let random = ValuePool::new(7, 1000);
        assert_eq!(random.pool, ValuePool::with_ratio(7, 1000, 1.0).pool);
        let half = ValuePool::with_ratio(7, 1000, 0.5);
        for stretch in half.pool.chunks(100).take(50) {
            assert_eq!(stretch[..50], stretch[50..]);
        }
        // Random halves: no stretch repeats its first half's first bytes elsewhere.
        assert_ne!(half.pool[..50], half.pool[100..150]);
    }
}
