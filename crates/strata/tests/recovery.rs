//! Recovery after a clean shutdown: unsynced writes, WAL-only data, many
//! reopens, and the directory cleanup done at open; `flush_on_close`; and
//! point-in-time recovery across several logs, and a log that ended early
//! without losing a write.

mod common;

use common::{all, open, tiny_options, HoldFlush, ReleaseOnDrop};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use strata::filename::{self, FileKind};
use strata::io::fault::{Op, Rule, Trigger};
use strata::io::{CrashKind, FaultError, FaultFs, FileSystem, MemFs};
use strata::{Options, WalRecovery, WriteBatch, WriteOptions};

fn files(dir: &Path) -> Vec<(FileKind, u64, String)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter_map(|n| filename::parse(&n).map(|(k, x)| (k, x, n)))
        .collect();
    out.sort_by(|a, b| a.2.cmp(&b.2));
    out
}

fn count(dir: &Path, kind: FileKind) -> usize {
    files(dir).iter().filter(|f| f.0 == kind).count()
}

fn names(dir: &Path) -> Vec<String> {
    files(dir).into_iter().map(|f| f.2).collect()
}

#[test]
fn unsynced_writes_survive_drop_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = BTreeMap::new();
    {
        let db = open(dir.path(), tiny_options());
        for i in 0..1500u32 {
            let k = format!("key{:05}", (i * 37) % 1000).into_bytes();
            if i % 9 == 0 {
                db.delete(&k).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("value-{i}-{}", "x".repeat((i % 80) as usize)).into_bytes();
                db.write(
                    {
                        let mut b = WriteBatch::new();
                        b.put(&k, &v);
                        b
                    },
                    &WriteOptions { sync: false },
                )
                .expect("put");
                model.insert(k, v);
            }
        }
    }
    let db = open(dir.path(), tiny_options());
    let got: BTreeMap<_, _> = all(&db).into_iter().collect();
    assert!(
        got == model,
        "state after reopen differs from what was written"
    );
}

#[test]
fn wal_only_data_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = || Options::default().write_buffer_size(64 << 20);
    {
        let db = open(dir.path(), opts());
        for i in 0..2000u32 {
            db.put(format!("k{i:05}"), format!("v{i}")).expect("put");
        }
        let s = db.stats();
        assert_eq!(s.flush_count, 0, "nothing may flush before the drop");
        assert_eq!(s.levels.iter().map(|l| l.files).sum::<usize>(), 0);
        // The data is only in the WAL.
        assert_eq!(count(dir.path(), FileKind::Table), 0);
        let wal_bytes: u64 = files(dir.path())
            .iter()
            .filter(|f| f.0 == FileKind::Wal)
            .map(|f| std::fs::metadata(dir.path().join(&f.2)).map_or(0, |m| m.len()))
            .sum();
        assert!(
            wal_bytes > 2000 * 8,
            "WAL holds the writes ({wal_bytes} bytes)"
        );
    }
    let db = open(dir.path(), opts());
    for i in 0..2000u32 {
        assert_eq!(
            db.get(format!("k{i:05}")).expect("get"),
            Some(format!("v{i}").into_bytes())
        );
    }
    assert_eq!(all(&db).len(), 2000);
}

#[test]
fn many_reopens_with_writes_in_between() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = BTreeMap::new();
    for round in 0..25u32 {
        let db = open(dir.path(), tiny_options());
        let got: BTreeMap<_, _> = all(&db).into_iter().collect();
        assert!(got == model, "round {round}: state differs after reopen");
        for i in 0..60u32 {
            let k = format!("k{:04}", (round * 31 + i * 7) % 400).into_bytes();
            if (round + i) % 5 == 0 {
                db.delete(&k).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("r{round}i{i}{}", "y".repeat((i * 3) as usize)).into_bytes();
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
        }
        if round % 4 == 1 {
            db.flush().expect("flush");
        }
        // Files of a live database: one manifest, CURRENT, LOCK.
        assert_eq!(
            count(dir.path(), FileKind::Manifest),
            1,
            "{:?}",
            names(dir.path())
        );
        assert_eq!(count(dir.path(), FileKind::Current), 1);
    }
    let db = open(dir.path(), tiny_options());
    let got: BTreeMap<_, _> = all(&db).into_iter().collect();
    assert!(got == model, "final state differs");
}

