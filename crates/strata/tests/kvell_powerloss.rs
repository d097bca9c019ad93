//! Power loss on the KVell engine. KVell's I/O does not go through
//! `io::FileSystem`, so the simulation sits in its I/O backend: a recording
//! backend keeps the bytes every write replaced until the file is synced.
//! At a chosen I/O operation the "power" goes out (that and every later
//! I/O fails); the store is dropped, and each unsynced write is then, at
//! random, kept, undone, or torn (some of its 512-byte sectors undone).
//! The store reopens on the real backend and every key must hold its last
//! acknowledged value; a key whose write was in flight may hold the old or
//! the new value, or be absent (an in-place update torn by the power loss:
//! the documented exception, `Semantics::unsynced`). Every crash point of a
//! short history is tried, under `kvell_durability=synced`.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use strata::kvell::io::{Io, Req, Submitted};
use strata::kvell::Kvell;
use strata::{Error, KvStore, Options, Result, WriteBatch, WriteOptions};

/// A write not yet synced: where, and the bytes it replaced.
struct Undo {
    path: PathBuf,
    offset: u64,
    old: Vec<u8>,
}

#[derive(Default)]
struct Journal {
    unsynced: Mutex<Vec<Undo>>,
    ops: AtomicU64,
    crash_at: AtomicU64,
    crashed: AtomicBool,
}

impl Journal {
    /// Counts one I/O; false once the power is out.
    fn tick(&self) -> bool {
        if self.crashed.load(Ordering::SeqCst) {
            return false;
        }
        if self.ops.fetch_add(1, Ordering::SeqCst) + 1 >= self.crash_at.load(Ordering::SeqCst) {
            self.crashed.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }
}

fn lost(path: &Path) -> Error {
    Error::io(path, std::io::Error::other("power lost"))
}

struct Recording(Arc<Journal>);

impl Io for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn read(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        counts.batches += 1;
        counts.ios += reqs.len() as u64;
        for r in reqs.iter_mut() {
            if !self.0.tick() {
                return Err(lost(r.path));
            }
            r.file
                .read_exact_at(r.buf.as_mut_slice(), r.offset)
                .map_err(|e| Error::io(r.path, e))?;
        }
        Ok(())
    }
    fn write(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        counts.batches += 1;
        counts.ios += reqs.len() as u64;
        for r in reqs.iter_mut() {
            if !self.0.tick() {
                return Err(lost(r.path));
            }
            let mut old = vec![0u8; r.buf.len()];
            let mut done = 0;
            while done < old.len() {
                match r.file.read_at(&mut old[done..], r.offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) => return Err(Error::io(r.path, e)),
                }
            }
            self.0.unsynced.lock().expect("journal").push(Undo {
                path: r.path.clone(),
                offset: r.offset,
                old,
            });
            r.file
                .write_all_at(r.buf.as_slice(), r.offset)
                .map_err(|e| Error::io(r.path, e))?;
        }
        Ok(())
    }
    fn sync(&mut self, _file: &File, path: &PathBuf) -> Result<()> {
        if !self.0.tick() {
            return Err(lost(path));
        }
        self.0
            .unsynced
            .lock()
            .expect("journal")
            .retain(|u| &u.path != path);
        Ok(())
    }
}

/// After the power loss: each unsynced write (newest first) is kept,
/// undone, or torn.
fn lose_unsynced(j: &Journal, rng: &mut SmallRng) {
    let undo = std::mem::take(&mut *j.unsynced.lock().expect("journal"));
    for u in undo.iter().rev() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&u.path)
            .expect("open slab");
        match rng.gen_range(0..3) {
            0 => {}
            1 => f.write_all_at(&u.old, u.offset).expect("undo"),
            _ => {
                for (i, sector) in u.old.chunks(512).enumerate() {
                    if rng.gen_bool(0.5) {
                        f.write_all_at(sector, u.offset + (i * 512) as u64)
                            .expect("tear");
                    }
                }
            }
        }
    }
}

