//! Unit tests of the KVell engine through its `KvStore` door.

use super::*;
use crate::options::KvellIo;
use std::collections::BTreeMap;

fn opts(extra: &str) -> Options {
    let mut o = Options::default();
    o.apply(&format!(
        "engine=kvell,kvell_workers=3,kvell_page_cache=64K,{extra}"
    ))
    .expect("options");
    o
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn puts_gets_deletes_across_classes_and_reopen() -> Result<()> {
    let d = dir();
    for io in [KvellIo::Pread, KvellIo::Auto] {
        let path = d.path().join(io.name());
        let mut model = BTreeMap::new();
        {
            let mut o = opts("");
            o.kvell.io = io;
            let s = Kvell::open(&path, o)?;
            for i in 0..300u32 {
                let k = format!("key{i:05}").into_bytes();
                // Sizes cycle through small, page-sized and multi-page classes.
                let v = vec![i as u8; [10, 100, 1000, 3000, 5000, 20_000][i as usize % 6]];
                s.put(&k, &v)?;
                model.insert(k, v);
            }
            // Updates that change class, and in place.
            for i in (0..300u32).step_by(7) {
                let k = format!("key{i:05}").into_bytes();
                let v = vec![0xAB; (i as usize * 37) % 9000];
                s.put(&k, &v)?;
                model.insert(k, v);
            }
            for i in (0..300u32).step_by(5) {
                let k = format!("key{i:05}").into_bytes();
                s.delete(&k)?;
                model.remove(&k);
            }
            for (k, v) in &model {
                assert_eq!(s.get(k)?.as_ref(), Some(v));
            }
            assert_eq!(s.get(b"key00005")?, None);
            s.close()?;
            assert!(matches!(s.get(b"x"), Err(Error::Closed)));
        }
        let mut o = opts("");
        o.kvell.io = io;
        let s = Kvell::open(&path, o)?;
        let all = s.scan(ScanRange::all())?;
        assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
        let st = s.stats();
        let k = st.kvell().expect("kvell stats");
        assert_eq!(k.recovered_items as usize, model.len());
        assert_eq!(k.items_per_worker.iter().sum::<u64>() as usize, model.len());
        assert_eq!(k.damaged_slots, 0);
        s.close()?;
    }
    Ok(())
}

#[test]
fn batches_multi_get_scans_and_cursors() -> Result<()> {
    let d = dir();
    let s = Kvell::open(d.path(), opts("kvell_durability=synced"))?;
    let mut b = WriteBatch::new();
    for i in 0..200u32 {
        b.put(format!("k{i:04}"), format!("v{i}"));
    }
    b.delete("k0003");
    b.put("k0003", "again");
    b.delete("k0004");
    s.write(b, &WriteOptions { sync: true })?;
    let got = s.multi_get(&[b"k0001", b"k0003", b"k0004", b"zz"])?;
    assert_eq!(
        got,
        vec![Some(b"v1".to_vec()), Some(b"again".to_vec()), None, None]
    );
    let page =
        s.scan(ScanRange::new(Bound::Included(b"k0010"), Bound::Excluded(b"k0020")).limit(5))?;
    assert_eq!(page.len(), 5);
    assert_eq!(page[0].0, b"k0010");
    let back = s.scan(
        ScanRange::new(Bound::Unbounded, Bound::Included(b"k0005"))
            .limit(3)
            .reverse(true),
    )?;
    let keys: Vec<_> = back.iter().map(|e| e.0.clone()).collect();
    assert_eq!(
        keys,
        vec![b"k0005".to_vec(), b"k0003".to_vec(), b"k0002".to_vec()]
    );
    let mut c = s.cursor(None)?;
    c.seek_to_first();
    let mut n = 0;
    while c.valid() {
        n += 1;
        c.next();
    }
    c.status()?;
    assert_eq!(n, 199);
    assert!(s.snapshot().is_err());
    assert!(!s.semantics().atomic_batches);
    let st = s.stats();
    let k = st.kvell().expect("kvell");
    assert!(k.syncs > 0);
    assert!(k.batches > 0);
    s.close()
}

#[test]
fn bad_input_and_wrong_engine() -> Result<()> {
    let d = dir();
    let s = Kvell::open(d.path(), opts(""))?;
    let big = vec![0u8; crate::types::MAX_KEY_LEN + 1];
    assert!(matches!(s.put(&big, b"v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(s.get(&big), Err(Error::InvalidArgument(_))));
    // One process at a time.
    assert!(matches!(
        Kvell::open(d.path(), opts("")),
        Err(Error::Locked(_))
    ));
    s.put(b"", b"empty key")?;
    assert_eq!(s.get(b"")?, Some(b"empty key".to_vec()));
    s.close()?;
    // An LSM open of a KVell directory is refused, and the other way round.
    assert!(matches!(
        crate::open(d.path(), Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    let lsm = dir();
    crate::Db::open(lsm.path(), Options::default())?.close()?;
    assert!(matches!(
        Kvell::open(lsm.path(), opts("")),
        Err(Error::InvalidArgument(_))
    ));
    // The worker count is the store's, not the option's.
    let s = Kvell::open(d.path(), opts("kvell_workers=5"))?;
    assert_eq!(s.stats().kvell().expect("kvell").workers, 3);
    s.close()
}

/// Flips bit `mask` of byte `at` of worker 0's class-0 slab in `dir`.
fn flip(dir: &std::path::Path, at: u64, mask: u8) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let slab = dir.join(format::slab_name(0, 0));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&slab)
        .map_err(|e| Error::io(&slab, e))?;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at)
        .map_err(|e| Error::io(&slab, e))?;
    file.write_all_at(&[byte[0] ^ mask], at)
        .map_err(|e| Error::io(&slab, e))
}

/// A byte of the value in slot 1 of the first data page (64-byte slots).
const SLOT1_VALUE: u64 = (format::PAGE + 64 + format::SLOT_HEADER + 1) as u64;

fn kvell_stats(s: &Kvell) -> crate::KvellStats {
    s.stats().kvell().cloned().unwrap_or_default()
}

/// Puts `a` and `b` (slots 0 and 1 of worker 0's class-0 slab) and damages
/// slot 1's value while the store is open; returns the store, the damaged
/// key and the intact one. Reading the damaged key is already `Corruption`.
fn store_with_a_damaged_slot(d: &std::path::Path) -> Result<(Kvell, &'static [u8], &'static [u8])> {
    let s = Kvell::open(
        d,
        opts("kvell_workers=1,kvell_page_cache=0,kvell_direct=false"),
    )?;
    s.put(b"a", b"1")?;
    s.put(b"b", b"2")?;
    flip(d, SLOT1_VALUE, 0x10)?;
    let (ra, rb) = (s.get(b"a"), s.get(b"b"));
    let (bad, good): (&'static [u8], &'static [u8]) = match (&ra, &rb) {
        (Ok(Some(_)), Err(e)) if e.is_corruption() => (b"b", b"a"),
        (Err(e), Ok(Some(_))) if e.is_corruption() => (b"a", b"b"),
        _ => panic!("one damaged and one intact item: {ra:?} {rb:?}"),
    };
    Ok((s, bad, good))
}

/// A damaged slot answers the same before and after a restart: its key
/// reads as `Corruption`, the open counts and reports it, verify finds it,
/// and it stays so through any number of opens until the key is written.
#[test]
fn a_damaged_slot_reads_as_corruption_before_and_after_a_restart() -> Result<()> {
    let d = dir();
    let (s, bad, good) = store_with_a_damaged_slot(d.path())?;
    s.close()?;
    let o = opts("kvell_workers=1,kvell_page_cache=0");
    for round in 0..2 {
        let s = Kvell::open(d.path(), o.clone())?;
        assert!(
            matches!(s.get(bad), Err(ref e) if e.is_corruption()),
            "round {round}: {:?}",
            s.get(bad)
        );
        assert!(s.get(good)?.is_some());
        assert!(s.scan(ScanRange::all().limit(10)).is_err());
        assert_eq!(kvell_stats(&s).damaged_slots, 1, "round {round}");
        let report = s.recovery_report().unwrap_or_default().to_string();
        assert!(report.contains("reads as Corruption"), "{report}");
        s.close()?;
        let v = super::verify::verify_dir(d.path())?;
        assert_eq!(v.damaged().count(), 1, "round {round}: {v}");
    }
    // Refusing opens nothing and changes nothing.
    let refused = Kvell::open(d.path(), opts("kvell_workers=1,kvell_on_damage=refuse"));
    assert!(
        matches!(refused, Err(ref e) if e.is_corruption()),
        "{:?}",
        refused.err()
    );
    // Writing the key replaces the damaged slot: the store is clean again.
    let s = Kvell::open(d.path(), o.clone())?;
    s.put(bad, b"3")?;
    s.close()?;
    let s = Kvell::open(d.path(), o)?;
    assert_eq!(s.get(bad)?, Some(b"3".to_vec()));
    assert_eq!(kvell_stats(&s).damaged_slots, 0);
    assert!(s.recovery_report().is_none());
    s.close()?;
    let v = super::verify::verify_dir(d.path())?;
    assert!(v.is_ok(), "{v}");
    Ok(())
}

/// `kvell_on_damage=reclaim` drops the damaged slot: its key is absent,
/// the report says so, and later opens find a clean store.
#[test]
fn reclaiming_damage_makes_its_key_absent_and_says_so() -> Result<()> {
    let d = dir();
    let (s, bad, good) = store_with_a_damaged_slot(d.path())?;
    s.close()?;
    let s = Kvell::open(d.path(), opts("kvell_workers=1,kvell_on_damage=reclaim"))?;
    assert_eq!(s.get(bad)?, None);
    assert!(s.get(good)?.is_some());
    let k = kvell_stats(&s);
    assert_eq!((k.damaged_slots, k.reclaimed_slots), (0, 1));
    let report = s.recovery_report().unwrap_or_default().to_string();
    assert!(report.contains("reclaimed"), "{report}");
    s.close()?;
    let s = Kvell::open(d.path(), opts("kvell_workers=1"))?;
    let k = kvell_stats(&s);
    assert_eq!((k.damaged_slots, k.reclaimed_slots), (0, 0));
    s.close()?;
    assert!(super::verify::verify_dir(d.path())?.is_ok());
    Ok(())
}

/// A slot whose header no longer names a key stays counted and out of use
/// through later opens and writes.
#[test]
fn a_nameless_damaged_slot_is_held_out_of_use() -> Result<()> {
    let d = dir();
    let o = opts("kvell_workers=1,kvell_page_cache=0,kvell_direct=false");
    let s = Kvell::open(d.path(), o.clone())?;
    s.put(b"a", b"1")?;
    s.put(b"b", b"2")?;
    s.close()?;
    // The slot magic of slot 1.
    flip(d.path(), (format::PAGE + 64 + 4) as u64, 0x01)?;
    for round in 0..2 {
        let s = Kvell::open(d.path(), o.clone())?;
        assert_eq!(kvell_stats(&s).damaged_slots, 1, "round {round}");
        // New items of the same class never take the damaged slot.
        for i in 0..20u32 {
            s.put(format!("n{round}-{i}").as_bytes(), b"x")?;
        }
        s.close()?;
    }
    assert_eq!(super::verify::verify_dir(d.path())?.damaged().count(), 1);
    Ok(())
}

/// A crash can leave a slab short of a whole-page slot's empty last pages
/// (a buffered write cut after the pages the item fills): the item is
/// complete, and reads past the end of the file read zeros.
#[test]
fn an_item_whose_slot_runs_past_the_end_of_its_file_reads() -> Result<()> {
    for io in [KvellIo::Pread, KvellIo::Auto] {
        let d = dir();
        let mut o = opts("kvell_workers=1,kvell_page_cache=0,kvell_direct=false");
        o.kvell.io = io;
        let v = vec![7u8; 17_000];
        let s = Kvell::open(d.path(), o.clone())?;
        s.put(b"big", &v)?;
        s.close()?;
        let c = format::class_for(3, v.len());
        let class = format::Class::of(c).expect("class");
        // The item fills 5 pages of a 6-page slot.
        assert_eq!(class.pages, 6);
        let slab = d.path().join(format::slab_name(0, c as u32));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&slab)
            .map_err(|e| Error::io(&slab, e))?;
        f.set_len((1 + 5) * format::PAGE as u64)
            .map_err(|e| Error::io(&slab, e))?;
        drop(f);
        let s = Kvell::open(d.path(), o)?;
        assert_eq!(s.get(b"big")?, Some(v), "{}", io.name());
        s.close()?;
    }
    Ok(())
}

/// A valid slot with a timestamp near the end of the counter (crafted: a
/// counter of writes cannot get there) is damaged: it neither wins the
/// recovery of its key nor wraps the counter.
#[test]
fn a_slot_with_a_maximal_timestamp_is_damaged() -> Result<()> {
    let d = dir();
    let o = opts("kvell_workers=1,kvell_page_cache=0,kvell_direct=false");
    let s = Kvell::open(d.path(), o.clone())?;
    s.put(b"a", b"1")?;
    s.close()?;
    let slab = d.path().join(format::slab_name(0, 0));
    let mut bytes = std::fs::read(&slab).map_err(|e| Error::io(&slab, e))?;
    // Slot 2 of the first data page (64-byte slots): key `a` again.
    let at = format::PAGE + 2 * 64;
    format::encode_slot(
        &mut bytes[at..at + 64],
        format::Kind::Item,
        u64::MAX - 1,
        b"a",
        b"x",
    );
    std::fs::write(&slab, &bytes).map_err(|e| Error::io(&slab, e))?;
    let s = Kvell::open(d.path(), o.clone())?;
    assert_eq!(s.get(b"a")?, Some(b"1".to_vec()));
    // The intact version explains it: erased, not kept.
    let k = kvell_stats(&s);
    assert_eq!((k.damaged_slots, k.torn_slots), (0, 1));
    s.put(b"a", b"2")?;
    s.close()?;
    let s = Kvell::open(d.path(), o)?;
    assert_eq!(s.get(b"a")?, Some(b"2".to_vec()));
    s.close()
}

/// An I/O backend that takes its time over each call and counts the calls
/// in progress.
struct Slow {
    inner: Box<dyn io::Io>,
    busy: Arc<AtomicU64>,
}

impl Slow {
    fn time<T>(&mut self, f: impl FnOnce(&mut dyn io::Io) -> T) -> T {
        self.busy.fetch_add(1, Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let r = f(self.inner.as_mut());
        self.busy.fetch_sub(1, Relaxed);
        r
    }
}

impl io::Io for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn read(&mut self, reqs: &mut [io::Req<'_>], counts: &mut io::Submitted) -> Result<()> {
        self.time(|i| i.read(reqs, counts))
    }
    fn write(&mut self, reqs: &mut [io::Req<'_>], counts: &mut io::Submitted) -> Result<()> {
        self.time(|i| i.write(reqs, counts))
    }
    fn sync(&mut self, file: &std::fs::File, path: &std::path::PathBuf) -> Result<()> {
        self.time(|i| i.sync(file, path))
    }
}

/// An open that fails for one worker (its I/O backend cannot be made)
/// returns only after the workers it started have stopped: none may go on
/// rewriting pages after the LOCK is released.
#[test]
fn a_failed_open_stops_the_workers_it_started() -> Result<()> {
    let d = dir();
    let o = opts("kvell_workers=2,kvell_io=pread");
    let s = Kvell::open(d.path(), o.clone())?;
    for i in 0..50u32 {
        s.put(format!("k{i}").as_bytes(), b"v")?;
    }
    s.close()?;
    let busy = Arc::new(AtomicU64::new(0));
    let made = Arc::new(AtomicU64::new(0));
    let seen_busy = Arc::new(AtomicBool::new(false));
    let (b2, m2, s2) = (busy.clone(), made.clone(), seen_busy.clone());
    let make = move || -> Result<Box<dyn io::Io>> {
        if m2.fetch_add(1, Relaxed) == 1 {
            // Fail only once the first worker is inside an I/O of its
            // recovery (bounded: the assertion below says if it never was).
            let start = std::time::Instant::now();
            while b2.load(Relaxed) == 0 && start.elapsed() < std::time::Duration::from_secs(20) {
                std::thread::yield_now();
            }
            s2.store(b2.load(Relaxed) > 0, Relaxed);
            return Err(Error::NotSupported("no second backend".into()));
        }
        Ok(Box::new(Slow {
            inner: io::backend(KvellIo::Pread, 8)?,
            busy: b2.clone(),
        }))
    };
    let r = Kvell::open_with_io(d.path(), o.clone(), &make);
    assert!(matches!(r, Err(Error::NotSupported(_))), "{:?}", r.err());
    assert!(
        seen_busy.load(Relaxed),
        "the first worker never did I/O while opening"
    );
    assert_eq!(
        busy.load(Relaxed),
        0,
        "a worker still does I/O after open failed"
    );
    // The store opens again, whole.
    let s = Kvell::open(d.path(), o)?;
    assert_eq!(s.get(b"k7")?, Some(b"v".to_vec()));
    s.close()
}

/// Whether this machine runs io_uring reads and writes, found without the
/// engine: a ring of 64 entries can be set up (the raw system call) on a kernel of 5.6 or
/// later (IORING_OP_READ and IORING_OP_WRITE).
fn machine_runs_io_uring() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if (major, minor) < (5, 6) {
        return false;
    }
    // struct io_uring_params is 120 bytes.
    let mut params = [0u8; 120];
    // 64 entries: the ring the engine makes for `kvell_batch=64`.
    // SAFETY: io_uring_setup writes at most the 120-byte params it is given.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 64u32, params.as_mut_ptr()) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is the ring's descriptor, owned here and closed once.
    unsafe { libc::close(fd as i32) };
    true
}

/// Whether a file in `dir` can be opened with O_DIRECT.
fn takes_o_direct(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("o_direct_probe");
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// `kvell_io=auto` and `kvell_direct=true` use io_uring and O_DIRECT
/// wherever the machine allows them, and report the fallback where it does
/// not: a silent fallback to pread or to the page cache fails here. Where
/// the kernel refuses io_uring, STRATA_REQUIRE_TOOLS=1 makes that a failure
/// (CI machines must run the io_uring path).
#[test]
fn io_uring_and_o_direct_are_used_where_the_machine_allows_them() -> Result<()> {
    let mut dirs = vec![dir()];
    // tmpfs refuses O_DIRECT: the fallback to the page cache.
    if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
        dirs.push(shm);
    }
    let uring = machine_runs_io_uring();
    for d in &dirs {
        let direct = takes_o_direct(d.path());
        let s = Kvell::open(
            d.path().join("db"),
            opts("kvell_io=auto,kvell_direct=true,kvell_workers=2"),
        )?;
        for i in 0..50u32 {
            s.put(
                format!("k{i}").as_bytes(),
                &vec![i as u8; 100 + 90 * i as usize],
            )?;
        }
        s.flush()?;
        for i in 0..50u32 {
            assert_eq!(
                s.get(format!("k{i}").as_bytes())?,
                Some(vec![i as u8; 100 + 90 * i as usize])
            );
        }
        let k = s.stats().kvell().cloned().unwrap_or_default();
        let at = d.path().display();
        assert_eq!(
            k.io_backend,
            if uring { "io_uring" } else { "pread" },
            "{at}"
        );
        assert_eq!(k.direct_io, direct, "{at}");
        assert!(k.writes > 0 && k.syncs > 0, "{at}: {k:?}");
        s.close()?;
    }
    if !uring {
        assert!(
            std::env::var("STRATA_REQUIRE_TOOLS").map_or(true, |v| v != "1"),
            "STRATA_REQUIRE_TOOLS=1 and this kernel refuses io_uring reads and writes"
        );
        eprintln!("io_uring is refused here: only the pread fallback was checked");
    }
    Ok(())
}
