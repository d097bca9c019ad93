use redis::{Connection, RedisResult, Value};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;
use strata::{KvStore, Options};
use strata_server::{spawn, Config, Running};

struct Fixture {
    server: Option<Running>,
    _dir: tempfile::TempDir,
}

fn start(cfg: Config) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = strata::open(dir.path(), options()).expect("open");
    let store: Arc<dyn KvStore> = Arc::from(db);
    let server = spawn(store, Config { port: 0, ..cfg }).expect("server starts");
    Fixture {
        server: Some(server),
        _dir: dir,
    }
}

impl Fixture {
    fn url(&self) -> String {
        format!(
            "redis://{}/",
            self.server.as_ref().map(|s| s.addr()).expect("running")
        )
    }
    fn con(&self) -> Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection()
            .expect("connect")
    }
    fn addr(&self) -> std::net::SocketAddr {
        self.server.as_ref().expect("running").addr()
    }
}

fn q<T: redis::FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn err(con: &mut Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let r: RedisResult<Value> = c.query(con);
    match r {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
    }
}

fn nil(con: &mut Connection, args: &[&str]) {
    let v: Option<Vec<u8>> = q(con, args);
    assert_eq!(v, None, "{args:?}");
}

#[test]
fn connection_and_server_commands() {
    let f = start(Config::default());
    let mut c = f.con();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING", "hi"]), "hi");
    assert_eq!(q::<String>(&mut c, &["ECHO", "a b"]), "a b");
    assert_eq!(q::<String>(&mut c, &["SELECT", "0"]), "OK");
    assert!(err(&mut c, &["SELECT", "1"]).contains("out of range"));
    assert!(err(&mut c, &["AUTH", "x"]).contains("without any password"));
    let hello: Vec<Value> = q(&mut c, &["HELLO", "2"]);
    assert!(hello.len() >= 6);
    assert!(err(&mut c, &["HELLO", "3"]).contains("NOPROTO"));
    assert!(q::<i64>(&mut c, &["COMMAND", "COUNT"]) > 40);
    let _: Value = q(&mut c, &["COMMAND", "DOCS"]);
    let info: Vec<Value> = q(&mut c, &["COMMAND", "INFO", "get", "nope"]);
    assert_eq!(info.len(), 2);
    assert_eq!(info[1], Value::Nil);
    let cfg: Vec<String> = q(&mut c, &["CONFIG", "GET", "save"]);
    assert_eq!(cfg, vec!["save".to_string(), String::new()]);
    let none: Vec<String> = q(&mut c, &["CONFIG", "GET", "no-such-thing"]);
    assert!(none.is_empty());
    assert!(err(&mut c, &["NOSUCHCMD", "a"]).contains("unknown command"));
    assert!(err(&mut c, &["GET"]).contains("wrong number of arguments"));
    assert!(err(&mut c, &["GET", "a", "b"]).contains("wrong number of arguments"));
    q::<()>(&mut c, &["SET", "k1", "v"]);
    q::<()>(&mut c, &["HSET", "h1", "f", "v"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    let info: String = q(&mut c, &["INFO"]);
    assert!(info.contains("redis_version:"), "{info}");
    assert!(info.contains("db0:keys=2"), "{info}");
    assert!(info.contains("strata_stats:{"), "{info}");
    assert_eq!(q::<String>(&mut c, &["FLUSHDB"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<String>(&mut c, &["QUIT"]), "OK");
}

#[test]
fn requirepass() {
    let f = start(Config {
        requirepass: Some("sesame".into()),
        ..Config::default()
    });
    let mut c = f.con();
    assert!(err(&mut c, &["GET", "a"]).contains("NOAUTH"));
    assert!(err(&mut c, &["AUTH", "wrong"]).contains("WRONGPASS"));
    assert_eq!(q::<String>(&mut c, &["AUTH", "sesame"]), "OK");
    nil(&mut c, &["GET", "a"]);
    let mut c2 = f.con();
    let hello: Vec<Value> = q(&mut c2, &["HELLO", "2", "AUTH", "default", "sesame"]);
    assert!(!hello.is_empty());
    assert_eq!(q::<String>(&mut c2, &["PING"]), "PONG");
    // The URL form authenticates on connect.
    let url = f.url().replace("redis://", "redis://:sesame@");
    let mut c3 = redis::Client::open(url)
        .expect("client")
        .get_connection()
        .expect("connect");
    assert_eq!(q::<String>(&mut c3, &["PING"]), "PONG");
}

#[test]
fn strings() {
    let f = start(Config::default());
    let mut c = f.con();
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v1"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v1");
    nil(&mut c, &["GET", "missing"]);
    nil(&mut c, &["SET", "k", "x", "NX"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v1");
    nil(&mut c, &["SET", "new", "x", "XX"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "new"]), 0);
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v2", "XX", "GET"]), "v1");
    nil(&mut c, &["SET", "fresh", "a", "GET"]);
    assert!(err(&mut c, &["SET", "k", "v", "NX", "XX"]).contains("syntax error"));
    assert!(err(&mut c, &["SET", "k", "v", "EX", "0"]).contains("invalid expire"));
    assert!(err(&mut c, &["SET", "k", "v", "EX", "x"]).contains("not an integer"));
    assert!(err(&mut c, &["SET", "k", "v", "BOGUS"]).contains("syntax error"));
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k2", "zz"]), 1);
    assert_eq!(q::<String>(&mut c, &["GETSET", "k2", "yy"]), "zz");
    nil(&mut c, &["GETSET", "k3", "yy"]);
    assert_eq!(q::<String>(&mut c, &["MSET", "a", "1", "b", "2"]), "OK");
    assert!(err(&mut c, &["MSET", "a", "1", "b"]).contains("wrong number"));
    let m: Vec<Option<String>> = q(&mut c, &["MGET", "a", "nope", "b"]);
    assert_eq!(m, vec![Some("1".into()), None, Some("2".into())]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "a", "nope"]), 3);
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "nope"]), 1);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "b"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "k"]), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "nope"]), "none");
    // Binary-safe keys and values.
    let bin_k = b"a\x00b\r\n".to_vec();
    let bin_v = vec![0u8, 255, 13, 10, 0];
    let _: () = redis::cmd("SET")
        .arg(&bin_k)
        .arg(&bin_v)
        .query(&mut c)
        .expect("set");
    let got: Vec<u8> = redis::cmd("GET").arg(&bin_k).query(&mut c).expect("get");
    assert_eq!(got, bin_v);
    let _: () = redis::cmd("SET")
        .arg("")
        .arg("empty-key")
        .query(&mut c)
        .expect("set");
    assert_eq!(q::<String>(&mut c, &["GET", ""]), "empty-key");
    // Counters.
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "41"]), 42);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]), 41);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "-9"]), 50);
    assert!(err(&mut c, &["INCR", "k"]).contains("not an integer"));
    assert!(err(&mut c, &["INCRBY", "n", "1.5"]).contains("not an integer"));
    q::<()>(&mut c, &["SET", "max", &i64::MAX.to_string()]);
    assert!(err(&mut c, &["INCR", "max"]).contains("overflow"));
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", "ab"]), 2);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", "cd"]), 4);
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "abcd");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "s"]), 4);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "nope"]), 0);
    // Wrong types.
    q::<()>(&mut c, &["HSET", "h", "f", "v"]);
    assert!(err(&mut c, &["GET", "h"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["INCR", "h"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["APPEND", "h", "x"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["SET", "h", "x", "GET"]).contains("WRONGTYPE"));
    let m: Vec<Option<String>> = q(&mut c, &["MGET", "h"]);
    assert_eq!(m, vec![None]);
    // SET replaces a hash entirely.
    q::<()>(&mut c, &["SET", "h", "now-a-string"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
    q::<()>(&mut c, &["HSET", "h2", "f", "v"]);
    q::<()>(&mut c, &["DEL", "h"]);
    let all: Vec<String> = q(&mut c, &["HGETALL", "h"]);
    assert!(all.is_empty());
}

#[test]
fn expiry() {
    let f = start(Config::default());
    let mut c = f.con();
    assert_eq!(q::<i64>(&mut c, &["TTL", "nope"]), -2);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100"]), 1);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((98_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "LT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "NX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nope", "10"]), 0);
    assert!(err(&mut c, &["EXPIRE", "k", "x"]).contains("not an integer"));
    // INCR and APPEND keep the TTL, SET drops it, SET KEEPTTL keeps it.
    q::<()>(&mut c, &["SET", "n", "1", "EX", "100"]);
    q::<()>(&mut c, &["INCR", "n"]);
    assert!(q::<i64>(&mut c, &["TTL", "n"]) > 0);
    q::<()>(&mut c, &["SET", "n", "5", "KEEPTTL"]);
    assert!(q::<i64>(&mut c, &["TTL", "n"]) > 0);
    q::<()>(&mut c, &["SET", "n", "5"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "n"]), -1);
    // Expired keys vanish at once, for every type. The TTL leaves the five
    // round trips before the first check a second; had they taken longer
    // (a stalled machine), that check only bounds the count.
    let set_at = std::time::Instant::now();
    q::<()>(&mut c, &["SET", "e1", "v", "PX", "1000"]);
    q::<()>(&mut c, &["HSET", "e2", "f", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "e2", "1000"]), 1);
    q::<()>(&mut c, &["ZADD", "e3", "1", "m"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "e3", "1000"]), 1);
    let live: i64 = q(&mut c, &["EXISTS", "e1", "e2", "e3"]);
    if set_at.elapsed() < Duration::from_millis(1000) {
        assert_eq!(live, 3);
    } else {
        assert!(live <= 3, "{live}");
    }
    // Past every deadline (the server reads the same clock).
    std::thread::sleep(Duration::from_millis(1050).saturating_sub(set_at.elapsed()));
    nil(&mut c, &["GET", "e1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "e1", "e2", "e3"]), 0);
    nil(&mut c, &["HGET", "e2", "f"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "e3"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "e1"]), -2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "e2"]), "none");
    // A new hash under an expired name starts empty.
    q::<()>(&mut c, &["HSET", "e2", "g", "w"]);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "e2"]), 1);
    // EXPIRE in the past deletes.
    q::<()>(&mut c, &["SET", "gone", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "gone", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0);
    // The sweeper removes expired records physically (DBSIZE counts live keys).
    let keys: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(keys, 3); // k, n, e2
}