#[test]
fn reopen_removes_obsolete_wals_and_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open(dir.path(), tiny_options());
        for i in 0..3000u32 {
            db.put(format!("k{:05}", (i * 13) % 1200), [i as u8; 64])
                .expect("put");
        }
        db.flush().expect("flush");
        db.compact_range::<&[u8], _>(..).expect("compact");
    }
    let live = {
        let db = open(dir.path(), tiny_options());
        // Wait for any compaction that open started, then close.
        db.flush().expect("flush");
        let s = db.stats();
        s.levels.iter().map(|l| l.files).sum::<usize>()
    };
    let db = open(dir.path(), tiny_options());
    let s = db.stats();
    let live_now: usize = s.levels.iter().map(|l| l.files).sum();
    // Every table in the directory is one the version uses.
    assert_eq!(
        count(dir.path(), FileKind::Table),
        live_now,
        "{:?}",
        names(dir.path())
    );
    assert!(live_now >= 1 && live_now <= live.max(1) + 1);
    // The fresh WAL (and perhaps the next one, made ahead), one
    // manifest, no temp files.
    let wals = count(dir.path(), FileKind::Wal);
    assert!((1..=2).contains(&wals), "{:?}", names(dir.path()));
    assert_eq!(count(dir.path(), FileKind::Manifest), 1);
    assert_eq!(count(dir.path(), FileKind::Temp), 0);
    assert_eq!(all(&db).len(), 1200);
    drop(db);
    // Closed: the log made ahead is gone, the one in use stays.
    assert_eq!(
        count(dir.path(), FileKind::Wal),
        1,
        "{:?}",
        names(dir.path())
    );
}

/// Memtable switches take logs a background thread made ahead; logs are
/// still used in number order (the replay after a close without a flush
/// finds every overwrite's newest value), and close leaves no spare log
/// behind (the newest log holds the last write).
#[test]
fn switches_take_logs_made_ahead_in_number_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = BTreeMap::new();
    {
        let db = open(dir.path(), tiny_options().flush_on_close(false));
        for i in 0..4000u32 {
            let k = format!("k{:04}", (i * 7) % 300).into_bytes();
            let v = format!("v{i:06}").into_bytes();
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        }
        let last = b"the-last-write".to_vec();
        db.put(b"k0000", &last).expect("put");
        model.insert(b"k0000".to_vec(), last);
        let s = db.stats();
        assert!(s.wal_spares_used > 0, "no switch took a log made ahead");
    }
    let newest = files(dir.path())
        .into_iter()
        .filter(|f| f.0 == FileKind::Wal)
        .max_by_key(|f| f.1)
        .expect("a WAL");
    let bytes = std::fs::read(dir.path().join(&newest.2)).expect("read");
    assert!(
        bytes.windows(14).any(|w| w == b"the-last-write"),
        "the newest log {} lacks the last write: {:?}",
        newest.2,
        names(dir.path())
    );
    let db = open(dir.path(), tiny_options());
    assert_eq!(all(&db), model.into_iter().collect::<Vec<_>>());
}