fn options() -> Options {
    let mut o = Options::default();
    o.apply("engine=kvell,kvell_workers=2,kvell_durability=synced,kvell_page_cache=8K,kvell_direct=false")
        .expect("options");
    o
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The keys of the operation in flight and every value it wrote to each
/// (a batch is applied entry by entry, so a crash may leave any of them).
type InFlight = BTreeMap<Vec<u8>, Vec<Vec<u8>>>;

/// Runs the history until an operation fails; returns the acknowledged
/// state, the state the failed operation would have made, and its keys.
fn history(s: &dyn KvStore, seed: u64, ops: usize) -> (Model, Model, InFlight) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut m = Model::new();
    let key = |rng: &mut SmallRng| format!("k{:03}", rng.gen_range(0..40)).into_bytes();
    for _ in 0..ops {
        let mut b = WriteBatch::new();
        let mut next = m.clone();
        let mut keys = InFlight::new();
        for _ in 0..rng.gen_range(1..4) {
            let k = key(&mut rng);
            let written = keys.entry(k.clone()).or_default();
            if rng.gen_bool(0.8) {
                // Sizes in three classes, so updates move between slabs.
                let len = [30, 700, 5000][rng.gen_range(0..3)];
                let v: Vec<u8> = (0..len)
                    .map(|i| (i as u8).wrapping_add(rng.gen()))
                    .collect();
                b.put(&k, &v);
                written.push(v.clone());
                next.insert(k, v);
            } else {
                b.delete(&k);
                next.remove(&k);
            }
        }
        if s.write(b, &WriteOptions::default()).is_err() {
            return (m, next, keys);
        }
        m = next;
    }
    (m.clone(), m, InFlight::new())
}

fn check(dir: &Path, acked: &Model, in_flight: &InFlight, before: &Model, what: &str) {
    let s = strata::open(dir, options()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let all: Model = s
        .scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            usize::MAX,
            false,
        )
        .unwrap_or_else(|e| panic!("{what}: scan: {e}"))
        .into_iter()
        .collect();
    let keys: BTreeSet<&Vec<u8>> = all
        .keys()
        .chain(acked.keys())
        .chain(before.keys())
        .collect();
    for k in keys {
        let got = all.get(k);
        let new = acked.get(k);
        if let Some(written) = in_flight.get(k) {
            // The write in flight: old, any value it wrote, or (torn in
            // place) gone.
            let old = before.get(k);
            let ok = got.is_none() || got == old || got.is_some_and(|g| written.contains(g));
            assert!(
                ok,
                "{what}: in-flight key {} has a value it never had",
                String::from_utf8_lossy(k)
            );
        } else {
            assert_eq!(got, new, "{what}: key {}", String::from_utf8_lossy(k));
        }
    }
    s.close().expect("close");
}

#[test]
fn power_loss_at_every_io_of_a_short_history() {
    let seed = 11;
    let ops = 60;
    // One uncrashed run counts the I/Os.
    let tmp = tempfile::tempdir().expect("tempdir");
    let j = Arc::new(Journal::default());
    j.crash_at.store(u64::MAX, Ordering::SeqCst);
    let jj = j.clone();
    let s = Kvell::open_with_io(tmp.path(), options(), &move || {
        Ok(Box::new(Recording(jj.clone())) as Box<dyn Io>)
    })
    .expect("open");
    history(&s, seed, ops);
    s.close().expect("close");
    let total = j.ops.load(Ordering::SeqCst);
    assert!(total > 100, "the history did {total} I/Os");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tried = 0;
    for crash_at in 1..=total {
        let tmp = tempfile::tempdir().expect("tempdir");
        let j = Arc::new(Journal::default());
        j.crash_at.store(crash_at, Ordering::SeqCst);
        let jj = j.clone();
        let opened = Kvell::open_with_io(tmp.path(), options(), &move || {
            Ok(Box::new(Recording(jj.clone())) as Box<dyn Io>)
        });
        let Ok(s) = opened else {
            continue; // the power went out while the store was being created
        };
        let (acked, after, in_flight) = history(&s, seed, ops);
        let _ = s.close();
        drop(s);
        lose_unsynced(&j, &mut rng);
        let what = format!("crash at I/O {crash_at} of {total}");
        check(tmp.path(), &after, &in_flight, &acked, &what);
        tried += 1;
    }
    assert!(
        tried as u64 > total / 2,
        "{tried} crash points tried of {total}"
    );
}