#[test]
fn scan() {
    let f = start(Config::default());
    let mut c = f.con();
    for i in 0..250 {
        q::<()>(&mut c, &["SET", &format!("user:{i:03}"), "v"]);
    }
    for i in 0..20 {
        q::<()>(&mut c, &["HSET", &format!("hash:{i}"), "f", "v"]);
    }
    q::<()>(&mut c, &["SET", "short", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "MATCH", "user:*", "COUNT", "37"]);
        seen.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 250);
    let mut hashes = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "TYPE", "hash"]);
        hashes.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(hashes.len(), 20);
    let all: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .clone()
        .iter(&mut c)
        .expect("scan iter")
        .collect();
    assert_eq!(all.len(), 270); // not "short": expired
    assert!(err(&mut c, &["SCAN", "x"]).contains("invalid cursor"));
    assert!(err(&mut c, &["SCAN", "0", "COUNT", "0"]).contains("syntax"));
    assert!(err(&mut c, &["SCAN", "0", "MATCH"]).contains("syntax"));
}

#[test]
fn hashes() {
    let f = start(Config::default());
    let mut c = f.con();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "10", "c", "3", "c", "4"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["HMSET", "h", "d", "5"]), "OK");
    assert!(err(&mut c, &["HSET", "h", "a"]).contains("wrong number"));
    assert!(err(&mut c, &["HSET", "h", "a", "1", "b"]).contains("wrong number"));
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "10");
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "c"]), "4");
    nil(&mut c, &["HGET", "h", "zz"]);
    nil(&mut c, &["HGET", "nope", "a"]);
    let m: Vec<Option<String>> = q(&mut c, &["HMGET", "h", "a", "zz", "b"]);
    assert_eq!(m, vec![Some("10".into()), None, Some("2".into())]);
    let all: Vec<(String, String)> = q(&mut c, &["HGETALL", "h"]);
    assert_eq!(
        all,
        vec![
            ("a".into(), "10".into()),
            ("b".into(), "2".into()),
            ("c".into(), "4".into()),
            ("d".into(), "5".into())
        ]
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 4);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "q"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a", "a", "q"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b", "c", "d"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 0);
    // A hash key that is a prefix of another does not see its fields.
    q::<()>(&mut c, &["HSET", "x", "f", "1"]);
    q::<()>(&mut c, &["HSET", "xy", "g", "2"]);
    let all: Vec<String> = q(&mut c, &["HGETALL", "x"]);
    assert_eq!(all, vec!["f".to_string(), "1".to_string()]);
    q::<()>(&mut c, &["SET", "s", "v"]);
    assert!(err(&mut c, &["HSET", "s", "f", "v"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["HGET", "s", "f"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["HGETALL", "s"]).contains("WRONGTYPE"));
    assert_eq!(q::<String>(&mut c, &["TYPE", "x"]), "hash");
}

#[test]
fn sorted_sets() {
    let f = start(Config::default());
    let mut c = f.con();
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]),
        3
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "z", "-1.5", "neg", "+inf", "top", "-inf", "bottom"]
        ),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "10", "a"]), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "CH", "1", "a", "4", "d"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "NX", "100", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "XX", "100", "new"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "0", "a"]), 0);
    assert_eq!(q::<String>(&mut c, &["ZADD", "z", "INCR", "2", "a"]), "3");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "3");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "neg"]), "-1.5");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "top"]), "inf");
    nil(&mut c, &["ZSCORE", "z", "nobody"]);
    assert!(err(&mut c, &["ZADD", "z", "x", "a"]).contains("not a valid float"));
    assert!(err(&mut c, &["ZADD", "z", "nan", "a"]).contains("not a valid float"));
    assert!(err(&mut c, &["ZADD", "z", "1"]).contains("wrong number"));
    assert!(err(&mut c, &["ZADD", "z", "1", "a", "2"]).contains("syntax"));
    assert!(err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]).contains("not compatible"));
    assert!(err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]).contains("single"));
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 7);
    let all: Vec<String> = q(&mut c, &["ZRANGE", "z", "0", "-1"]);
    assert_eq!(all, ["bottom", "neg", "b", "a", "c", "d", "top"]);
    let ws: Vec<(String, String)> = q(&mut c, &["ZRANGE", "z", "1", "2", "WITHSCORES"]);
    assert_eq!(
        ws,
        vec![("neg".into(), "-1.5".into()), ("b".into(), "2".into())]
    );
    let last: Vec<String> = q(&mut c, &["ZRANGE", "z", "-2", "-1"]);
    assert_eq!(last, ["d", "top"]);
    let rev: Vec<String> = q(&mut c, &["ZRANGE", "z", "0", "1", "REV"]);
    assert_eq!(rev, ["top", "d"]);
    let none: Vec<String> = q(&mut c, &["ZRANGE", "z", "5", "2"]);
    assert!(none.is_empty());
    let by: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", "z", "2", "3"]);
    assert_eq!(by, ["b", "a", "c"]);
    let by: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", "z", "(2", "(4"]);
    assert_eq!(by, ["a", "c"]);
    let by: Vec<String> = q(
        &mut c,
        &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "2", "3"],
    );
    assert_eq!(by, ["b", "a", "c"]);
    let by: Vec<(String, String)> = q(
        &mut c,
        &[
            "ZRANGEBYSCORE",
            "z",
            "0",
            "3",
            "WITHSCORES",
            "LIMIT",
            "1",
            "-1",
        ],
    );
    assert_eq!(by, vec![("a".into(), "3".into()), ("c".into(), "3".into())]);
    let by: Vec<String> = q(&mut c, &["ZRANGE", "z", "(3", "0", "BYSCORE", "REV"]);
    assert_eq!(by, ["b"]);
    assert!(err(&mut c, &["ZRANGEBYSCORE", "z", "x", "1"]).contains("not a float"));
    assert!(err(&mut c, &["ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "1"]).contains("syntax"));
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "a", "nobody"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 6);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(-inf", "2"]),
        2
    );
    let all: Vec<String> = q(&mut c, &["ZRANGE", "z", "0", "-1"]);
    assert_eq!(all, ["bottom", "c", "d", "top"]);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]),
        4
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    q::<()>(&mut c, &["SET", "s", "v"]);
    assert!(err(&mut c, &["ZADD", "s", "1", "a"]).contains("WRONGTYPE"));
    assert!(err(&mut c, &["ZRANGE", "s", "0", "1"]).contains("WRONGTYPE"));
    q::<()>(&mut c, &["ZADD", "z2", "1", "m"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "z2"]), "zset");
}

