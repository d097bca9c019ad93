//! Backups (`Db::backup`, `BackupStore`): incremental copies of a live
//! database that restore to a database holding every write acknowledged
//! before the backup, in every design; files shared across backups and
//! never confused between two databases; damage found on restore and
//! verify; deletion frees only unshared files; a failed or power-cut
//! backup leaves the store as it was.

mod common;

use common::{all, history, tiny_with, Model, EXECUTORS, MATRIX, STALE};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata::io::fault::{FaultError, FaultFs, Op, Rule, Trigger};
use strata::io::{CrashKind, FileSystem, MemFs};
use strata::{BackupStore, Db, Error, Options};

fn designs() -> Vec<String> {
    let mut d = vec![String::new(), STALE.to_string(), MATRIX.to_string()];
    d.extend(EXECUTORS.iter().map(|s| s.to_string()));
    d
}

fn open(dir: &Path, opts: Options) -> Db {
    Db::open(dir, opts).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
}

fn model(ops: &[common::HistOp]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut m = Model::new();
    for op in ops {
        op.apply(&mut m);
    }
    m.into_iter().collect()
}

fn shared_names(store: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(store.join("shared"))
        .expect("list shared")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn backups_restore_in_every_design_and_copy_only_new_files() {
    for (i, spec) in designs().iter().enumerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store_dir = tmp.path().join("store");
        let store = BackupStore::open(&store_dir).expect("store");
        let ops = history(300 + i as u64, 1_000, 400, 0.0);
        let db = open(&tmp.path().join("db"), tiny_with(spec));
        for op in &ops[..600] {
            op.write(&db).expect("write");
        }
        // Settled, so the second backup finds the same files.
        db.flush().expect("flush");
        db.wait_for_compactions().expect("settle");
        let first = db.backup(&store).expect("backup 1");
        assert_eq!(first.id, 1, "[{spec}]");
        assert!(first.files > 0, "[{spec}] {first:?}");
        assert_eq!(
            first.copied_bytes, first.bytes,
            "[{spec}] a first backup copies all"
        );
        // Nothing new: nothing copied.
        let again = db.backup(&store).expect("backup 2");
        assert_eq!((again.id, again.copied_bytes), (2, 0), "[{spec}] {again:?}");
        assert_eq!(again.bytes, first.bytes, "[{spec}]");
        for op in &ops[600..] {
            op.write(&db).expect("write");
        }
        let third = db.backup(&store).expect("backup 3");
        assert!(third.copied_bytes > 0, "[{spec}] {third:?}");
        assert!(third.last_sequence > first.last_sequence, "[{spec}]");
        db.close().expect("close");
        drop(db);

        let listed: Vec<u64> = store.list().expect("list").iter().map(|b| b.id).collect();
        assert_eq!(listed, vec![1, 2, 3], "[{spec}]");
        for (id, upto) in [(1, 600), (2, 600), (3, ops.len())] {
            let target = tmp.path().join(format!("restored-{id}"));
            let r = store.restore(Some(id), &target).expect("restore");
            assert_eq!(r.id, id);
            store.verify(id).expect("verify");
            let copy = open(&target, tiny_with(spec));
            assert_eq!(all(&copy), model(&ops[..upto]), "[{spec}] backup {id}");
            // A restored database is a database of its own.
            copy.put(b"after", b"x").expect("put");
            copy.close().expect("close");
        }
        // `None` restores the newest.
        let newest = store
            .restore(None, tmp.path().join("newest"))
            .expect("restore");
        assert_eq!(newest.id, 3, "[{spec}]");
    }
}

