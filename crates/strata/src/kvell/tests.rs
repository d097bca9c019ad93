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
            o.kvell_io = io;
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
        o.kvell_io = io;
        let s = Kvell::open(&path, o)?;
        let all = s.scan(Bound::Unbounded, Bound::Unbounded, usize::MAX, false)?;
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
    let page = s.scan(
        Bound::Included(b"k0010"),
        Bound::Excluded(b"k0020"),
        5,
        false,
    )?;
    assert_eq!(page.len(), 5);
    assert_eq!(page[0].0, b"k0010");
    let back = s.scan(Bound::Unbounded, Bound::Included(b"k0005"), 3, true)?;
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

#[test]
fn a_damaged_slot_is_an_error_on_read_and_freed_at_open() -> Result<()> {
    let d = dir();
    let s = Kvell::open(
        d.path(),
        opts("kvell_workers=1,kvell_page_cache=0,kvell_direct=false"),
    )?;
    s.put(b"a", b"1")?;
    s.put(b"b", b"2")?;
    s.close()?;
    let slab = d.path().join(format::slab_name(0, 0));
    let mut bytes = std::fs::read(&slab).map_err(|e| Error::io(&slab, e))?;
    // Slot 1 of the first data page holds one of the items: flip a value byte.
    bytes[format::PAGE + 64 + format::SLOT_HEADER + 1] ^= 0x10;
    std::fs::write(&slab, &bytes).map_err(|e| Error::io(&slab, e))?;
    let s = Kvell::open(d.path(), opts("kvell_workers=1,kvell_page_cache=0"))?;
    // The damaged item is gone (freed), the other one is intact.
    let left: Vec<_> = [s.get(b"a")?, s.get(b"b")?].into_iter().flatten().collect();
    assert_eq!(left.len(), 1);
    assert_eq!(s.stats().kvell().expect("kvell").damaged_slots, 1);
    s.close()
}