#[test]
fn stray_temp_and_unknown_table_are_removed_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open(dir.path(), tiny_options());
        for i in 0..500u32 {
            db.put(format!("k{i:04}"), format!("v{i}")).expect("put");
        }
    }
    // A table number no manifest names (beyond every number in use), a
    // leftover temp file of an interrupted CURRENT update, and a file that
    // is not ours.
    let max = files(dir.path()).iter().map(|f| f.1).max().unwrap_or(0);
    let stray_table = filename::table_path(dir.path(), max + 1000);
    std::fs::write(&stray_table, b"not really a table").expect("write");
    let low_table = filename::table_path(dir.path(), 1);
    std::fs::write(&low_table, b"junk").expect("write");
    let tmp = dir.path().join("CURRENT.tmp");
    std::fs::write(&tmp, b"MANIFEST-999999\n").expect("write");
    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, b"keep me").expect("write");

    let db = open(dir.path(), tiny_options());
    assert!(!stray_table.exists(), "unknown table removed");
    assert!(!low_table.exists(), "unknown table removed");
    assert!(!tmp.exists(), "temp file removed");
    assert!(foreign.exists(), "files that are not ours stay");
    for i in 0..500u32 {
        assert_eq!(
            db.get(format!("k{i:04}")).expect("get"),
            Some(format!("v{i}").into_bytes())
        );
    }
    drop(db);
    // And the database still opens after the cleanup.
    let db = open(dir.path(), tiny_options());
    assert_eq!(all(&db).len(), 500);
}

/// Regression: WAL replay larger than the write buffer is written out in
/// several L0 chunks; a tombstone in a later chunk must not be dropped while
/// the value it deletes sits in an earlier chunk.
#[test]
fn replay_in_several_chunks_keeps_deletes() {
    let live = tempfile::tempdir().expect("tempdir");
    let copy = tempfile::tempdir().expect("tempdir");
    let db = open(live.path(), Options::default());
    db.put(b"victim", b"old value").expect("put");
    for i in 0..2000u32 {
        db.put(format!("filler{i:05}"), [b'x'; 100]).expect("put");
    }
    db.delete(b"victim").expect("delete");
    // Copy the directory while the data is still only in the WAL (the OS has
    // every acknowledged write), as a crash would leave it.
    for entry in std::fs::read_dir(live.path()).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).expect("copy");
        }
    }
    drop(db);
    // L0 compaction held off, so the replay's tables are still there to count.
    let db = open(
        copy.path(),
        Options::default()
            .write_buffer_size(16 * 1024)
            .level0_file_num_compaction_trigger(100)
            .level0_slowdown_writes_trigger(100)
            .level0_stop_writes_trigger(100),
    );
    assert!(
        db.stats().levels[0].files > 1,
        "replay was written in several chunks"
    );
    assert_eq!(
        db.get(b"victim").expect("get"),
        None,
        "deleted key came back"
    );
}

#[test]
fn flush_on_close_leaves_the_data_in_a_table_and_nothing_to_replay() {
    for flush_on_close in [false, true] {
        let ctx = format!("flush_on_close = {flush_on_close}");
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = || Options::default().flush_on_close(flush_on_close);
        let db = open(dir.path(), opts());
        for i in 0..100 {
            db.put(format!("key{i:03}"), format!("v{i}")).expect("put");
        }
        db.close().expect("close");
        assert_eq!(
            db.stats().flush_count,
            u64::from(flush_on_close),
            "{ctx}: flushes at close"
        );
        drop(db);
        // Flushed: one table, and every log holds no record, only its
        // header and sync marks (the next open replays nothing). Not
        // flushed: no table, the data is in the (synced) log.
        let logs: Vec<usize> = files(dir.path())
            .iter()
            .filter(|f| f.0 == FileKind::Wal)
            .map(|f| {
                let path = dir.path().join(&f.2);
                let mut r = strata::wal::Reader::new(
                    strata::io::PosixFs.open_sequential(&path).expect("open"),
                    path.clone(),
                    WalRecovery::AbsoluteConsistency,
                )
                .zero_filled_end();
                let mut n = 0;
                while r.read_record().expect("an intact log").is_some() {
                    n += 1;
                }
                n
            })
            .collect();
        assert_eq!(
            count(dir.path(), FileKind::Table),
            usize::from(flush_on_close),
            "{ctx}"
        );
        assert_eq!(
            logs.iter().all(|&records| records == 0),
            flush_on_close,
            "{ctx}: records per log {logs:?}"
        );
        let db = open(dir.path(), opts());
        for i in 0..100 {
            assert_eq!(
                db.get(format!("key{i:03}")).expect("get"),
                Some(format!("v{i}").into_bytes()),
                "{ctx}"
            );
        }
        // Reopening after a flush at close wrote no table; replaying the
        // log wrote one.
        assert_eq!(count(dir.path(), FileKind::Table), 1, "{ctx}");
    }
}