/// Two databases restored from one backup write the same file numbers
/// from there on. Backed up into the same store, each keeps its own table
/// although number and size agree, and they share the tables both kept
/// from the backup.
#[test]
fn two_histories_with_the_same_file_numbers_never_share_a_copy() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = BackupStore::open(tmp.path().join("store")).expect("store");
    // No compaction: every flush adds a table and the older ones stay.
    let spec = "level0_file_num_compaction_trigger=100,level0_slowdown_writes_trigger=100,\
                level0_stop_writes_trigger=100,max_bytes_for_level_base=1G";
    let a = open(&tmp.path().join("a"), tiny_with(spec));
    for i in 0..300u32 {
        a.put(format!("key{i:05}").as_bytes(), [b'0'; 30])
            .expect("put");
    }
    a.flush().expect("flush");
    a.wait_for_compactions().expect("settle");
    let base = a.backup(&store).expect("backup of a");
    a.close().expect("close");
    let (b_dir, c_dir) = (tmp.path().join("b"), tmp.path().join("c"));
    let mut backups = Vec::new();
    for (dir, value) in [(&b_dir, b"BBBB"), (&c_dir, b"CCCC")] {
        store.restore(Some(base.id), dir).expect("restore");
        let db = open(dir, tiny_with(spec));
        // The same shape of write on both sides, different bytes.
        db.put(b"diverged", value).expect("put");
        db.flush().expect("flush");
        db.wait_for_compactions().expect("settle");
        let b = db.backup(&store).expect("backup");
        assert!(b.copied_bytes > 0, "its own table is copied: {b:?}");
        assert!(
            b.copied_bytes < b.bytes,
            "it shares the tables it kept: {b:?}"
        );
        db.close().expect("close");
        backups.push((b.id, value));
    }
    // The two new tables do collide on number and size: the case at hand.
    let tables = |d: &Path| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(d)
            .expect("list")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".table"))
            .map(|e| {
                let size = e.metadata().expect("stat").len();
                (e.file_name().to_string_lossy().into_owned(), size)
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        tables(&b_dir),
        tables(&c_dir),
        "the same names and sizes on both sides"
    );
    for (id, want) in backups {
        let target = tmp.path().join(format!("r{id}"));
        store.restore(Some(id), &target).expect("restore");
        let db = open(&target, tiny_with(spec));
        assert_eq!(
            db.get(b"diverged").expect("get"),
            Some(want.to_vec()),
            "backup {id}"
        );
        assert_eq!(all(&db).len(), 301, "backup {id}");
    }
}

#[test]
fn damage_in_the_store_fails_verify_and_restore() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let store = BackupStore::open(&store_dir).expect("store");
    let db = open(&tmp.path().join("db"), tiny_with(""));
    for op in &history(3, 400, 200, 0.0) {
        op.write(&db).expect("write");
    }
    let b = db.backup(&store).expect("backup");
    let victim = store_dir.join("shared").join(&shared_names(&store_dir)[0]);
    let mut bytes = std::fs::read(&victim).expect("read");
    bytes[0] ^= 0x40;
    std::fs::write(&victim, &bytes).expect("write");
    match store.verify(b.id) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, victim),
        other => panic!("verify of a damaged backup gave {other:?}"),
    }
    match store.restore(Some(b.id), tmp.path().join("r")) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, victim),
        other => panic!("restore of a damaged backup gave {other:?}"),
    }
    // A damaged meta file is reported by `list` and can be deleted.
    let meta = store_dir.join("meta").join(format!("{:08}.backup", b.id));
    let mut m = std::fs::read(&meta).expect("read meta");
    let mid = m.len() / 2;
    m[mid] ^= 1;
    std::fs::write(&meta, &m).expect("write meta");
    assert!(matches!(store.list(), Err(Error::Corruption { .. })));
    store.delete(b.id).expect("delete the damaged backup");
    assert!(store.list().expect("list").is_empty());
    assert!(shared_names(&store_dir).is_empty(), "its files are gone");
    // Numbers count on from the newest backup the store holds.
    assert_eq!(db.backup(&store).expect("backup").id, 1);
}

