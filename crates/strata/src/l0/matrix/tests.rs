use super::*;
use crate::io::MemFs;
use crate::types::{internal_key, ValueKind};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// Every key's newest sequence number and value.
type Newest = BTreeMap<Vec<u8>, (u64, Vec<u8>)>;

/// Rows of random keys (newest last in `keys`), each with hints into the
/// previous one, as a container; plus the newest value of every key.
fn container(rows: usize, per_row: usize, hints: bool, segment_rows: usize) -> (Matrix, Newest) {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let dir = Path::new("/fast");
    fs.create_dir_all(dir).expect("dir");
    let cfg = Arc::new(Config {
        dir: dir.to_path_buf(),
        segment_rows,
        row_bytes: 4096,
        hints,
        bits_per_key: 10,
    });
    let mut m = Matrix::new(cfg, Arc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut newest = BTreeMap::new();
    let mut seq = 1u64;
    for r in 0..rows {
        let mut keys: Vec<Vec<u8>> = (0..per_row)
            .map(|_| format!("k{:06}", rng.gen_range(0..20 * per_row)).into_bytes())
            .collect();
        keys.sort();
        keys.dedup();
        let id = 10 + r as u64;
        let top = m.rows.first().map(|t| t.meta.clone());
        let mut w =
            row::RowWriter::create(&*fs, dir, id, top.as_ref().map(|t| &t.row)).expect("create");
        for k in &keys {
            let v = format!("{}-{seq}", String::from_utf8_lossy(k)).into_bytes();
            w.add(&internal_key(k, seq, ValueKind::Value as u8), &v)
                .expect("add");
            newest.insert(k.clone(), (seq, v));
            seq += 1;
        }
        let (smallest, largest) = (w.smallest.clone(), w.largest.clone());
        let entries = w.entries();
        let size = w.finish().expect("finish");
        let desc = FileDesc {
            id,
            size,
            smallest,
            largest,
            entries,
            ..FileDesc::default()
        };
        let meta = RowMeta::open(desc, &fs, dir).expect("open row");
        m.apply(vec![meta], &[], &[]);
    }
    (m, newest)
}

#[test]
fn hinted_lookups_find_what_full_searches_find_with_fewer_comparisons() {
    let (with, newest) = container(12, 400, true, 50);
    let (without, _) = container(12, 400, false, 50);
    for i in 0..9000 {
        let k = format!("k{i:06}").into_bytes();
        let want = newest
            .get(&k)
            .map(|(s, v)| (*s, ValueKind::Value, v.clone()));
        assert_eq!(with.lookup(&k, u64::MAX >> 8), want, "key {i}");
        assert_eq!(without.lookup(&k, u64::MAX >> 8), want, "key {i}");
    }
    let cmp = |m: &Matrix| {
        m.counters.comparisons.load(Ordering::Relaxed) as f64
            / m.counters.rows_searched.load(Ordering::Relaxed) as f64
    };
    assert!(
        cmp(&with) < 0.6 * cmp(&without),
        "comparisons per row: hints {} vs none {}",
        cmp(&with),
        cmp(&without)
    );
}

#[test]
fn a_snapshot_read_sees_the_version_of_its_time() {
    let (m, newest) = container(4, 50, true, 50);
    let (k, (seq, _)) = newest.iter().next().expect("a key");
    // Before its newest write: an older version or nothing, never the newest.
    let older = m.lookup(k, seq - 1);
    assert!(older.is_none_or(|(s, _, _)| s < *seq));
}

#[test]
fn segment_filters_skip_rows_without_the_key() {
    let (m, _) = container(9, 100, true, 3);
    assert_eq!(m.segments(), 3);
    for i in 0..200 {
        assert!(m
            .lookup(format!("absent{i}").as_bytes(), u64::MAX >> 8)
            .is_none());
    }
    let skipped = m.counters.segments_skipped.load(Ordering::Relaxed);
    assert!(skipped > 500, "{skipped} of 600 segment probes skipped");
}

#[test]
fn compacted_cells_are_invisible_and_deleted_rows_leave_their_segments() {
    let (mut m, newest) = container(4, 100, true, 2);
    // A column up to the median key of the whole container went to L1.
    let keys: Vec<&Vec<u8>> = newest.keys().collect();
    let boundary = keys[keys.len() / 2].clone();
    let cursors: Vec<(u64, u32)> = m
        .rows
        .iter()
        .map(|r| {
            let row = &r.meta.row;
            (r.meta.id(), row.upper_bound(&boundary, 0, row.len()))
        })
        .collect();
    m.apply(Vec::new(), &cursors, &[]);
    for (k, (seq, v)) in &newest {
        let got = m.lookup(k, u64::MAX >> 8);
        if k <= &boundary {
            assert_eq!(got, None, "compacted key {k:?} still served by a row");
        } else {
            assert_eq!(got, Some((*seq, ValueKind::Value, v.clone())));
        }
    }
    let mut it: Vec<Box<dyn InternalIterator>> = Vec::new();
    m.add_iterators(&mut it);
    for mut i in it {
        i.seek_to_first();
        assert!(!i.valid() || types::user_key(i.key()) > boundary.as_slice());
    }
    // The two oldest rows go: their segment with them.
    let old: Vec<u64> = m.rows.iter().rev().take(2).map(|r| r.meta.id()).collect();
    let removed = m.apply(Vec::new(), &[], &old);
    assert_eq!(removed.len(), 2);
    assert_eq!((m.rows.len(), m.segments()), (2, 1));
}
