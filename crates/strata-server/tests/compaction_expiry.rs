//! Compaction-time expiry: with `server_options`, the LSM's compactions
//! remove an expired string key's record before the sweeper reaches it;
//! hashes keep theirs for the sweeper; KVell opens without the filter.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;
use strata::{KvStore, Options, ScanRange};
use strata_server::cmd::{now_ms, Data, Session};
use strata_server::keys;
use strata_server::resp::Reply;
use strata_server::server_options;

fn exec(d: &Data, s: &mut Session, args: &[&str]) -> Reply {
    let a: Vec<Vec<u8>> = args.iter().map(|x| x.as_bytes().to_vec()).collect();
    let r = d.exec(s, &a);
    if let Reply::Error(e) = &r {
        panic!("{args:?}: {e}");
    }
    r
}

/// The keys (after the tag byte) of the metadata records.
fn meta_keys(store: &Arc<dyn KvStore>) -> Vec<String> {
    let end = [keys::META + 1];
    store
        .scan(ScanRange::new(
            Bound::Included(&[keys::META][..]),
            Bound::Excluded(&end[..]),
        ))
        .expect("scan")
        .into_iter()
        .map(|(k, _)| String::from_utf8_lossy(&k[1..]).into_owned())
        .collect()
}

#[test]
fn compactions_remove_expired_strings_before_the_sweeper() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = server_options(Options::default());
    assert!(opts.compaction_filter.get().is_some());
    let st: Arc<dyn KvStore> = Arc::from(strata::open(dir.path(), opts).expect("open"));
    let d = Data::new(st.clone(), None, 0);
    let mut s = Session {
        authenticated: true,
        quit: false,
    };
    exec(&d, &mut s, &["SET", "gone", "v", "PX", "1"]);
    exec(&d, &mut s, &["HSET", "gone:h", "f", "a"]);
    exec(&d, &mut s, &["PEXPIRE", "gone:h", "1"]);
    let set_at = now_ms();
    exec(&d, &mut s, &["SET", "stay", "v"]);
    exec(&d, &mut s, &["SET", "later", "v", "EX", "3600"]);
    while now_ms() <= set_at + 1 {
        std::thread::sleep(Duration::from_millis(2));
    }
    st.compact().expect("compact");
    // The string went with the compaction; the hash waits for the sweeper.
    assert_eq!(meta_keys(&st), ["gone:h", "later", "stay"]);
    assert_eq!(d.sweep_expired(1000).expect("sweep"), 1);
    assert_eq!(meta_keys(&st), ["later", "stay"]);
    assert_eq!(exec(&d, &mut s, &["GET", "gone"]), Reply::Nil);
    assert_eq!(exec(&d, &mut s, &["EXISTS", "gone:h"]), Reply::Int(0));
}

#[test]
fn kvell_opens_without_the_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.apply("engine=kvell").expect("engine");
    let opts = server_options(o);
    assert!(opts.compaction_filter.get().is_none());
    strata::open(dir.path(), opts).expect("open");
}