#[test]
fn deleting_a_backup_frees_only_the_files_no_other_holds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let store = BackupStore::open(&store_dir).expect("store");
    let ops = history(11, 900, 300, 0.0);
    let db = open(&tmp.path().join("db"), tiny_with(""));
    let mut ids = Vec::new();
    for part in ops.chunks(300) {
        for op in part {
            op.write(&db).expect("write");
        }
        ids.push(db.backup(&store).expect("backup").id);
    }
    db.close().expect("close");
    let before = shared_names(&store_dir);
    let freed = store.delete(ids[0]).expect("delete");
    let after = shared_names(&store_dir);
    assert!(after.len() <= before.len());
    assert_eq!(
        freed == 0,
        after.len() == before.len(),
        "{freed} bytes freed"
    );
    assert!(matches!(store.delete(ids[0]), Err(Error::NotFound(_))));
    assert!(matches!(
        store.restore(Some(ids[0]), tmp.path().join("gone")),
        Err(Error::NotFound(_))
    ));
    for (id, upto) in [(ids[1], 600), (ids[2], 900)] {
        store.verify(id).expect("verify");
        let target = tmp.path().join(format!("r{id}"));
        store.restore(Some(id), &target).expect("restore");
        assert_eq!(all(&open(&target, tiny_with(""))), model(&ops[..upto]));
    }
    let (gone, _) = store.keep_newest(1).expect("keep newest");
    assert_eq!(gone, vec![ids[1]]);
    let left: Vec<u64> = store.list().expect("list").iter().map(|b| b.id).collect();
    assert_eq!(left, vec![ids[2]]);
    store.verify(ids[2]).expect("the kept backup is whole");
}

/// A backup that fails partway (a copy cannot be created in the store)
/// returns the error; the store lists what it held, the earlier backup
/// restores, and the next backup succeeds.
#[test]
fn a_failed_backup_leaves_the_store_as_it_was() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()), 3);
    let handle = fault.handle();
    let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
    let opts = || tiny_with("").fs(fs.clone());
    let ops = history(21, 800, 300, 0.0);
    let db = open(Path::new("/db"), opts());
    let store = BackupStore::open_with(fs.clone(), "/store").expect("store");
    for op in &ops[..400] {
        op.write(&db).expect("write");
    }
    let first = db.backup(&store).expect("backup");
    for op in &ops[400..] {
        op.write(&db).expect("write");
    }
    handle.add(
        Rule::new(Op::Create, Trigger::Matching(2), FaultError::Eio).on_paths("/store/shared/"),
    );
    let injected = handle.injected();
    match db.backup(&store) {
        Err(e) => assert!(e.io_kind().is_some(), "an I/O error, got {e}"),
        Ok(b) => panic!("the backup succeeded despite the fault: {b:?}"),
    }
    assert_eq!(handle.injected(), injected + 1, "the fault fired");
    let listed: Vec<u64> = store.list().expect("list").iter().map(|b| b.id).collect();
    assert_eq!(listed, vec![first.id]);
    let second = db.backup(&store).expect("a later backup");
    db.close().expect("close");
    for (id, upto) in [(first.id, 400), (second.id, ops.len())] {
        let target = PathBuf::from(format!("/r{id}"));
        store.restore(Some(id), &target).expect("restore");
        assert_eq!(
            all(&open(&target, opts())),
            model(&ops[..upto]),
            "backup {id}"
        );
    }
}

/// Once `backup` returns, the backup survives a power loss of the store's
/// machine, in both level-0 designs; so does a restore once it returns.
#[test]
fn a_backup_and_a_restore_survive_a_power_loss() {
    for spec in ["", MATRIX] {
        let fs = MemFs::new();
        let opts = |fs: &MemFs| tiny_with(spec).fs(Arc::new(fs.clone()) as Arc<dyn FileSystem>);
        let ops = history(31, 500, 150, 0.0);
        let db = open(Path::new("/db"), opts(&fs));
        for op in &ops {
            op.write(&db).expect("write");
        }
        let store = BackupStore::open_with(Arc::new(fs.clone()), "/store").expect("store");
        let b = db.backup(&store).expect("backup");
        let lost = fs.crash_clone(CrashKind::PowerLoss);
        drop(store);
        let store = BackupStore::open_with(Arc::new(lost.clone()), "/store").expect("store");
        assert_eq!(store.list().expect("list").len(), 1, "[{spec}]");
        store.restore(Some(b.id), "/restored").expect("restore");
        let lost_again = lost.crash_clone(CrashKind::PowerLoss);
        let copy = open(Path::new("/restored"), opts(&lost_again));
        assert_eq!(all(&copy), model(&ops), "[{spec}]");
    }
}