#[test]
fn pipelining_and_concurrent_incr() {
    let f = start(Config::default());
    let mut c = f.con();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("p{i}")).arg(i).ignore();
    }
    p.cmd("GET").arg("p999");
    let (v,): (String,) = p.query(&mut c).expect("pipeline");
    assert_eq!(v, "999");
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let url = f.url();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url)
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                for _ in 0..250 {
                    let _: i64 = redis::cmd("INCR").arg("ctr").query(&mut c).expect("incr");
                    let _: i64 = redis::cmd("HSET")
                        .arg("hc")
                        .arg("f")
                        .arg("v")
                        .query(&mut c)
                        .expect("hset");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(q::<i64>(&mut c, &["GET", "ctr"]), 2000);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "hc"]), 1);
}

/// Raw bytes in, raw reply out.
fn raw(addr: std::net::SocketAddr, send: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(send).expect("write");
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn bad_input_gets_errors_and_others_keep_going() {
    let f = start(Config {
        max_bulk_len: 1024,
        ..Config::default()
    });
    let mut good = f.con();
    q::<()>(&mut good, &["SET", "k", "v"]);
    // Inline commands.
    assert_eq!(
        raw(f.addr(), b"PING\r\nECHO \"a b\"\r\n"),
        b"+PONG\r\n$3\r\na b\r\n"
    );
    // Malformed RESP: an error reply, then the connection is closed.
    let r = raw(f.addr(), b"*1\r\n:12\r\n");
    assert!(
        r.starts_with(b"-ERR Protocol error"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    let r = raw(f.addr(), b"*abc\r\n");
    assert!(r.starts_with(b"-ERR Protocol error: invalid multibulk length"));
    // A huge multibulk count is refused before anything is allocated.
    let r = raw(f.addr(), b"*99999999999\r\n");
    assert!(r.starts_with(b"-ERR Protocol error: invalid multibulk length"));
    // An oversized bulk string.
    let r = raw(f.addr(), b"*2\r\n$3\r\nGET\r\n$1025\r\n");
    assert!(r.starts_with(b"-ERR Protocol error: invalid bulk length"));
    // Replies to good commands before the bad one are still sent.
    let r = raw(f.addr(), b"PING\r\n*1\r\n$-5\r\n");
    assert!(r.starts_with(b"+PONG\r\n-ERR Protocol error"));
    // A too-long inline line.
    let r = raw(f.addr(), &vec![b'a'; 70_000]);
    assert!(r.starts_with(b"-ERR Protocol error: too big inline request"));
    // A client that sends half a request and goes away.
    {
        let mut s = std::net::TcpStream::connect(f.addr()).expect("connect");
        s.write_all(b"*2\r\n$3\r\nGET\r\n$100\r\nabc")
            .expect("write");
    }
    // A client that never reads its replies does not block the others.
    let mut slow = std::net::TcpStream::connect(f.addr()).expect("connect");
    let mut burst = Vec::new();
    for _ in 0..20_000 {
        burst.extend_from_slice(b"GET k\r\n");
    }
    slow.set_nonblocking(true).expect("nonblocking");
    let _ = slow.write(&burst);
    assert_eq!(q::<String>(&mut good, &["GET", "k"]), "v");
    let mut another = f.con();
    assert_eq!(q::<String>(&mut another, &["PING"]), "PONG");
    drop(slow);
}

#[test]
fn many_connections() {
    let f = start(Config::default());
    let mut cons: Vec<Connection> = (0..200).map(|_| f.con()).collect();
    for (i, c) in cons.iter_mut().enumerate() {
        q::<()>(c, &["SET", &format!("c{i}"), "v"]);
    }
    let mut c = f.con();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 200);
}

#[test]
fn data_survives_shutdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn KvStore> {
        Arc::from(strata::open(dir.path(), options()).expect("open"))
    };
    let cfg = Config {
        port: 0,
        ..Config::default()
    };
    let server = spawn(open(), cfg.clone()).expect("start");
    let mut c = redis::Client::open(format!("redis://{}/", server.addr()))
        .expect("client")
        .get_connection()
        .expect("connect");
    q::<()>(&mut c, &["SET", "durable", "yes"]);
    q::<()>(&mut c, &["ZADD", "zz", "1.25", "m"]);
    server.stop().expect("graceful shutdown closes the store");
    let server = spawn(open(), cfg).expect("restart");
    let mut c = redis::Client::open(format!("redis://{}/", server.addr()))
        .expect("client")
        .get_connection()
        .expect("connect");
    assert_eq!(q::<String>(&mut c, &["GET", "durable"]), "yes");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "zz", "m"]), "1.25");
    drop(c);
    server.stop().expect("stop");
}

