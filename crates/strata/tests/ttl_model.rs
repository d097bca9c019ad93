//! The model test with time to live: random operations under a clock the
//! test moves, in every design, against a reference that keeps each key's
//! versions with their write times. A version written `ttl` or longer ago
//! reads as a deletion, for the current state and for snapshots (whose
//! reference is the history up to them, read at the present time).

mod common;

use common::{open, tiny_with, EXECUTORS, MATRIX, STALE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata::clock::{Clock, ManualClock};
use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const TTL_MS: u64 = 10_000;

#[derive(Clone)]
enum Version {
    Put(Vec<u8>),
    Merge(Vec<u8>),
    Delete,
}

/// Each key's versions, oldest first, with their write times.
type History = BTreeMap<Vec<u8>, Vec<(u64, Version)>>;

/// What a reader sees at `now`: per key, the newest versions folded down
/// to a value, a deletion or an expired version (the append operator).
fn visible(h: &History, now: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for (k, versions) in h {
        let mut operands: Vec<&[u8]> = Vec::new();
        let mut base: Option<&[u8]> = None;
        let mut any = false;
        for (t, v) in versions.iter().rev() {
            if t + TTL_MS <= now {
                break;
            }
            match v {
                Version::Put(b) => {
                    base = Some(b);
                    any = true;
                    break;
                }
                Version::Merge(o) => {
                    operands.push(o);
                    any = true;
                }
                Version::Delete => break,
            }
        }
        if !any {
            continue;
        }
        let mut value: Option<Vec<u8>> = base.map(<[u8]>::to_vec);
        for o in operands.iter().rev() {
            value = Some(match value {
                Some(v) => [v.as_slice(), b"|", o].concat(),
                None => o.to_vec(),
            });
        }
        out.insert(k.clone(), value.unwrap_or_default());
    }
    out
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..300)).into_bytes()
}

fn bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.gen_range(0..max);
    (0..n).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn scan(db: &Db, ro: &ReadOptions<'_>, reverse: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let s = db.scan_opt::<&[u8], _>(.., ro).expect("scan");
    if reverse {
        s.rev().collect::<Result<_, _>>().expect("scan")
    } else {
        s.collect::<Result<_, _>>().expect("scan")
    }
}

/// The first key where `got` and `want` differ, for a failure message.
fn diff(
    got: &BTreeMap<Vec<u8>, Vec<u8>>,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
    h: &History,
    now: u64,
) -> String {
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    for k in keys {
        if got.get(k) != want.get(k) {
            let versions: Vec<String> = h.get(k).map_or(Vec::new(), |vs| {
                vs.iter()
                    .map(|(t, v)| {
                        let age = now - t;
                        match v {
                            Version::Put(b) => {
                                format!("put {} age {age}", String::from_utf8_lossy(b))
                            }
                            Version::Merge(b) => {
                                format!("merge {} age {age}", String::from_utf8_lossy(b))
                            }
                            Version::Delete => format!("delete age {age}"),
                        }
                    })
                    .collect()
            });
            return format!(
                "{}: got {:?}, want {:?}; versions {versions:?}",
                String::from_utf8_lossy(k),
                got.get(k).map(|v| String::from_utf8_lossy(v).into_owned()),
                want.get(k).map(|v| String::from_utf8_lossy(v).into_owned())
            );
        }
    }
    String::new()
}

fn run(seed: u64, ops: usize, design: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let opts = || -> Options {
        let mut o = tiny_with(&format!("{design},ttl_secs=10,merge_operator=append:|"));
        o.clock = clock.clone();
        o
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = open(dir.path(), opts());
    let mut h = History::new();
    let mut snaps: Vec<(strata::Snapshot, History)> = Vec::new();
    // Versions flushes and compactions expired, over every open.
    let mut expired = 0;
    for op in 0..ops {
        let ctx = format!("seed {seed} op {op} [{design}]");
        let now = clock.now_ms();
        match rng.gen_range(0..100) {
            0..=29 => {
                let (k, v) = (key(&mut rng), bytes(&mut rng, 40));
                db.put(&k, &v).expect("put");
                h.entry(k).or_default().push((now, Version::Put(v)));
            }
            30..=37 => {
                let (k, o) = (key(&mut rng), bytes(&mut rng, 8));
                db.merge(&k, &o).expect("merge");
                h.entry(k).or_default().push((now, Version::Merge(o)));
            }
            38..=42 => {
                let k = key(&mut rng);
                db.delete(&k).expect("delete");
                h.entry(k).or_default().push((now, Version::Delete));
            }
            43..=47 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let k = key(&mut rng);
                    let v = bytes(&mut rng, 20);
                    b.put(&k, &v);
                    h.entry(k).or_default().push((now, Version::Put(v)));
                }
                db.write(b, &WriteOptions::default()).expect("batch");
            }
            48..=63 => {
                let k = key(&mut rng);
                let want = visible(&h, now).get(&k).cloned();
                assert_eq!(db.get(&k).expect("get"), want, "{ctx}: get");
            }
            64..=67 => {
                let want = visible(&h, now);
                let got = scan(&db, &ReadOptions::default(), rng.gen_bool(0.5));
                assert!(got == want, "{ctx}: scan: {}", diff(&got, &want, &h, now));
            }
            68..=71 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), h.clone()));
                } else {
                    snaps.remove(rng.gen_range(0..snaps.len()));
                }
            }
            72..=75 => {
                if let Some((s, sh)) = snaps.get(rng.gen_range(0..snaps.len().max(1))) {
                    let ro = ReadOptions { snapshot: Some(s) };
                    let want = visible(sh, now);
                    let got = scan(&db, &ro, rng.gen_bool(0.5));
                    assert!(
                        got == want,
                        "{ctx}: snapshot scan: {}",
                        diff(&got, &want, sh, now)
                    );
                }
            }
            76..=87 => clock.advance(rng.gen_range(1..4) * 1_000),
            88..=91 => db.flush().expect("flush"),
            92..=95 => db.compact_range::<&[u8], _>(..).expect("compact"),
            _ => {
                snaps.clear();
                expired += db.stats().expired_versions;
                db.close().expect("close");
                drop(db);
                db = open(dir.path(), opts());
            }
        }
    }
    let now = clock.now_ms();
    let (got, want) = (scan(&db, &ReadOptions::default(), false), visible(&h, now));
    assert!(
        got == want,
        "seed {seed} [{design}]: final scan: {}",
        diff(&got, &want, &h, now)
    );
    expired += db.stats().expired_versions;
    assert!(
        expired > 0,
        "seed {seed} [{design}]: nothing expired in a compaction"
    );
}

#[test]
fn ttl_model_every_design() {
    let mut designs = vec![String::new(), MATRIX.to_string(), STALE.to_string()];
    designs.extend(EXECUTORS.iter().map(|e| e.to_string()));
    let cases: u64 = std::env::var("STRATA_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for (i, design) in designs.iter().enumerate() {
        for c in 0..cases {
            run(1000 + i as u64 * 100 + c, 1500, design);
        }
    }
}
