//! Replays seeds of the server's fuzz targets (`fuzz/fuzz_targets/resp.rs`,
//! `glob.rs`, `meta.rs`: the harnesses of `strata_server::fuzzing`) and
//! seeded mutations of each (bit flips, byte overwrites, truncations,
//! insertions, splices): a small fuzzer that runs in CI. Nothing may panic,
//! and the harnesses' round-trip properties must hold.

use strata_server::fuzzing::{glob, meta, resp};
use strata_server::keys::Meta;

/// A xorshift generator: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `seed` with one to three random edits, some taking bytes of `other`.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => v.truncate(rng.below(v.len() + 1)),
            3 if !other.is_empty() => {
                let at = rng.below(v.len() + 1);
                let from = rng.below(other.len());
                let to = (from + 1 + rng.below(64)).min(other.len());
                v.splice(at..at, other[from..to].iter().copied());
            }
            _ => {
                let at = rng.below(v.len() + 1);
                v.insert(at, rng.next() as u8);
            }
        }
    }
    v
}

type Harness = fn(&[u8]) -> usize;

fn seeds() -> Vec<(&'static str, Harness, Vec<Vec<u8>>)> {
    let resp_seeds: Vec<Vec<u8>> = vec![
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
        b"PING\r\nSET k \"a b\\x41\\n\" 'c d'\r\n\r\n".to_vec(),
        b"*1\r\n$0\r\n\r\n*0\r\n*-1\r\n".to_vec(),
        b"*2\r\n$4\r\nHSET\r\n$99999999\r\n".to_vec(),
    ];
    let glob_seeds: Vec<Vec<u8>> = vec![
        b"user:*\0user:1000".to_vec(),
        b"h?llo\0hello".to_vec(),
        b"[^a-c]x[a-z]\\*\0dxq*".to_vec(),
        b"*a*b*c*d*e*f*\0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabcdef".to_vec(),
        b"[unterminated\0[".to_vec(),
    ];
    let meta_seeds: Vec<Vec<u8>> = vec![
        Meta::string(b"value".to_vec(), 0).encode(),
        Meta::string(Vec::new(), 1_700_000_000_000).encode(),
        Meta::container(strata_server::keys::Kind::Hash, 3).encode(),
    ];
    vec![
        ("resp", resp as Harness, resp_seeds),
        ("glob", glob as Harness, glob_seeds),
        ("meta", meta as Harness, meta_seeds),
    ]
}

#[test]
fn replay_seeds_and_mutations_of_the_server_harnesses() {
    let mut rng = Rng(0x5eed_cafe);
    for (name, harness, seeds) in seeds() {
        let decoded: usize = seeds.iter().map(|s| harness(s)).sum();
        assert!(decoded > 0, "{name}: no seed decodes");
        for (i, s) in seeds.iter().enumerate() {
            let other = &seeds[(i + 1) % seeds.len()];
            for _ in 0..2000 {
                harness(&mutate(&mut rng, s, other));
            }
        }
        harness(&[]);
    }
}
