//! Power loss on the KVell engine. KVell's I/O does not go through
//! `io::FileSystem`, so the simulation sits in its I/O backend: a recording
//! backend keeps the bytes every write replaced until the file is synced.
//! At a chosen I/O operation the "power" goes out (that and every later
//! I/O fails); the store is dropped, and each unsynced write is then, at
//! random, kept, undone, or torn (some of its sectors undone). The store
//! reopens on the real backend and every key must hold its last
//! acknowledged value; a key whose write was in flight may hold the old
//! value or one it wrote, and be absent only if the write deleted it —
//! on a drive that writes 4 KiB atomically — or read as `Corruption` when
//! its new slot spans pages and no intact item of it is left (the open
//! cannot tell that torn slot from an acknowledged one damaged later). On a
//! drive that tears 512-byte sectors an in-place update may also lose the
//! item, or read as `Corruption` (the documented exception,
//! `Semantics::unsynced`). Every crash point of short histories
//! is tried, under `kvell_durability=synced` and under `written` with
//! flushes; and a process crash whose recovery is cut by a power loss.
//!
//! Injected I/O errors (EIO or ENOSPC in one read, write or sync call of
//! the backend, a write failing after half its requests): the failing
//! write returns a typed error, later writes are refused unless the failed
//! call wrote nothing the store uses (a read, or the making of a new slab
//! file), reads go on, and a reopen finds every acknowledged write.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use strata::kvell::io::{Io, Req, Submitted};
use strata::kvell::Kvell;
use strata::{Error, KvStore, KvellIo, Options, Result, ScanRange, WriteBatch, WriteOptions};

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

/// A drive that tears writes in units of this many bytes: 4096, one that
/// writes a page atomically (the KVell paper's assumption, NVMe's common
/// AWUPF of one 4 KiB block); 512, one that does not.
#[derive(Clone, Copy, PartialEq)]
struct Drive {
    sector: usize,
}

const ATOMIC_4K: Drive = Drive { sector: 4096 };
const SECTORS_512: Drive = Drive { sector: 512 };

impl Drive {
    /// Whether an in-flight in-place update may lose its item.
    fn tears_pages(self) -> bool {
        self.sector < 4096
    }
}

