use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata::{KvStore, Options, ScanRange};
use strata_server::cmd::{now_ms, Data, Session};
use strata_server::keys;
use strata_server::resp::Reply;
use strata_server::{spawn, Config};

fn store(dir: &std::path::Path) -> Arc<dyn KvStore> {
    Arc::from(strata::open(dir, options()).expect("open"))
}

fn exec(d: &Data, s: &mut Session, args: &[&str]) -> Reply {
    let a: Vec<Vec<u8>> = args.iter().map(|x| x.as_bytes().to_vec()).collect();
    let r = d.exec(s, &a);
    if let Reply::Error(e) = &r {
        panic!("{args:?}: {e}");
    }
    r
}

/// Every raw record of the store whose key starts with `tag`.
fn records(store: &Arc<dyn KvStore>, tag: u8) -> Vec<Vec<u8>> {
    let end = [tag + 1];
    store
        .scan(ScanRange::new(Bound::Included(&[tag][..]), Bound::Excluded(&end[..])))
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// Raw keys (after the tag byte) of the metadata records, as strings.
fn meta_keys(store: &Arc<dyn KvStore>) -> Vec<String> {
    records(store, keys::META)
        .iter()
        .map(|k| String::from_utf8_lossy(&k[1..]).into_owned())
        .collect()
}

/// Waits until `now_ms()` is past `t` (the keys set with `PX` have expired).
fn wait_past(t: u64) {
    while now_ms() <= t {
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn sweep_expired_removes_every_record_of_expired_keys_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = store(dir.path());
    let d = Data::new(st.clone(), None, 0);
    let mut s = Session {
        authenticated: true,
        quit: false,
    };
    // Expiring soon: a string, a hash and a zset. Staying: a string with no
    // expiry, one expiring in an hour, and a hash with no expiry.
    exec(&d, &mut s, &["SET", "gone:s", "v", "PX", "1"]);
    exec(&d, &mut s, &["HSET", "gone:h", "f1", "a", "f2", "b"]);
    exec(&d, &mut s, &["PEXPIRE", "gone:h", "1"]);
    exec(&d, &mut s, &["ZADD", "gone:z", "1", "one", "2", "two"]);
    exec(&d, &mut s, &["PEXPIRE", "gone:z", "1"]);
    let set_at = now_ms();
    exec(&d, &mut s, &["SET", "stay:plain", "v"]);
    exec(&d, &mut s, &["SET", "stay:later", "v", "EX", "3600"]);
    exec(&d, &mut s, &["HSET", "stay:h", "f", "x"]);
    assert_eq!(records(&st, keys::EXPIRY).len(), 4);
    wait_past(set_at + 1);

    assert_eq!(d.sweep_expired(1000).expect("sweep"), 3);
    assert_eq!(meta_keys(&st), ["stay:h", "stay:later", "stay:plain"]);
    // Only the unexpired key's expiry entry is left, and no sub-record of
    // the expired hash and zset.
    let expiry = records(&st, keys::EXPIRY);
    assert_eq!(expiry.len(), 1, "{expiry:?}");
    assert!(expiry[0].ends_with(b"stay:later"));
    assert_eq!(records(&st, keys::HASH).len(), 1, "only stay:h's field");
    assert!(records(&st, keys::ZMEMBER).is_empty());
    assert!(records(&st, keys::ZSCORE).is_empty());
    // Nothing left to sweep; reads are unchanged.
    assert_eq!(d.sweep_expired(1000).expect("sweep again"), 0);
    assert!(matches!(
        exec(&d, &mut s, &["GET", "stay:later"]),
        Reply::Bulk(v) if v == b"v"
    ));
    assert!(matches!(exec(&d, &mut s, &["GET", "gone:s"]), Reply::Nil));

    // `max` bounds one round.
    for i in 0..5 {
        exec(&d, &mut s, &["SET", &format!("batch:{i}"), "v", "PX", "1"]);
    }
    wait_past(now_ms() + 1);
    assert_eq!(d.sweep_expired(2).expect("sweep 2"), 2);
    assert_eq!(d.sweep_expired(1000).expect("sweep rest"), 3);
    assert_eq!(records(&st, keys::EXPIRY).len(), 1);

    // A key whose expiry was removed (PERSIST) or moved later keeps its
    // data, and its stale expiry entry is cleaned up.
    // (500 ms, not 1: with 1 ms the key could expire before PERSIST ran
    // on a busy machine, and then the sweep rightly removed it.)
    let set_at = now_ms();
    exec(&d, &mut s, &["SET", "kept", "v", "PX", "500"]);
    assert!(matches!(
        exec(&d, &mut s, &["PERSIST", "kept"]),
        Reply::Int(1)
    ));
    wait_past(set_at + 500);
    assert_eq!(d.sweep_expired(1000).expect("sweep"), 0);
    assert!(meta_keys(&st).contains(&"kept".to_string()));
    assert_eq!(records(&st, keys::EXPIRY).len(), 1);
}

#[test]
fn the_running_server_sweeps_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = store(dir.path());
    let server = spawn(
        st.clone(),
        Config {
            port: 0,
            ..Config::default()
        },
    )
    .expect("server starts");
    let mut con = redis::Client::open(format!("redis://{}/", server.addr()))
        .expect("client")
        .get_connection()
        .expect("connect");
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .arg("PX")
            .arg(1)
            .query(&mut con)
            .expect("set");
    }
    let _: () = redis::cmd("SET")
        .arg("stay")
        .arg("v")
        .query(&mut con)
        .expect("set");
    // No command touches the expired keys: only the sweeper (every 100 ms)
    // can remove their records. `LIVENESS` only bounds a broken sweeper.
    const LIVENESS: Duration = Duration::from_secs(60);
    let start = Instant::now();
    while !records(&st, keys::EXPIRY).is_empty() {
        assert!(
            start.elapsed() < LIVENESS,
            "the sweeper removed nothing: {} expiry records left",
            records(&st, keys::EXPIRY).len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(meta_keys(&st), ["stay"]);
    drop(con);
    server.stop().expect("stop");
}

/// The options of this module's engine.
fn options() -> Options {
    let mut o = Options::default();
    o.apply(ENGINE).expect("engine option");
    o
}