/// DEL of a hash or sorted set with thousands of records: with range
/// deletion (the LSM) it writes a few entries whatever their number; KVell
/// deletes each record. Either way nothing of it is left, and a new
/// container under the same key starts empty.
#[test]
fn del_of_a_large_container_is_one_range_deletion_where_the_engine_has_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = strata::open(dir.path(), options()).expect("open");
    let store: Arc<dyn KvStore> = Arc::from(db);
    let server = spawn(
        store.clone(),
        Config {
            port: 0,
            ..Config::default()
        },
    )
    .expect("server starts");
    let mut c = redis::Client::open(format!("redis://{}/", server.addr()))
        .expect("client")
        .get_connection()
        .expect("connect");
    const N: usize = 3000;
    for (kind, add) in [("hash", "HSET"), ("zset", "ZADD")] {
        let key = format!("big-{kind}");
        let mut cmd = redis::cmd(add);
        cmd.arg(&key);
        for i in 0..N {
            if kind == "hash" {
                cmd.arg(format!("f{i}")).arg(i);
            } else {
                cmd.arg(i).arg(format!("m{i}"));
            }
        }
        let added: i64 = cmd.query(&mut c).expect("fill");
        assert_eq!(added, N as i64);
        let before = store.stats().user_writes;
        assert_eq!(q::<i64>(&mut c, &["DEL", &key]), 1);
        let written = store.stats().user_writes - before;
        if store.semantics().range_deletes {
            assert!(written <= 4, "{kind}: DEL wrote {written} entries");
        } else {
            assert!(written > N as u64, "{kind}: DEL wrote {written} entries");
        }
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0);
        if kind == "hash" {
            q::<()>(&mut c, &["HSET", &key, "new", "1"]);
            let all: Vec<String> = q(&mut c, &["HGETALL", &key]);
            assert_eq!(all, vec!["new".to_string(), "1".to_string()]);
        } else {
            q::<()>(&mut c, &["ZADD", &key, "1", "new"]);
            assert_eq!(q::<i64>(&mut c, &["ZCARD", &key]), 1);
            let all: Vec<String> = q(&mut c, &["ZRANGE", &key, "0", "-1"]);
            assert_eq!(all, vec!["new".to_string()]);
        }
    }
    server.stop().expect("stop");
}

/// The options of this module's engine.
fn options() -> Options {
    let mut o = Options::default();
    o.apply(ENGINE).expect("engine option");
    o
}