/// Where each record of a log ends (`[0]`: the header record).
fn record_ends(fs: &MemFs, path: &Path) -> Vec<u64> {
    let file = fs.open_sequential(path).expect("open log");
    let mut r =
        strata::wal::Reader::new(file, path.to_path_buf(), WalRecovery::AbsoluteConsistency);
    // Logs of this build are of format 4 (a tagged header record).
    let mut ends = vec![
        (strata::wal::format::HEADER_SIZE + strata::wal::format::TAGGED_FILE_HEADER_LEN) as u64,
    ];
    while r.read_record().expect("intact log").is_some() {
        ends.push(r.last_good_offset());
    }
    ends
}

/// Small memtables, room for eight, one background thread: with it held,
/// writes fill log after log that nothing flushes.
fn held_logs_options() -> Options {
    Options::default()
        .write_buffer_size(8 * 1024)
        .max_write_buffer_number(8)
        .background_threads(1)
}

/// The key of write `i` in the tests that fill several logs.
fn log_key(i: usize) -> String {
    format!("key{i:05}")
}

/// Puts keys 0..20, flushes, waits until `gate` holds the background
/// thread in that flush's event, then puts 200-byte values from key 20 on
/// (nothing flushes them) until `count` logs hold writes, the newest five.
/// Returns (log, key index) of every write after the flush, the log being
/// the newest `.wal` file when the put returned, and the logs in order.
fn fill_held_logs(
    db: &strata::Db,
    mem: &MemFs,
    gate: &HoldFlush,
    count: usize,
) -> (Vec<(u64, usize)>, Vec<u64>) {
    for i in 0..20 {
        db.put(log_key(i), "flushed").expect("put");
    }
    db.flush().expect("flush");
    gate.wait_entered();
    let newest_log = || {
        mem.list_dir(Path::new("/db"))
            .expect("list")
            .iter()
            .filter_map(|n| n.strip_suffix(".wal")?.parse::<u64>().ok())
            .max()
            .expect("a log")
    };
    let mut written: Vec<(u64, usize)> = Vec::new();
    for i in 20.. {
        db.put(log_key(i), [b'v'; 200]).expect("put");
        let log = newest_log();
        written.push((log, i));
        let logs: BTreeSet<u64> = written.iter().map(|w| w.0).collect();
        if logs.len() == count && written.iter().filter(|w| w.0 == log).count() == 5 {
            break;
        }
    }
    let logs: Vec<u64> = written
        .iter()
        .map(|w| w.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(logs.len(), count, "{logs:?}");
    (written, logs)
}

/// A `sync` write first syncs the logs of switched memtables, appending a
/// mark to each; when that append fails after the mark's header reached the
/// file, the old log ends in a torn fragment that held no write. Every
/// write acknowledged before, in that log and in the newer one, is there
/// after a reopen, and the report says the tear lost nothing.
#[test]
fn a_failed_append_to_an_old_log_loses_no_acknowledged_write() {
    let mem = MemFs::new();
    let faulty = FaultFs::new(Arc::new(mem.clone()), 1);
    let h = faulty.handle();
    let faulty: Arc<dyn FileSystem> = Arc::new(faulty);
    let gate = HoldFlush::new(1);
    let opts = held_logs_options();
    let db = open(
        Path::new("/db"),
        opts.clone().fs(faulty.clone()).listener(gate.clone()),
    );
    let release = ReleaseOnDrop(gate.clone());
    let (written, logs) = fill_held_logs(&db, &mem, &gate, 3);
    // The log before the current one takes no more writes and was never
    // synced: the next `sync` write appends its mark there (a fragment
    // header, then the payload), and the payload's append fails.
    let old = logs[logs.len() - 2];
    let name = filename::wal_path(Path::new("/db"), old);
    let name = name.file_name().and_then(|n| n.to_str()).expect("name");
    h.add(Rule::new(Op::Append, Trigger::Matching(2), FaultError::Eio).on_paths(name));
    let mut batch = WriteBatch::new();
    batch.put("synced", "x");
    let failed = db.write(batch, &WriteOptions { sync: true });
    assert!(failed.is_err(), "the sync write succeeded: {failed:?}");
    assert_eq!(h.injected(), 1, "the fault did not fire");
    drop(release);
    let _ = db.close();
    drop(db);
    h.set_enabled(false);

    let db = open(Path::new("/db"), opts.fs(faulty));
    let got: BTreeSet<Vec<u8>> = all(&db).into_iter().map(|(k, _)| k).collect();
    let want: BTreeSet<Vec<u8>> = (0..20)
        .chain(written.iter().map(|w| w.1))
        .map(|i| log_key(i).into_bytes())
        .collect();
    let missing = want.difference(&got).count();
    assert_eq!(missing, 0, "{missing} acknowledged writes lost");
    let report = db.recovery_report().unwrap_or("");
    assert!(
        report.contains(&format!("log {old} ended early")) && report.contains("no write was lost"),
        "report: {report:?}"
    );
    assert_eq!(db.stats().recovery_stopped, 0);
}

#[test]
fn point_in_time_recovery_stops_at_damage_in_one_of_several_logs() {
    // The background thread is held after the first flush, so the writes
    // after it fill several logs that nothing flushes: a process crash then
    // leaves four logs to replay, one record (one put) each write.
    let mem = MemFs::new();
    let gate = HoldFlush::new(1);
    let opts = held_logs_options();
    let db = open(
        Path::new("/db"),
        opts.clone()
            .fs(Arc::new(mem.clone()))
            .listener(gate.clone()),
    );
    let release = ReleaseOnDrop(gate.clone());
    let (written, logs) = fill_held_logs(&db, &mem, &gate, 4);
    let crashed = mem.crash_clone(CrashKind::Process);
    drop(release);
    drop(db);
    let damaged = logs[1];
    let in_log = |l: u64| written.iter().filter(move |w| w.0 == l).map(|w| w.1);
    let damaged_keys: Vec<usize> = in_log(damaged).collect();
    assert!(damaged_keys.len() > 2);
    let path = filename::wal_path(Path::new("/db"), damaged);
    let ends = record_ends(&crashed, &path);
    assert_eq!(ends.len(), damaged_keys.len() + 1, "one record per put");
    // Damage the first record of the second log, then (separately) its last:
    // point-in-time recovery keeps exactly the writes before the damaged
    // record, and replays none of the intact later logs.
    for (what, record) in [("first", 1), ("last", damaged_keys.len())] {
        let fs = crashed.crash_clone(CrashKind::Process);
        fs.corrupt(&path, (ends[record] - 2) as usize, |b| b ^ 0x20)
            .expect("corrupt");
        let pit = opts.clone().wal_recovery(WalRecovery::PointInTime);
        let db = open(Path::new("/db"), pit.fs(Arc::new(fs.clone())));
        let got: BTreeSet<Vec<u8>> = all(&db).into_iter().map(|(k, _)| k).collect();
        let mut want: BTreeSet<Vec<u8>> = (0..20).map(|i| log_key(i).into_bytes()).collect();
        want.extend(in_log(logs[0]).map(|i| log_key(i).into_bytes()));
        want.extend(
            damaged_keys[..record - 1]
                .iter()
                .map(|&i| log_key(i).into_bytes()),
        );
        assert_eq!(
            got.len(),
            want.len(),
            "{what} record of log {damaged} damaged: {} keys recovered, {} expected",
            got.len(),
            want.len()
        );
        assert!(
            got == want,
            "{what} record of log {damaged} damaged: wrong keys"
        );
        drop(db);
        // The same damage fails an open that tolerates no damage.
        let fs = crashed.crash_clone(CrashKind::Process);
        fs.corrupt(&path, (ends[record] - 2) as usize, |b| b ^ 0x20)
            .expect("corrupt");
        let strict = opts
            .clone()
            .wal_recovery(WalRecovery::AbsoluteConsistency)
            .fs(Arc::new(fs));
        match strata::Db::open("/db", strict) {
            Err(e) => assert!(e.is_corruption(), "{what}: {e:?}"),
            Ok(_) => panic!("{what}: absolute consistency opened a damaged log"),
        }
    }
}

/// Regression (found by the power-loss tests under load): a flush recorded
/// the newest sequence handed out as the manifest's last sequence, which
/// covered writes in newer, unsynced logs. When a power loss then cut an
/// older log's tail at a record boundary while a newer log survived,
/// recovery could not see the hole in the history and replayed the newer
/// log: a later write recovered, an earlier one lost. The flush records
/// the newest sequence its tables hold, and recovery stops at the hole.
#[test]
fn a_lost_log_tail_stops_recovery_even_after_a_flush_of_an_older_log() {
    let mem = MemFs::new();
    // The first hold fills several logs that nothing flushes; the second
    // holds the flush of the oldest of them, its edit written.
    let (first, second) = (HoldFlush::new(1), HoldFlush::new(2));
    let opts = held_logs_options();
    let db = open(
        Path::new("/db"),
        opts.clone()
            .fs(Arc::new(mem.clone()))
            .listener(first.clone())
            .listener(second.clone()),
    );
    let release_second = ReleaseOnDrop(second.clone());
    let release_first = ReleaseOnDrop(first.clone());
    let (written, logs) = fill_held_logs(&db, &mem, &first, 3);
    // The oldest memtable written since the first hold is flushed, its log
    // made obsolete; its edit is written while newer logs hold writes.
    // (`newest_log` names the spare made before the first flush for the
    // writes that went to the log before it, so `logs[0]` stands for both;
    // `logs[1]` and `logs[2]` are exact.)
    drop(release_first);
    second.wait_entered();
    let crashed = mem.crash_clone(CrashKind::Process);
    drop(release_second);
    drop(db);
    let in_log = |l: u64| written.iter().filter(move |w| w.0 == l).map(|w| w.1);
    let cut: Vec<usize> = in_log(logs[1]).collect();
    assert!(cut.len() > 2);
    // The last record of the middle log never reached the disk (zeros, as
    // an unsynced page of a zero-filled or mapped log reads); the newest
    // log's pages did.
    let path = filename::wal_path(Path::new("/db"), logs[1]);
    let ends = record_ends(&crashed, &path);
    assert_eq!(ends.len(), cut.len() + 1, "one record per put");
    for at in ends[cut.len() - 1]..ends[cut.len()] {
        crashed.corrupt(&path, at as usize, |_| 0).expect("zero");
    }
    let db = open(Path::new("/db"), opts.fs(Arc::new(crashed)));
    let got: BTreeSet<Vec<u8>> = all(&db).into_iter().map(|(k, _)| k).collect();
    let mut want: BTreeSet<Vec<u8>> = (0..20).map(|i| log_key(i).into_bytes()).collect();
    want.extend(in_log(logs[0]).map(|i| log_key(i).into_bytes()));
    want.extend(
        cut[..cut.len() - 1]
            .iter()
            .map(|&i| log_key(i).into_bytes()),
    );
    let extra: Vec<String> = got
        .difference(&want)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let missing = want.difference(&got).count();
    assert!(
        extra.is_empty() && missing == 0,
        "recovered writes after the hole {extra:?}; {missing} missing"
    );
}