/// After the power loss: each unsynced write (newest first) is kept,
/// undone, or torn at the drive's sector size.
fn lose_unsynced(j: &Journal, rng: &mut SmallRng, drive: Drive) {
    let undo = std::mem::take(&mut *j.unsynced.lock().expect("journal"));
    for u in undo.iter().rev() {
        // A slab's `.kv.tmp` that an open removed (its creation was cut)
        // has nothing left to lose.
        let f = match std::fs::OpenOptions::new().write(true).open(&u.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("open {}: {e}", u.path.display()),
        };
        match rng.gen_range(0..3) {
            0 => {}
            1 => f.write_all_at(&u.old, u.offset).expect("undo"),
            _ => {
                for (i, sector) in u.old.chunks(drive.sector).enumerate() {
                    if rng.gen_bool(0.5) {
                        f.write_all_at(sector, u.offset + (i * drive.sector) as u64)
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

/// The keys of the operations in flight and every value they wrote to each,
/// `None` for a delete (a batch is applied entry by entry, so a crash may
/// leave any of them).
type InFlight = BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>;

/// One batch: each key with its new value, or `None` to delete it.
type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A random history of `ops` batches of 1–3 entries over 40 keys, in three
/// size classes, often naming the same key twice in a batch.
fn random_batches(seed: u64, ops: usize) -> Vec<Batch> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let key = |rng: &mut SmallRng| format!("k{:03}", rng.gen_range(0..40)).into_bytes();
    (0..ops)
        .map(|_| {
            let mut b = Batch::new();
            let mut last: Option<Vec<u8>> = None;
            for _ in 0..rng.gen_range(1..4) {
                // Often the same key again: a put that changes class and a
                // delete of it in one batch.
                let k = match &last {
                    Some(l) if rng.gen_bool(0.4) => l.clone(),
                    _ => key(&mut rng),
                };
                last = Some(k.clone());
                let v = rng.gen_bool(0.8).then(|| {
                    let len = [30, 700, 5000][rng.gen_range(0..3)];
                    (0..len)
                        .map(|i| (i as u8).wrapping_add(rng.gen()))
                        .collect::<Vec<u8>>()
                });
                b.push((k, v));
            }
            b
        })
        .collect()
}

/// Runs `batches` until one fails; returns the acknowledged state, the
/// state the failed batch would have made, and its keys.
fn history(s: &dyn KvStore, batches: &[Batch]) -> (Model, Model, InFlight) {
    let mut m = Model::new();
    for batch in batches {
        let mut b = WriteBatch::new();
        let mut next = m.clone();
        let mut keys = InFlight::new();
        apply(batch, &mut b, &mut next, &mut keys);
        if s.write(b, &WriteOptions::default()).is_err() {
            return (m, next, keys);
        }
        m = next;
    }
    (m.clone(), m, InFlight::new())
}

/// Adds `batch` to the write batch `b`, the model `next` and the record of
/// what is in flight.
fn apply(batch: &Batch, b: &mut WriteBatch, next: &mut Model, keys: &mut InFlight) {
    for (k, v) in batch {
        keys.entry(k.clone()).or_default().push(v.clone());
        match v {
            Some(v) => {
                b.put(k, v);
                next.insert(k.clone(), v.clone());
            }
            None => {
                b.delete(k);
                next.remove(k);
            }
        }
    }
}

/// Runs `batches` under `written` durability with a `flush()` after every
/// second one, until a write or a flush fails; returns the state of the last
/// successful flush, and every value written since (in flight: a power
/// loss may keep any of them).
fn history_flushed(s: &dyn KvStore, batches: &[Batch]) -> (Model, InFlight) {
    let mut durable = Model::new();
    let mut m = Model::new();
    let mut since = InFlight::new();
    for (i, batch) in batches.iter().enumerate() {
        let mut b = WriteBatch::new();
        apply(batch, &mut b, &mut m, &mut since);
        if s.write(b, &WriteOptions::default()).is_err() {
            return (durable, since);
        }
        if i % 2 == 1 {
            if s.flush().is_err() {
                return (durable, since);
            }
            durable = m.clone();
            since.clear();
        }
    }
    (durable, since)
}

/// Whether an item of `key` and `value` takes a slot of several pages (a
/// write of which a crash can tear between its pages).
fn spans_pages(key: &[u8], value: &[u8]) -> bool {
    24 + key.len() + value.len() > 4096
}

fn check(
    dir: &Path,
    opts: &Options,
    acked: &Model,
    in_flight: &InFlight,
    before: &Model,
    drive: Drive,
    what: &str,
) {
    let s = strata::open(dir, opts.clone()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let keys: BTreeSet<&Vec<u8>> = acked
        .keys()
        .chain(before.keys())
        .chain(in_flight.keys())
        .collect();
    let mut corrupt: Vec<&Vec<u8>> = Vec::new();
    for &k in &keys {
        let got = match s.get(k) {
            Ok(g) => g,
            Err(e) if e.is_corruption() => {
                // A damaged slot newer than every intact version of its key
                // reads as Corruption (the open cannot tell a torn write in
                // flight from an acknowledged item damaged later): only a
                // key in flight whose slot could tear, with no intact item
                // left to fall back on, may show it.
                let old = before.get(k);
                let ok = in_flight.get(k).is_some_and(|written| {
                    drive.tears_pages()
                        || ((old.is_none() || written.contains(&None))
                            && written.iter().flatten().any(|v| spans_pages(k, v)))
                });
                assert!(
                    ok,
                    "{what}: key {} reads as {e} (in flight: {:?})",
                    String::from_utf8_lossy(k),
                    in_flight.get(k).map(|w| w.len())
                );
                corrupt.push(k);
                continue;
            }
            Err(e) => panic!("{what}: get {}: {e}", String::from_utf8_lossy(k)),
        };
        let new = acked.get(k);
        if let Some(written) = in_flight.get(k) {
            // The write in flight: the old value or any value it wrote;
            // absent only if it was absent or deleted (or, on a drive that
            // tears pages, an in-place update was torn).
            let old = before.get(k);
            let ok = match &got {
                None => old.is_none() || written.contains(&None) || drive.tears_pages(),
                Some(g) => Some(g) == old || written.contains(&Some(g.clone())),
            };
            assert!(
                ok,
                "{what}: in-flight key {} is {}, which it never was (before: {:?} bytes)",
                String::from_utf8_lossy(k),
                got.as_ref()
                    .map_or("absent".to_string(), |g| format!("{} bytes", g.len())),
                old.map(|o| o.len())
            );
        } else {
            assert_eq!(
                got.as_ref(),
                new,
                "{what}: key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
    // No key the history never wrote: scan the ranges between the keys
    // that read as Corruption (a scan stops at one).
    let mut lo: Bound<&[u8]> = Bound::Unbounded;
    for c in corrupt.iter().map(|c| Some(c.as_slice())).chain([None]) {
        let hi = c.map_or(Bound::Unbounded, Bound::Excluded);
        let found = s
            .scan(ScanRange::new(lo, hi))
            .unwrap_or_else(|e| panic!("{what}: scan: {e}"));
        for (k, _) in found {
            assert!(
                keys.contains(&k),
                "{what}: key {} was never written",
                String::from_utf8_lossy(&k)
            );
        }
        if let Some(c) = c {
            lo = Bound::Excluded(c);
        }
    }
    s.close().expect("close");
}

/// Opens the store at `dir` on a recording backend writing to `j`.
fn open_recorded(dir: &Path, opts: &Options, j: &Arc<Journal>) -> Result<Kvell> {
    let jj = j.clone();
    Kvell::open_with_io(dir, opts.clone(), &move || {
        Ok(Box::new(Recording(jj.clone())) as Box<dyn Io>)
    })
}

/// What a crash test does between the crash and the check.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The power goes out at the crash point.
    PowerLoss,
    /// The process dies at the crash point (unsynced writes stay in the
    /// page cache); the store reopens, recovers, and the power goes out
    /// right after the open.
    KillThenPowerLoss,
}

/// How the history runs.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Every write acknowledged as durable (`synced`).
    Synced,
    /// `written`, durable at each `flush()` (after every second batch).
    Flushed,
}

/// Runs the history on `s`: the state every key must have, what is in
/// flight, and the old values of the keys in flight.
fn run(s: &dyn KvStore, batches: &[Batch], mode: Mode) -> (Model, InFlight, Model) {
    match mode {
        Mode::Synced => {
            let (acked, after, in_flight) = history(s, batches);
            (after, in_flight, acked)
        }
        Mode::Flushed => {
            let (durable, since) = history_flushed(s, batches);
            (durable.clone(), since, durable)
        }
    }
}

/// Every I/O of `batches` as the crash point, each `tries` times with
/// another random fate for the unsynced writes.
fn every_crash_point(opts: &Options, batches: &[Batch], tries: usize, seed: u64) {
    crash_points(
        opts,
        batches,
        tries,
        seed,
        Mode::Synced,
        Fault::PowerLoss,
        ATOMIC_4K,
    );
}

/// Every I/O of `batches` as the crash point, each `tries` times, with
/// `fault` on `drive`; returns the number of cases checked.
fn crash_points(
    opts: &Options,
    batches: &[Batch],
    tries: usize,
    seed: u64,
    mode: Mode,
    fault: Fault,
    drive: Drive,
) -> usize {
    // One uncrashed run counts the I/Os.
    let tmp = tempfile::tempdir().expect("tempdir");
    let j = Arc::new(Journal::default());
    j.crash_at.store(u64::MAX, Ordering::SeqCst);
    let s = open_recorded(tmp.path(), opts, &j).expect("open");
    run(&s, batches, mode);
    s.close().expect("close");
    let total = j.ops.load(Ordering::SeqCst);
    assert!(total > 10, "the history did {total} I/Os");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tried = 0;
    for crash_at in 1..=total {
        for t in 0..tries {
            let tmp = tempfile::tempdir().expect("tempdir");
            let j = Arc::new(Journal::default());
            j.crash_at.store(crash_at, Ordering::SeqCst);
            let Ok(s) = open_recorded(tmp.path(), opts, &j) else {
                continue; // the power went out while the store was being created
            };
            let (expect, in_flight, before) = run(&s, batches, mode);
            let _ = s.close();
            drop(s);
            if fault == Fault::KillThenPowerLoss {
                // The kill kept every unsynced write; recovery runs on
                // them, then the power goes out before anything else.
                j.crash_at.store(u64::MAX, Ordering::SeqCst);
                j.crashed.store(false, Ordering::SeqCst);
                let s = open_recorded(tmp.path(), opts, &j)
                    .unwrap_or_else(|e| panic!("reopen after the kill at I/O {crash_at}: {e}"));
                j.crashed.store(true, Ordering::SeqCst);
                let _ = s.close();
                drop(s);
            }
            lose_unsynced(&j, &mut rng, drive);
            let what = format!("crash at I/O {crash_at} of {total} (try {t})");
            check(tmp.path(), opts, &expect, &in_flight, &before, drive, &what);
            tried += 1;
        }
    }
    assert!(
        tried as u64 > total * tries as u64 / 2,
        "{tried} crash points tried of {total}"
    );
    tried
}

/// Many cases: `STRATA_KVELL_POWERLOSS_CASES=2000 cargo test --release
/// --test kvell_powerloss -- --ignored power_loss_many` (every I/O of
/// random 40-batch histories as the crash point, drawn from
/// `STRATA_POWERLOSS_SEED` or a random master seed), each history under
/// `synced` or under `written` with flushes, a plain power loss or a kill
/// whose recovery a power loss cuts, on a drive atomic per 4 KiB or one
/// that tears 512-byte sectors.
#[test]
#[ignore = "long; set STRATA_KVELL_POWERLOSS_CASES"]
fn power_loss_many() {
    let cases: usize = std::env::var("STRATA_KVELL_POWERLOSS_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let master: u64 = std::env::var("STRATA_POWERLOSS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("kvell power loss: master seed {master}, {cases} cases");
    let mut rng = SmallRng::seed_from_u64(master);
    let mut done = 0;
    while done < cases {
        let seed = rng.gen();
        let (opts, mode) = if rng.gen_bool(0.5) {
            (options(), Mode::Synced)
        } else {
            (written(), Mode::Flushed)
        };
        let fault = if rng.gen_bool(0.25) {
            Fault::KillThenPowerLoss
        } else {
            Fault::PowerLoss
        };
        let drive = if rng.gen_bool(0.25) {
            SECTORS_512
        } else {
            ATOMIC_4K
        };
        done += crash_points(
            &opts,
            &random_batches(seed, 40),
            1,
            seed,
            mode,
            fault,
            drive,
        );
    }
    eprintln!("kvell power loss: {done} cases clean");
}

#[test]
fn power_loss_at_every_io_of_a_short_history() {
    every_crash_point(&options(), &random_batches(11, 60), 1, 11);
}

/// The same history on a drive that tears 512-byte sectors: only an
/// in-place update in flight may lose its item.
#[test]
fn power_loss_on_a_drive_that_tears_sectors() {
    crash_points(
        &options(),
        &random_batches(12, 60),
        1,
        12,
        Mode::Synced,
        Fault::PowerLoss,
        SECTORS_512,
    );
}

/// An item of several pages updated again: written in place, a power loss
/// tore the write between its pages and the item was lost (old and new).
#[test]
fn power_loss_during_an_update_of_a_multi_page_item() {
    let mut o = options();
    o.kvell.workers = 1;
    let big = |b: u8| Some(vec![b; 5000]);
    let batches: Vec<Batch> = vec![
        vec![(b"k".to_vec(), big(1))],
        vec![(b"k".to_vec(), big(2))],
        vec![(b"j".to_vec(), big(3)), (b"k".to_vec(), big(4))],
        vec![(b"k".to_vec(), None)],
        vec![(b"k".to_vec(), big(5))],
    ];
    every_crash_point(&o, &batches, 12, 7);
}

/// A process crash, then a power loss right after the recovery: recovery
/// erased the loser of a class change and synced that, but not the slab
/// holding the winner, so the key was lost.
#[test]
fn kill_then_power_loss_after_recovery() {
    let mut o = options();
    o.kvell.workers = 1;
    let batches: Vec<Batch> = vec![
        vec![(b"k".to_vec(), Some(vec![1; 30]))],
        vec![(b"k".to_vec(), Some(vec![2; 700]))],
        vec![(b"k".to_vec(), Some(vec![3; 5000]))],
        vec![(b"k".to_vec(), Some(vec![4; 30]))],
    ];
    crash_points(
        &o,
        &batches,
        12,
        3,
        Mode::Synced,
        Fault::KillThenPowerLoss,
        ATOMIC_4K,
    );
    crash_points(
        &options(),
        &random_batches(13, 30),
        2,
        13,
        Mode::Synced,
        Fault::KillThenPowerLoss,
        ATOMIC_4K,
    );
}

fn written() -> Options {
    let mut o = options();
    o.apply("kvell_durability=written").expect("options");
    o
}

/// `written` with a flush after every second batch: a flushed value must
/// survive a power loss. The old slot of a class change was erased before
/// the new one was synced, and flush synced the classes in order.
#[test]
fn power_loss_under_written_keeps_what_was_flushed() {
    let mut o = written();
    o.kvell.workers = 1;
    let batches: Vec<Batch> = vec![
        vec![(b"k".to_vec(), Some(vec![1; 30]))],
        vec![(b"j".to_vec(), Some(vec![2; 30]))],
        vec![(b"k".to_vec(), Some(vec![3; 700]))],
        vec![(b"j".to_vec(), None)],
        vec![(b"k".to_vec(), Some(vec![4; 5000]))],
        vec![(b"k".to_vec(), Some(vec![5; 5000]))],
    ];
    crash_points(
        &o,
        &batches,
        12,
        21,
        Mode::Flushed,
        Fault::PowerLoss,
        ATOMIC_4K,
    );
    crash_points(
        &written(),
        &random_batches(22, 60),
        1,
        22,
        Mode::Flushed,
        Fault::PowerLoss,
        ATOMIC_4K,
    );
    crash_points(
        &written(),
        &random_batches(23, 40),
        1,
        23,
        Mode::Flushed,
        Fault::KillThenPowerLoss,
        ATOMIC_4K,
    );
}

/// The case a review found: an item moves to another class and is deleted
/// in the same batch; its old slot's erasure must be durable before the
/// batch is answered, or the next batch reusing the new slot can reach the
/// disk without it and the deleted value comes back.
#[test]
fn power_loss_after_a_class_change_and_delete_in_one_batch() {
    let mut o = options();
    o.kvell.workers = 1;
    let small = |b: u8| Some(vec![b; 30]);
    let mid = |b: u8| Some(vec![b; 700]);
    let batches: Vec<Batch> = vec![
        vec![(b"k".to_vec(), small(1))],
        vec![(b"k".to_vec(), mid(2)), (b"k".to_vec(), None)],
        vec![(b"j".to_vec(), mid(3))],
        vec![(b"m".to_vec(), small(4))],
        vec![(b"j".to_vec(), None), (b"n".to_vec(), mid(5))],
    ];
    every_crash_point(&o, &batches, 12, 5);
}

/// Under `written`, an item that changed class keeps its old slot until the
/// next sync pass; a synced delete of the item frees its new slot at once,
/// so it must run that pass first, or a reuse of the freed slot followed by
/// a process crash would leave the old version the newest on disk.
#[test]
fn a_synced_delete_under_written_outlives_a_kill() {
    let mut o = written();
    o.kvell.workers = 1;
    let tmp = tempfile::tempdir().expect("tempdir");
    let j = Arc::new(Journal::default());
    j.crash_at.store(u64::MAX, Ordering::SeqCst);
    let s = open_recorded(tmp.path(), &o, &j).expect("open");
    s.put(b"k", &[1; 30]).expect("put");
    s.put(b"k", &[2; 700]).expect("put");
    let mut b = WriteBatch::new();
    b.delete(b"k");
    s.write(b, &WriteOptions { sync: true })
        .expect("synced delete");
    for i in 0..4u8 {
        s.put(&[b'x', i], &[3; 700]).expect("put");
    }
    // The kill: nothing more reaches the files, what was written stays.
    j.crashed.store(true, Ordering::SeqCst);
    let _ = s.close();
    drop(s);
    let s = strata::open(tmp.path(), o).expect("reopen");
    assert_eq!(
        s.get(b"k").expect("get"),
        None,
        "a synced delete came undone"
    );
    for i in 0..4u8 {
        assert_eq!(s.get(&[b'x', i]).expect("get"), Some(vec![3; 700]));
    }
    s.close().expect("close");
}

/// A failed `flush()` poisons the worker's writes (the kernel may have
/// dropped the dirty pages, so a later sync could succeed over lost
/// writes); reads go on.
#[test]
fn a_failed_flush_poisons_the_worker() {
    let mut o = written();
    o.kvell.workers = 1;
    let tmp = tempfile::tempdir().expect("tempdir");
    let j = Arc::new(Journal::default());
    j.crash_at.store(u64::MAX, Ordering::SeqCst);
    let s = open_recorded(tmp.path(), &o, &j).expect("open");
    s.put(b"k", b"v").expect("put");
    // The next I/O, the flush's sync, fails once.
    j.crash_at
        .store(j.ops.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
    assert!(s.flush().is_err(), "the injected sync failure was not seen");
    assert!(j.crashed.load(Ordering::SeqCst), "the fault did not fire");
    j.crash_at.store(u64::MAX, Ordering::SeqCst);
    j.crashed.store(false, Ordering::SeqCst);
    match s.put(b"k2", b"v2") {
        Err(Error::Poisoned(_)) => {}
        other => panic!("a write after a failed flush: {other:?}"),
    }
    assert_eq!(s.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// Which call of a KVell I/O backend an injected error hits.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Call {
    Read = 0,
    Write = 1,
    Sync = 2,
}

/// The calls of each kind so far, and the one to fail: `(kind, nth call
/// counted from the open, errno)`.
#[derive(Default)]
struct FaultPlan {
    calls: [AtomicU64; 3],
    target: Mutex<Option<(Call, u64, i32)>>,
    fired: AtomicU64,
    /// The file the failed call was for.
    fired_at: Mutex<Option<PathBuf>>,
}

impl FaultPlan {
    /// Counts a call of `kind`; the injected error if it is the one to fail.
    fn call(&self, kind: Call, path: &Path) -> Option<Error> {
        let n = self.calls[kind as usize].fetch_add(1, Ordering::SeqCst) + 1;
        match *self.target.lock().expect("plan") {
            Some((k, at, errno)) if k == kind && at == n => {
                self.fired.fetch_add(1, Ordering::SeqCst);
                *self.fired_at.lock().expect("plan") = Some(path.to_path_buf());
                Some(Error::io(path, std::io::Error::from_raw_os_error(errno)))
            }
            _ => None,
        }
    }

    fn count(&self, kind: Call) -> u64 {
        self.calls[kind as usize].load(Ordering::SeqCst)
    }
}

/// The pread backend, with the planned call failing (a write after doing
/// the first half of its requests).
struct Faulty {
    inner: Box<dyn Io>,
    plan: Arc<FaultPlan>,
}

impl Io for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn read(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        if let Some(e) = reqs
            .first()
            .and_then(|r| self.plan.call(Call::Read, r.path))
        {
            return Err(e);
        }
        self.inner.read(reqs, counts)
    }
    fn write(&mut self, reqs: &mut [Req<'_>], counts: &mut Submitted) -> Result<()> {
        let Some(path) = reqs.first().map(|r| r.path.clone()) else {
            return self.inner.write(reqs, counts);
        };
        if let Some(e) = self.plan.call(Call::Write, &path) {
            let half = reqs.len() / 2;
            self.inner.write(&mut reqs[..half], counts)?;
            return Err(e);
        }
        self.inner.write(reqs, counts)
    }
    fn sync(&mut self, file: &File, path: &PathBuf) -> Result<()> {
        if let Some(e) = self.plan.call(Call::Sync, path) {
            return Err(e);
        }
        self.inner.sync(file, path)
    }
}

fn open_faulty(dir: &Path, opts: &Options, plan: &Arc<FaultPlan>) -> Result<Kvell> {
    let p = plan.clone();
    Kvell::open_with_io(dir, opts.clone(), &move || {
        Ok(Box::new(Faulty {
            inner: strata::kvell::io::backend(KvellIo::Pread, 64)?,
            plan: p.clone(),
        }) as Box<dyn Io>)
    })
}

/// Runs `batches` with the `n`th `kind` call after the open failing with
/// `errno`, then checks the promises of the module doc; returns whether
/// the fault surfaced as an error of a write or of `close`.
fn fault_case(opts: &Options, batches: &[Batch], kind: Call, n: u64, errno: i32) -> bool {
    let what = format!("{kind:?} call {n} failing with errno {errno}");
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = Arc::new(FaultPlan::default());
    let s = open_faulty(tmp.path(), opts, &plan).expect("open");
    *plan.target.lock().expect("plan") = Some((kind, plan.count(kind) + n, errno));
    let (acked, after, in_flight) = history(&s, batches);
    let failed = !in_flight.is_empty();
    if failed {
        // A failed read wrote nothing, and a slab that failed to be made
        // (its `.kv.tmp`, never renamed) holds nothing: the worker goes on.
        let harmless = kind == Call::Read
            || plan
                .fired_at
                .lock()
                .expect("plan")
                .as_ref()
                .is_some_and(|p| p.to_string_lossy().ends_with(".kv.tmp"));
        // Writes are refused by the worker whose write failed (each worker
        // owns its keys): of 16 keys, spread over the workers, some must be.
        let mut refused = 0;
        for i in 0..16u8 {
            let k = [b'a', b'f', b't', b'e', b'r', i];
            match s.put(&k, b"x") {
                Err(Error::Poisoned(_)) => refused += 1,
                Ok(()) => s.delete(&k).expect("delete"),
                Err(e) => panic!("{what}: a write after the failure: {e}"),
            }
        }
        assert!(
            refused > 0 || harmless,
            "{what}: every write after the failure was accepted"
        );
        for (k, v) in &acked {
            if !in_flight.contains_key(k) {
                let got = s.get(k).unwrap_or_else(|e| panic!("{what}: get: {e}"));
                assert_eq!(got.as_ref(), Some(v), "{what}: a read after the failure");
            }
        }
    }
    let closed = s.close();
    drop(s);
    assert_eq!(
        plan.fired.load(Ordering::SeqCst),
        1,
        "{what}: the fault did not fire once ({} {kind:?} calls)",
        plan.count(kind)
    );
    check(
        tmp.path(),
        opts,
        &after,
        &in_flight,
        &acked,
        ATOMIC_4K,
        &what,
    );
    failed || closed.is_err()
}

/// Every kind of call of both durability modes, 8 cases each spread over a
/// history, half EIO and half ENOSPC; every fault must surface.
#[test]
fn an_io_error_in_any_call_is_typed_and_loses_nothing_acknowledged() {
    let batches = random_batches(31, 60);
    let mut cases = 0;
    for opts in [options(), written()] {
        // A healthy run counts the calls of each kind after the open.
        let tmp = tempfile::tempdir().expect("tempdir");
        let plan = Arc::new(FaultPlan::default());
        let s = open_faulty(tmp.path(), &opts, &plan).expect("open");
        let base: Vec<u64> = [Call::Read, Call::Write, Call::Sync]
            .iter()
            .map(|k| plan.count(*k))
            .collect();
        history(&s, &batches);
        s.close().expect("close");
        for (i, kind) in [Call::Read, Call::Write, Call::Sync]
            .into_iter()
            .enumerate()
        {
            let calls = plan.count(kind) - base[i];
            assert!(calls > 0, "a healthy history made no {kind:?} call");
            let picks = 8.min(calls);
            for j in 0..picks {
                let n = 1 + calls * j / picks;
                let errno = if j % 2 == 0 { libc::EIO } else { libc::ENOSPC };
                let surfaced = fault_case(&opts, &batches, kind, n, errno);
                assert!(
                    surfaced,
                    "{kind:?} call {n} of {calls}: the fault never surfaced"
                );
                cases += 1;
            }
        }
    }
    assert!(cases >= 40, "only {cases} fault cases");
}