#[test]
fn a_store_is_locked_and_a_restore_target_must_be_new() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let store = BackupStore::open(&store_dir).expect("store");
    // The lock is a flock(2) on a file of its own: a second open, even in
    // this process, is refused.
    assert!(matches!(
        BackupStore::open(&store_dir),
        Err(Error::Locked(_))
    ));
    assert!(matches!(
        store.restore(None, tmp.path().join("r")),
        Err(Error::NotFound(_))
    ));
    let db = open(&tmp.path().join("db"), tiny_with(""));
    db.put(b"k", b"v").expect("put");
    db.backup(&store).expect("backup");
    let target = tmp.path().join("there");
    std::fs::create_dir(&target).expect("mkdir");
    assert!(matches!(
        store.restore(None, &target),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(std::fs::read_dir(&target).expect("list").count(), 0);
}

#[test]
fn kvell_says_it_has_no_backups() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut opts = Options::default();
    opts.apply("engine=kvell,kvell_workers=1").expect("options");
    let kv = strata::open(tmp.path().join("kv"), opts).expect("open");
    kv.put(b"k", b"v").expect("put");
    let store = BackupStore::open(tmp.path().join("store")).expect("store");
    match kv.backup(&store) {
        Err(Error::NotSupported(m)) => assert!(m.contains("kvell"), "{m}"),
        other => panic!("kvell backup gave {other:?}"),
    }
    assert!(store.list().expect("list").is_empty());
}

/// A backup written in a newer meta format is listed as such, kept by
/// `keep_newest`, and its files survive the deletion of another backup;
/// a stray file in `meta/` is ignored; a shared copy that went missing is
/// copied again by the next backup.
#[test]
fn foreign_backups_stray_names_and_lost_copies_are_handled() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let store = BackupStore::open(&store_dir).expect("store");
    let db = open(&tmp.path().join("db"), tiny_with(""));
    for op in &history(41, 300, 100, 0.0) {
        op.write(&db).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let first = db.backup(&store).expect("backup");
    // Make backup 1's record claim format version 2 (checksum fixed up).
    let meta = store_dir
        .join("meta")
        .join(format!("{:08}.backup", first.id));
    let mut m = std::fs::read(&meta).expect("read meta");
    m[8] = 2;
    let body = m.len() - 4;
    let crc = crc32c_masked(&m[..body]);
    m[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&meta, &m).expect("write meta");
    match store.list() {
        Err(Error::NotSupported(m)) => assert!(m.contains("00000001.backup"), "{m}"),
        other => panic!("list beside a foreign backup gave {other:?}"),
    }
    // A stray name is not a backup.
    std::fs::write(store_dir.join("meta").join("1.backup"), b"junk").expect("write");
    let before = shared_names(&store_dir);
    db.put(b"more", b"x").expect("put");
    let second = db.backup(&store).expect("backup beside a foreign one");
    assert_eq!(second.id, first.id + 1);
    store.delete(second.id).expect("delete");
    for name in &before {
        assert!(
            store_dir.join("shared").join(name).exists(),
            "{name}: a file of the foreign backup was collected"
        );
    }
    let (gone, _) = store.keep_newest(0).expect("keep none");
    assert!(gone.is_empty(), "the foreign backup is kept: {gone:?}");
    // Restore the record; lose one of its copies; the next backup copies
    // it again instead of naming a missing file.
    m[8] = 1;
    let crc = crc32c_masked(&m[..body]);
    m[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&meta, &m).expect("write meta");
    // A copy of a table the database holds once it settled (compactions
    // may have replaced every table copied above): the next backup finds it
    // missing and copies it again.
    db.wait_for_compactions().expect("settle");
    let settled = db.backup(&store).expect("backup");
    let live: Vec<String> = std::fs::read_dir(tmp.path().join("db"))
        .expect("list db")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".table").map(str::to_string)
        })
        .collect();
    let kept = shared_names(&store_dir)
        .into_iter()
        .find(|n| live.iter().any(|l| n.starts_with(&format!("{l}-"))))
        .expect("a copy of a live table");
    let lost = store_dir.join("shared").join(kept);
    std::fs::remove_file(&lost).expect("remove");
    let third = db.backup(&store).expect("backup");
    assert_eq!(third.id, settled.id + 1);
    assert!(lost.exists(), "the lost copy was made again");
    assert!(third.copied_bytes > 0);
    store.verify(third.id).expect("verify");
    db.close().expect("close");
}

/// The masked crc32c the store's records end with (FORMAT §0).
fn crc32c_masked(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}
