//! The commands: Redis types mapped onto a `KvStore` (see `keys`), with a
//! striped lock per key so that read-modify-write commands are atomic.

use crate::keys::{self, Kind, Meta};
use crate::resp::Reply;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use strata::{KvStore, WriteBatch, WriteOptions};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const STRIPES: usize = 4096;
const MAX_CURSORS: usize = 65536;

/// A command's outcome; `Err` is an error reply, so `?` works on engine
/// errors too.
type Out = Result<Reply, Reply>;
/// Key-value pairs from a scan.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

impl From<strata::Error> for Reply {
    fn from(e: strata::Error) -> Reply {
        Reply::Error(format!("ERR {e}"))
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn int(b: &[u8]) -> Result<i64, Reply> {
    // Redis accepts no blanks or '+' and at most 20 characters.
    if b.is_empty() || b.len() > 20 || b[0] == b'+' {
        return Err(Reply::err(NOT_INT));
    }
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Reply::err(NOT_INT))
}

fn float(b: &[u8]) -> Result<f64, Reply> {
    let s = std::str::from_utf8(b).map_err(|_| Reply::err(NOT_FLOAT))?;
    let f = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        t if t.is_empty() || t.contains("nan") || t.starts_with(char::is_whitespace) => {
            return Err(Reply::err(NOT_FLOAT))
        }
        t => t.parse::<f64>().map_err(|_| Reply::err(NOT_FLOAT))?,
    };
    Ok(f)
}

fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

fn wrong_args(name: &str) -> Reply {
    Reply::Error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

/// Per-connection state.
#[derive(Debug, Default)]
pub struct Session {
    pub authenticated: bool,
    pub quit: bool,
}

/// The server's data: the engine plus the locks and cursors around it.
pub struct Data {
    store: Arc<dyn KvStore>,
    /// The engine applies a batch all or nothing (`Semantics`); without
    /// it (KVell) a crash or a write error can leave part of a command, so
    /// a container created afresh first deletes records left under its key.
    atomic: bool,
    stripes: Vec<Mutex<()>>,
    hasher: std::collections::hash_map::RandomState,
    cursors: Mutex<BTreeMap<u64, Vec<u8>>>,
    next_cursor: AtomicU64,
    pub requirepass: Option<String>,
    started: Instant,
    pub port: u16,
    pub commands: AtomicU64,
    pub connections: AtomicU64,
    pub connected: AtomicU64,
}

/// A score range bound.
#[derive(Debug, Clone, Copy)]
struct ScoreBound {
    v: f64,
    exclusive: bool,
}

fn score_bound(b: &[u8]) -> Result<ScoreBound, Reply> {
    let (ex, rest) = match b.first() {
        Some(b'(') => (true, &b[1..]),
        _ => (false, b),
    };
    let v = float(rest).map_err(|_| Reply::err("ERR min or max is not a float"))?;
    Ok(ScoreBound { v, exclusive: ex })
}

impl Data {
    pub fn new(store: Arc<dyn KvStore>, requirepass: Option<String>, port: u16) -> Data {
        Data {
            atomic: store.semantics().atomic_batches,
            store,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: Default::default(),
            cursors: Mutex::new(BTreeMap::new()),
            next_cursor: AtomicU64::new(1),
            requirepass,
            started: Instant::now(),
            port,
            commands: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            connected: AtomicU64::new(0),
        }
    }

    pub fn store(&self) -> &Arc<dyn KvStore> {
        &self.store
    }

    fn lock(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        let i = (self.hasher.hash_one(key) as usize) % STRIPES;
        // A poisoned stripe only means a panic elsewhere; the data is fine.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks several keys' stripes in a fixed order (no deadlock).
    fn lock_many(&self, keys: &[&[u8]]) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = keys
            .iter()
            .map(|k| (self.hasher.hash_one(k) as usize) % STRIPES)
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| self.stripes[i].lock().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }

    /// The metadata record of `key`, expired or not.
    fn meta_raw(&self, key: &[u8]) -> Result<Option<Meta>, Reply> {
        Ok(self
            .store
            .get(&keys::meta_key(key))?
            .and_then(|v| Meta::decode(&v)))
    }

    /// The metadata of a live (not expired) key.
    fn meta(&self, key: &[u8]) -> Result<Option<Meta>, Reply> {
        let now = now_ms();
        Ok(self.meta_raw(key)?.filter(|m| !m.expired(now)))
    }

    fn meta_of(&self, key: &[u8], kind: Kind) -> Result<Option<Meta>, Reply> {
        match self.meta(key)? {
            Some(m) if m.kind != kind => Err(Reply::err(WRONGTYPE)),
            m => Ok(m),
        }
    }

    fn write(&self, b: WriteBatch) -> Result<(), Reply> {
        self.store.write(b, &WriteOptions::default())?;
        Ok(())
    }

    /// Entries with keys in [lo, hi), ascending or descending, at most `limit`.
    fn range(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Entries, Reply> {
        let end = hi.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(self.store.scan(Bound::Included(lo), end, limit, reverse)?)
    }

    fn prefix(&self, p: &[u8], limit: usize, reverse: bool) -> Result<Entries, Reply> {
        let end = keys::prefix_end(p);
        self.range(p, end.as_deref(), limit, reverse)
    }

    /// Adds to `b` the deletion of every record of `key` (described by
    /// `old`); the metadata record too unless `keep_meta`.
    fn purge(
        &self,
        b: &mut WriteBatch,
        key: &[u8],
        old: &Meta,
        keep_meta: bool,
    ) -> Result<(), Reply> {
        if !keep_meta {
            b.delete(keys::meta_key(key));
        }
        if old.expire_at != 0 {
            b.delete(keys::expiry_key(old.expire_at, key));
        }
        let tags: &[u8] = match old.kind {
            Kind::String => &[],
            Kind::Hash => &[keys::HASH],
            Kind::ZSet => &[keys::ZMEMBER, keys::ZSCORE],
        };
        for &t in tags {
            for (k, _) in self.prefix(&keys::sub_prefix(t, key), usize::MAX, false)? {
                b.delete(k);
            }
        }
        Ok(())
    }

    /// Deletes `key` if it exists; true if it was live.
    fn delete_key(&self, key: &[u8]) -> Result<bool, Reply> {
        let _g = self.lock(key);
        let Some(old) = self.meta_raw(key)? else {
            return Ok(false);
        };
        let mut b = WriteBatch::new();
        self.purge(&mut b, key, &old, false)?;
        self.write(b)?;
        Ok(!old.expired(now_ms()))
    }

    /// Removes keys whose expiry has passed (called periodically); returns
    /// how many it removed. Expired keys are already invisible to reads;
    /// this deletes their records so that compaction drops them.
    pub fn sweep_expired(&self, max: usize) -> Result<usize, Reply> {
        let now = now_ms();
        let lo = [keys::EXPIRY];
        let hi = keys::expiry_key(now + 1, b"");
        let due = self.range(&lo, Some(&hi), max, false)?;
        let mut removed = 0;
        for (ek, _) in due {
            let key = &ek[9..];
            let _g = self.lock(key);
            let mut b = WriteBatch::new();
            match self.meta_raw(key)? {
                Some(m) if m.expired(now) => {
                    self.purge(&mut b, key, &m, false)?;
                    removed += 1;
                }
                _ => {}
            }
            b.delete(&ek);
            self.write(b)?;
        }
        Ok(removed)
    }

    /// Runs one command.
    pub fn exec(&self, s: &mut Session, a: &[Vec<u8>]) -> Reply {
        self.commands.fetch_add(1, Ordering::Relaxed);
        let name = upper(&a[0]);
        if !s.authenticated && !matches!(name.as_str(), "AUTH" | "HELLO" | "QUIT") {
            return Reply::err("NOAUTH Authentication required.");
        }
        let Some(&(_, arity)) = COMMANDS.iter().find(|(n, _)| *n == name) else {
            let mut msg = format!(
                "ERR unknown command '{}', with args beginning with: ",
                String::from_utf8_lossy(&a[0])
            );
            for arg in a.iter().skip(1).take(8) {
                msg.push_str(&format!("'{}' ", String::from_utf8_lossy(arg)));
            }
            return Reply::Error(msg);
        };
        let n = a.len() as i32;
        if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
            return wrong_args(&name);
        }
        match self.dispatch(s, &name, a) {
            Ok(r) | Err(r) => r,
        }
    }

    fn dispatch(&self, s: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
        match name {
            "PING" => match a.len() {
                1 => Ok(Reply::Simple("PONG")),
                2 => Ok(Reply::bulk(a[1].clone())),
                _ => Err(wrong_args(name)),
            },
            "ECHO" => Ok(Reply::bulk(a[1].clone())),
            "QUIT" => {
                s.quit = true;
                Ok(Reply::ok())
            }
            "AUTH" => self.auth(s, &a[1..]),
            "HELLO" => self.hello(s, a),
            "SELECT" => match int(&a[1]) {
                Ok(0) => Ok(Reply::ok()),
                Ok(_) => Err(Reply::err("ERR DB index is out of range")),
                Err(e) => Err(e),
            },
            "COMMAND" => self.command(a),
            "CONFIG" => self.config(a),
            "INFO" => self.info(),
            "DBSIZE" => Ok(Reply::Int(self.dbsize()? as i64)),
            "FLUSHDB" | "FLUSHALL" => self.flushdb(a),
            "GET" => match self.meta_of(&a[1], Kind::String)? {
                Some(m) => Ok(Reply::Bulk(m.payload)),
                None => Ok(Reply::Nil),
            },
            "SET" => self.set(a),
            "SETNX" => {
                let r = self.set(&[a[0].clone(), a[1].clone(), a[2].clone(), b"NX".to_vec()])?;
                Ok(Reply::Int(i64::from(r == Reply::ok())))
            }
            "GETSET" => self.set(&[a[0].clone(), a[1].clone(), a[2].clone(), b"GET".to_vec()]),
            "MGET" => {
                let mut out = Vec::with_capacity(a.len() - 1);
                for k in &a[1..] {
                    out.push(match self.meta(k)? {
                        Some(m) if m.kind == Kind::String => Reply::Bulk(m.payload),
                        _ => Reply::Nil,
                    });
                }
                Ok(Reply::Array(out))
            }
            "MSET" => self.mset(a),
            "DEL" | "UNLINK" => {
                let mut n = 0;
                for k in &a[1..] {
                    n += i64::from(self.delete_key(k)?);
                }
                Ok(Reply::Int(n))
            }
            "EXISTS" => {
                let mut n = 0;
                for k in &a[1..] {
                    n += i64::from(self.meta(k)?.is_some());
                }
                Ok(Reply::Int(n))
            }
            "TYPE" => Ok(Reply::Status(
                self.meta(&a[1])?
                    .map_or("none", |m| m.kind.name())
                    .to_string(),
            )),
            "INCR" => self.incr(&a[1], 1),
            "DECR" => self.incr(&a[1], -1),
            "INCRBY" => self.incr(&a[1], int(&a[2])?),
            "DECRBY" => {
                let d = int(&a[2])?;
                let d = d
                    .checked_neg()
                    .ok_or_else(|| Reply::err("ERR decrement would overflow"))?;
                self.incr(&a[1], d)
            }
            "APPEND" => self.append(&a[1], &a[2]),
            "STRLEN" => Ok(Reply::Int(
                self.meta_of(&a[1], Kind::String)?
                    .map_or(0, |m| m.payload.len() as i64),
            )),
            "EXPIRE" | "PEXPIRE" => self.expire(name, a),
            "TTL" | "PTTL" => {
                let Some(m) = self.meta(&a[1])? else {
                    return Ok(Reply::Int(-2));
                };
                if m.expire_at == 0 {
                    return Ok(Reply::Int(-1));
                }
                let ms = m.expire_at.saturating_sub(now_ms()) as i64;
                Ok(Reply::Int(if name == "TTL" {
                    (ms + 500) / 1000
                } else {
                    ms
                }))
            }
            "PERSIST" => {
                let key = &a[1];
                let _g = self.lock(key);
                match self.meta(key)? {
                    Some(mut m) if m.expire_at != 0 => {
                        let mut b = WriteBatch::new();
                        b.delete(keys::expiry_key(m.expire_at, key));
                        m.expire_at = 0;
                        b.put(keys::meta_key(key), m.encode());
                        self.write(b)?;
                        Ok(Reply::Int(1))
                    }
                    _ => Ok(Reply::Int(0)),
                }
            }
            "SCAN" => self.scan(a),
            "HSET" | "HMSET" => self.hset(name, a),
            "HGET" => {
                if self.meta_of(&a[1], Kind::Hash)?.is_none() {
                    return Ok(Reply::Nil);
                }
                Ok(Reply::opt(self.store.get(&keys::sub_key(
                    keys::HASH,
                    &a[1],
                    &a[2],
                ))?))
            }
            "HMGET" => {
                let live = self.meta_of(&a[1], Kind::Hash)?.is_some();
                let mut out = Vec::with_capacity(a.len() - 2);
                for f in &a[2..] {
                    out.push(if live {
                        Reply::opt(self.store.get(&keys::sub_key(keys::HASH, &a[1], f))?)
                    } else {
                        Reply::Nil
                    });
                }
                Ok(Reply::Array(out))
            }
            "HGETALL" => {
                if self.meta_of(&a[1], Kind::Hash)?.is_none() {
                    return Ok(Reply::Array(vec![]));
                }
                let p = keys::sub_prefix(keys::HASH, &a[1]);
                let mut out = Vec::new();
                for (k, v) in self.prefix(&p, usize::MAX, false)? {
                    out.push(Reply::Bulk(k[p.len()..].to_vec()));
                    out.push(Reply::Bulk(v));
                }
                Ok(Reply::Array(out))
            }
            "HDEL" => self.hdel(a),
            "HLEN" => Ok(Reply::Int(
                self.meta_of(&a[1], Kind::Hash)?
                    .map_or(0, |m| m.count() as i64),
            )),
            "HEXISTS" => {
                if self.meta_of(&a[1], Kind::Hash)?.is_none() {
                    return Ok(Reply::Int(0));
                }
                let k = keys::sub_key(keys::HASH, &a[1], &a[2]);
                Ok(Reply::Int(i64::from(self.store.get(&k)?.is_some())))
            }
            "ZADD" => self.zadd(a),
            "ZREM" => self.zrem(a),
            "ZSCORE" => {
                if self.meta_of(&a[1], Kind::ZSet)?.is_none() {
                    return Ok(Reply::Nil);
                }
                let v = self
                    .store
                    .get(&keys::sub_key(keys::ZMEMBER, &a[1], &a[2]))?;
                Ok(match v.and_then(|v| keys::decode_score(&v)) {
                    Some(f) => Reply::bulk(keys::format_score(f)),
                    None => Reply::Nil,
                })
            }
            "ZCARD" => Ok(Reply::Int(
                self.meta_of(&a[1], Kind::ZSet)?
                    .map_or(0, |m| m.count() as i64),
            )),
            "ZRANGE" => self.zrange(a),
            "ZRANGEBYSCORE" => {
                let opts = parse_range_opts(&a[4..], true)?;
                let (min, max) = (score_bound(&a[2])?, score_bound(&a[3])?);
                self.zrange_by_score(&a[1], min, max, false, opts)
            }
            "ZREMRANGEBYSCORE" => self.zremrangebyscore(a),
            _ => Err(Reply::err("ERR unknown command")),
        }
    }

    fn auth(&self, s: &mut Session, a: &[Vec<u8>]) -> Out {
        let pass = match a {
            [p] => p,
            [user, p] if user.as_slice() == b"default" => p,
            [_, _] => {
                return Err(Reply::err(
                    "WRONGPASS invalid username-password pair or user is disabled.",
                ))
            }
            _ => return Err(Reply::err(SYNTAX)),
        };
        match &self.requirepass {
            None => Err(Reply::err(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            )),
            Some(p) if p.as_bytes() == pass.as_slice() => {
                s.authenticated = true;
                Ok(Reply::ok())
            }
            Some(_) => Err(Reply::err(
                "WRONGPASS invalid username-password pair or user is disabled.",
            )),
        }
    }

    fn hello(&self, s: &mut Session, a: &[Vec<u8>]) -> Out {
        let mut i = 1;
        if a.len() > 1 {
            match int(&a[1]) {
                Ok(2) => {}
                Ok(_) => return Err(Reply::err("NOPROTO unsupported protocol version")),
                Err(_) => {
                    return Err(Reply::err(
                        "ERR Protocol version is not an integer or out of range",
                    ))
                }
            }
            i = 2;
        }
        while i < a.len() {
            match upper(&a[i]).as_str() {
                "AUTH" if i + 2 < a.len() => {
                    self.auth(s, &a[i + 1..i + 3])?;
                    i += 3;
                }
                "SETNAME" if i + 1 < a.len() => i += 2,
                _ => return Err(Reply::err(SYNTAX)),
            }
        }
        if !s.authenticated {
            return Err(Reply::err(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            ));
        }
        let kv = |k: &str, v: Reply| [Reply::bulk(k), v];
        let mut out = Vec::new();
        out.extend(kv("server", Reply::bulk("redis")));
        out.extend(kv("version", Reply::bulk(crate::REDIS_VERSION)));
        out.extend(kv("proto", Reply::Int(2)));
        out.extend(kv(
            "id",
            Reply::Int(self.connections.load(Ordering::Relaxed) as i64),
        ));
        out.extend(kv("mode", Reply::bulk("standalone")));
        out.extend(kv("role", Reply::bulk("master")));
        out.extend(kv("modules", Reply::Array(vec![])));
        Ok(Reply::Array(out))
    }

    fn command(&self, a: &[Vec<u8>]) -> Out {
        let sub = a.get(1).map(|s| upper(s)).unwrap_or_default();
        match sub.as_str() {
            "COUNT" => Ok(Reply::Int(COMMANDS.len() as i64)),
            // redis-cli asks for the docs for its hints; none is fine.
            "DOCS" => Ok(Reply::Array(vec![])),
            "" | "INFO" => {
                let names: Vec<String> = if a.len() > 2 {
                    a[2..].iter().map(|n| upper(n)).collect()
                } else {
                    COMMANDS.iter().map(|(n, _)| n.to_string()).collect()
                };
                Ok(Reply::Array(
                    names
                        .iter()
                        .map(|n| match COMMANDS.iter().find(|(c, _)| c == n) {
                            Some((c, arity)) => Reply::Array(vec![
                                Reply::bulk(c.to_ascii_lowercase()),
                                Reply::Int(i64::from(*arity)),
                                Reply::Array(vec![]),
                                Reply::Int(i64::from(!ADMIN.contains(c))),
                                Reply::Int(-1),
                                Reply::Int(1),
                            ]),
                            None => Reply::Nil,
                        })
                        .collect(),
                ))
            }
            _ => Err(Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&a[1])
            ))),
        }
    }

    fn config(&self, a: &[Vec<u8>]) -> Out {
        match a.get(1).map(|s| upper(s)).as_deref() {
            Some("GET") if a.len() >= 3 => {
                let known: [(&str, String); 6] = [
                    ("port", self.port.to_string()),
                    ("databases", "1".into()),
                    ("save", String::new()),
                    ("appendonly", "no".into()),
                    ("maxmemory", "0".into()),
                    ("proto-max-bulk-len", crate::DEFAULT_MAX_BULK.to_string()),
                ];
                let mut out = Vec::new();
                for (k, v) in &known {
                    if a[2..]
                        .iter()
                        .any(|p| keys::glob_match(&p.to_ascii_lowercase(), k.as_bytes()))
                    {
                        out.push(Reply::bulk(*k));
                        out.push(Reply::bulk(v.clone()));
                    }
                }
                Ok(Reply::Array(out))
            }
            Some("SET") | Some("RESETSTAT") | Some("REWRITE") => Ok(Reply::ok()),
            _ => Err(Reply::err(SYNTAX)),
        }
    }

    fn info(&self) -> Out {
        let (mut keys_n, mut expires) = (0u64, 0u64);
        self.each_meta(|_, m| {
            keys_n += 1;
            expires += u64::from(m.expire_at != 0);
        })?;
        let stats = self.store.stats();
        let mut s = String::new();
        s.push_str("# Server\r\n");
        s.push_str(&format!("redis_version:{}\r\n", crate::REDIS_VERSION));
        s.push_str(&format!("strata_version:{}\r\n", env!("CARGO_PKG_VERSION")));
        s.push_str("redis_mode:standalone\r\n");
        s.push_str(&format!("process_id:{}\r\n", std::process::id()));
        s.push_str(&format!("tcp_port:{}\r\n", self.port));
        s.push_str(&format!(
            "uptime_in_seconds:{}\r\n",
            self.started.elapsed().as_secs()
        ));
        s.push_str(&format!("engine:{}\r\n", self.store.name()));
        s.push_str("\r\n# Clients\r\n");
        s.push_str(&format!(
            "connected_clients:{}\r\n",
            self.connected.load(Ordering::Relaxed)
        ));
        s.push_str("\r\n# Stats\r\n");
        s.push_str(&format!(
            "total_connections_received:{}\r\n",
            self.connections.load(Ordering::Relaxed)
        ));
        s.push_str(&format!(
            "total_commands_processed:{}\r\n",
            self.commands.load(Ordering::Relaxed)
        ));
        s.push_str("\r\n# Keyspace\r\n");
        if keys_n > 0 {
            s.push_str(&format!(
                "db0:keys={keys_n},expires={expires},avg_ttl=0\r\n"
            ));
        }
        s.push_str("\r\n# Strata\r\n");
        s.push_str(&format!(
            "strata_stats:{}\r\n",
            stats.to_json().replace(['\r', '\n'], " ")
        ));
        Ok(Reply::Bulk(s.into_bytes()))
    }

    /// Calls `f` on every live key's metadata, in key order, page by page.
    fn each_meta(&self, mut f: impl FnMut(&[u8], &Meta)) -> Result<(), Reply> {
        let now = now_ms();
        let end = keys::prefix_end(&[keys::META]);
        let mut from = vec![keys::META];
        let mut first = true;
        loop {
            let lo = if first {
                Bound::Included(from.as_slice())
            } else {
                Bound::Excluded(from.as_slice())
            };
            let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.store.scan(lo, hi, 1024, false)?;
            for (k, v) in &page {
                if let Some(m) = Meta::decode(v) {
                    if !m.expired(now) {
                        f(&k[1..], &m);
                    }
                }
            }
            match page.last() {
                Some((k, _)) if page.len() == 1024 => {
                    from = k.clone();
                    first = false;
                }
                _ => return Ok(()),
            }
        }
    }

    fn dbsize(&self) -> Result<u64, Reply> {
        let mut n = 0;
        self.each_meta(|_, _| n += 1)?;
        Ok(n)
    }

    fn flushdb(&self, a: &[Vec<u8>]) -> Out {
        if a.len() > 2
            || a.get(1)
                .is_some_and(|m| !matches!(upper(m).as_str(), "ASYNC" | "SYNC"))
        {
            return Err(Reply::err(SYNTAX));
        }
        loop {
            let page = self
                .store
                .scan(Bound::Unbounded, Bound::Unbounded, 4096, false)?;
            if page.is_empty() {
                break;
            }
            let mut b = WriteBatch::new();
            for (k, _) in page {
                b.delete(k);
            }
            self.write(b)?;
        }
        self.cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(Reply::ok())
    }

    fn set(&self, a: &[Vec<u8>]) -> Out {
        let (key, val) = (&a[1], &a[2]);
        let (mut nx, mut xx, mut get, mut keep) = (false, false, false, false);
        let mut when: Option<u64> = None;
        let now = now_ms();
        let mut i = 3;
        while i < a.len() {
            let o = upper(&a[i]);
            match o.as_str() {
                "NX" if !xx => nx = true,
                "XX" if !nx => xx = true,
                "GET" => get = true,
                "KEEPTTL" if when.is_none() => keep = true,
                "EX" | "PX" | "EXAT" | "PXAT" if when.is_none() && !keep && i + 1 < a.len() => {
                    i += 1;
                    let n = int(&a[i])?;
                    let bad = || Reply::err("ERR invalid expire time in 'set' command");
                    if n <= 0 {
                        return Err(bad());
                    }
                    let n = n as u64;
                    let at = match o.as_str() {
                        "EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
                        "PX" => n.checked_add(now),
                        "EXAT" => n.checked_mul(1000),
                        _ => Some(n),
                    };
                    when = Some(at.filter(|t| *t < i64::MAX as u64).ok_or_else(bad)?);
                }
                _ => return Err(Reply::err(SYNTAX)),
            }
            i += 1;
        }
        let _g = self.lock(key);
        let old = self.meta_raw(key)?;
        let live = old.as_ref().filter(|m| !m.expired(now));
        let old_value = match live {
            Some(m) if get && m.kind != Kind::String => return Err(Reply::err(WRONGTYPE)),
            Some(m) if m.kind == Kind::String => Some(m.payload.clone()),
            _ => None,
        };
        let reply = if get {
            Reply::opt(old_value)
        } else {
            Reply::ok()
        };
        if (nx && live.is_some()) || (xx && live.is_none()) {
            return Ok(if get { reply } else { Reply::Nil });
        }
        let expire_at = match (when, keep) {
            (Some(t), _) => t,
            (None, true) => live.map_or(0, |m| m.expire_at),
            _ => 0,
        };
        let mut b = WriteBatch::new();
        if let Some(o) = &old {
            self.purge(&mut b, key, o, true)?;
        }
        b.put(
            keys::meta_key(key),
            Meta::string(val.clone(), expire_at).encode(),
        );
        if expire_at != 0 {
            b.put(keys::expiry_key(expire_at, key), b"");
        }
        self.write(b)?;
        Ok(reply)
    }

    fn mset(&self, a: &[Vec<u8>]) -> Out {
        if a.len().is_multiple_of(2) {
            return Err(wrong_args("mset"));
        }
        let ks: Vec<&[u8]> = a[1..].chunks(2).map(|p| p[0].as_slice()).collect();
        let _g = self.lock_many(&ks);
        let mut b = WriteBatch::new();
        let mut seen = std::collections::HashSet::new();
        for p in a[1..].chunks(2) {
            if seen.insert(p[0].as_slice()) {
                if let Some(o) = self.meta_raw(&p[0])? {
                    self.purge(&mut b, &p[0], &o, true)?;
                }
            }
            b.put(
                keys::meta_key(&p[0]),
                Meta::string(p[1].clone(), 0).encode(),
            );
        }
        self.write(b)?;
        Ok(Reply::ok())
    }

    /// Replaces a string's value, keeping its expiry.
    fn put_string(
        &self,
        key: &[u8],
        old: Option<&Meta>,
        live: bool,
        v: Vec<u8>,
    ) -> Result<(), Reply> {
        let mut b = WriteBatch::new();
        let mut expire_at = 0;
        if let Some(o) = old {
            if live {
                expire_at = o.expire_at;
            } else {
                self.purge(&mut b, key, o, true)?;
            }
        }
        b.put(keys::meta_key(key), Meta::string(v, expire_at).encode());
        self.write(b)
    }

    fn incr(&self, key: &[u8], by: i64) -> Out {
        let _g = self.lock(key);
        let old = self.meta_raw(key)?;
        let live = old.as_ref().is_some_and(|m| !m.expired(now_ms()));
        let cur = match &old {
            Some(m) if live && m.kind != Kind::String => return Err(Reply::err(WRONGTYPE)),
            Some(m) if live => int(&m.payload)?,
            _ => 0,
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
        self.put_string(key, old.as_ref(), live, n.to_string().into_bytes())?;
        Ok(Reply::Int(n))
    }

    fn append(&self, key: &[u8], tail: &[u8]) -> Out {
        let _g = self.lock(key);
        let old = self.meta_raw(key)?;
        let live = old.as_ref().is_some_and(|m| !m.expired(now_ms()));
        let mut v = match &old {
            Some(m) if live && m.kind != Kind::String => return Err(Reply::err(WRONGTYPE)),
            Some(m) if live => m.payload.clone(),
            _ => Vec::new(),
        };
        v.extend_from_slice(tail);
        let n = v.len() as i64;
        self.put_string(key, old.as_ref(), live, v)?;
        Ok(Reply::Int(n))
    }

    fn expire(&self, name: &str, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let n = int(&a[2])?;
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for o in &a[3..] {
            match upper(o).as_str() {
                "NX" => nx = true,
                "XX" => xx = true,
                "GT" => gt = true,
                "LT" => lt = true,
                other => {
                    return Err(Reply::Error(format!("ERR Unsupported option {other}")));
                }
            }
        }
        if (nx && (xx || gt || lt)) || (gt && lt) {
            return Err(Reply::err(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        let now = now_ms();
        let ms = if name == "EXPIRE" {
            n.checked_mul(1000)
        } else {
            Some(n)
        };
        let at = ms
            .and_then(|ms| (now as i64).checked_add(ms))
            .ok_or_else(|| {
                Reply::Error(format!(
                    "ERR invalid expire time in '{}' command",
                    name.to_ascii_lowercase()
                ))
            })?;
        let _g = self.lock(key);
        let Some(mut m) = self.meta(key)? else {
            return Ok(Reply::Int(0));
        };
        let cur = m.expire_at;
        // No expiry counts as an infinite TTL for GT/LT.
        let skip = (nx && cur != 0)
            || (xx && cur == 0)
            || (gt && (cur == 0 || at <= cur as i64))
            || (lt && cur != 0 && at >= cur as i64);
        if skip {
            return Ok(Reply::Int(0));
        }
        let mut b = WriteBatch::new();
        if at <= now as i64 {
            self.purge(&mut b, key, &m, false)?;
        } else {
            if cur != 0 {
                b.delete(keys::expiry_key(cur, key));
            }
            m.expire_at = at as u64;
            b.put(keys::expiry_key(m.expire_at, key), b"");
            b.put(keys::meta_key(key), m.encode());
        }
        self.write(b)?;
        Ok(Reply::Int(1))
    }

    fn scan(&self, a: &[Vec<u8>]) -> Out {
        let cursor: u64 = std::str::from_utf8(&a[1])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
        let (mut pat, mut count, mut kind) = (None, 10usize, None);
        let mut i = 2;
        while i < a.len() {
            let v = a.get(i + 1).ok_or_else(|| Reply::err(SYNTAX))?;
            match upper(&a[i]).as_str() {
                "MATCH" => pat = Some(v.clone()),
                "COUNT" => {
                    let c = int(v)?;
                    if c < 1 {
                        return Err(Reply::err(SYNTAX));
                    }
                    count = (c as usize).min(100_000);
                }
                "TYPE" => kind = Some(String::from_utf8_lossy(v).to_ascii_lowercase()),
                _ => return Err(Reply::err(SYNTAX)),
            }
            i += 2;
        }
        let start = if cursor == 0 {
            None
        } else {
            let c = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
            // A forgotten cursor restarts the iteration (SCAN may return
            // keys more than once).
            c.get(&cursor).cloned()
        };
        let lo_key = [keys::META];
        let lo = match &start {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Included(lo_key.as_slice()),
        };
        let end = keys::prefix_end(&[keys::META]);
        let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let page = self.store.scan(lo, hi, count, false)?;
        let now = now_ms();
        let mut out = Vec::new();
        for (k, v) in &page {
            let key = &k[1..];
            let Some(m) = Meta::decode(v) else { continue };
            if m.expired(now) {
                continue;
            }
            if kind.as_deref().is_some_and(|t| t != m.kind.name()) {
                continue;
            }
            if pat.as_deref().is_some_and(|p| !keys::glob_match(p, key)) {
                continue;
            }
            out.push(Reply::Bulk(key.to_vec()));
        }
        let next = match page.last() {
            Some((k, _)) if page.len() == count => {
                let id = self.next_cursor.fetch_add(1, Ordering::Relaxed);
                let mut c = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
                c.insert(id, k.clone());
                while c.len() > MAX_CURSORS {
                    c.pop_first();
                }
                id
            }
            _ => 0,
        };
        Ok(Reply::Array(vec![
            Reply::bulk(next.to_string()),
            Reply::Array(out),
        ]))
    }

    /// The live container `key` of `kind` (a fresh empty one if absent);
    /// adds to `b` the purge of an expired predecessor.
    fn container(&self, b: &mut WriteBatch, key: &[u8], kind: Kind) -> Result<(Meta, bool), Reply> {
        match self.meta_raw(key)? {
            Some(m) if !m.expired(now_ms()) => {
                if m.kind != kind {
                    return Err(Reply::err(WRONGTYPE));
                }
                Ok((m, true))
            }
            Some(old) => {
                self.purge(b, key, &old, false)?;
                if !self.atomic && old.kind != kind {
                    self.purge_orphans(b, key, kind)?;
                }
                Ok((Meta::container(kind, 0), false))
            }
            None => {
                if !self.atomic {
                    self.purge_orphans(b, key, kind)?;
                }
                Ok((Meta::container(kind, 0), false))
            }
        }
    }

    /// Adds to `b` the deletion of the records of a `kind` container under
    /// `key` that no metadata owns: what a partly applied command (an HSET
    /// whose field landed and whose metadata did not, a DEL that removed
    /// only the metadata) leaves on an engine without atomic batches.
    fn purge_orphans(&self, b: &mut WriteBatch, key: &[u8], kind: Kind) -> Result<(), Reply> {
        let orphan = Meta::container(kind, 0);
        self.purge(b, key, &orphan, true)
    }

    /// Stores the container's new count, or deletes it when empty.
    fn finish_container(&self, b: &mut WriteBatch, key: &[u8], mut m: Meta, count: u64) {
        if count == 0 {
            b.delete(keys::meta_key(key));
            if m.expire_at != 0 {
                b.delete(keys::expiry_key(m.expire_at, key));
            }
        } else {
            m.set_count(count);
            b.put(keys::meta_key(key), m.encode());
        }
    }

    fn hset(&self, name: &str, a: &[Vec<u8>]) -> Out {
        if !a.len().is_multiple_of(2) {
            return Err(wrong_args(name));
        }
        let key = &a[1];
        let _g = self.lock(key);
        let mut b = WriteBatch::new();
        let (m, existed) = self.container(&mut b, key, Kind::Hash)?;
        let mut count = m.count();
        let mut added = 0;
        let mut fresh = std::collections::HashSet::new();
        for p in a[2..].chunks(2) {
            let fk = keys::sub_key(keys::HASH, key, &p[0]);
            let exists = if fresh.contains(&fk) {
                true
            } else {
                existed && self.store.get(&fk)?.is_some()
            };
            if !exists {
                added += 1;
                fresh.insert(fk.clone());
            }
            b.put(fk, &p[1]);
        }
        count += added;
        self.finish_container(&mut b, key, m, count);
        self.write(b)?;
        Ok(if name == "HMSET" {
            Reply::ok()
        } else {
            Reply::Int(added as i64)
        })
    }

    fn hdel(&self, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let _g = self.lock(key);
        let Some(m) = self.meta_of(key, Kind::Hash)? else {
            return Ok(Reply::Int(0));
        };
        let mut b = WriteBatch::new();
        let mut removed = std::collections::HashSet::new();
        for f in &a[2..] {
            let fk = keys::sub_key(keys::HASH, key, f);
            if !removed.contains(&fk) && self.store.get(&fk)?.is_some() {
                b.delete(&fk);
                removed.insert(fk);
            }
        }
        let n = removed.len() as u64;
        let count = m.count().saturating_sub(n);
        self.finish_container(&mut b, key, m, count);
        self.write(b)?;
        Ok(Reply::Int(n as i64))
    }

    fn zadd(&self, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
            (false, false, false, false, false, false);
        let mut i = 2;
        while i < a.len() {
            match upper(&a[i]).as_str() {
                "NX" => nx = true,
                "XX" => xx = true,
                "GT" => gt = true,
                "LT" => lt = true,
                "CH" => ch = true,
                "INCR" => incr = true,
                _ => break,
            }
            i += 1;
        }
        let rest = &a[i..];
        if rest.is_empty() || !rest.len().is_multiple_of(2) {
            return Err(Reply::err(SYNTAX));
        }
        if nx && xx {
            return Err(Reply::err(
                "ERR XX and NX options at the same time are not compatible",
            ));
        }
        if (nx && (gt || lt)) || (gt && lt) {
            return Err(Reply::err(
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            ));
        }
        if incr && rest.len() != 2 {
            return Err(Reply::err(
                "ERR INCR option supports a single increment-element pair",
            ));
        }
        let mut pairs = Vec::with_capacity(rest.len() / 2);
        for p in rest.chunks(2) {
            pairs.push((float(&p[0])?, &p[1]));
        }
        let _g = self.lock(key);
        let mut b = WriteBatch::new();
        let (m, existed) = self.container(&mut b, key, Kind::ZSet)?;
        // Members changed by this command so far (later pairs see them).
        let mut overlay: HashMap<&[u8], Option<f64>> = HashMap::new();
        let (mut added, mut changed) = (0u64, 0u64);
        let mut incr_result = None;
        for (score, member) in pairs {
            let mk = keys::sub_key(keys::ZMEMBER, key, member);
            let old = match overlay.get(member.as_slice()) {
                Some(s) => *s,
                None if existed => self.store.get(&mk)?.and_then(|v| keys::decode_score(&v)),
                None => None,
            };
            match old {
                Some(o) => {
                    if nx {
                        continue;
                    }
                    let new = if incr { o + score } else { score };
                    if new.is_nan() {
                        return Err(Reply::err("ERR resulting score is not a number (NaN)"));
                    }
                    if (gt && new <= o) || (lt && new >= o) {
                        continue;
                    }
                    incr_result = Some(new);
                    if new != o {
                        b.delete(keys::zscore_key(key, o, member));
                        b.put(keys::zscore_key(key, new, member), b"");
                        b.put(&mk, keys::encode_score(new));
                        overlay.insert(member, Some(new));
                        changed += 1;
                    }
                }
                None => {
                    if xx {
                        continue;
                    }
                    incr_result = Some(score);
                    b.put(keys::zscore_key(key, score, member), b"");
                    b.put(&mk, keys::encode_score(score));
                    overlay.insert(member, Some(score));
                    added += 1;
                }
            }
        }
        let count = m.count() + added;
        if added + changed > 0 {
            self.finish_container(&mut b, key, m, count);
        }
        self.write(b)?;
        Ok(if incr {
            incr_result.map_or(Reply::Nil, |f| Reply::bulk(keys::format_score(f)))
        } else if ch {
            Reply::Int((added + changed) as i64)
        } else {
            Reply::Int(added as i64)
        })
    }

    fn zrem(&self, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let _g = self.lock(key);
        let Some(m) = self.meta_of(key, Kind::ZSet)? else {
            return Ok(Reply::Int(0));
        };
        let mut b = WriteBatch::new();
        let mut gone = std::collections::HashSet::new();
        for member in &a[2..] {
            if gone.contains(member.as_slice()) {
                continue;
            }
            let mk = keys::sub_key(keys::ZMEMBER, key, member);
            if let Some(s) = self.store.get(&mk)?.and_then(|v| keys::decode_score(&v)) {
                b.delete(&mk);
                b.delete(keys::zscore_key(key, s, member));
                gone.insert(member.as_slice());
            }
        }
        let n = gone.len() as u64;
        let count = m.count().saturating_sub(n);
        self.finish_container(&mut b, key, m, count);
        self.write(b)?;
        Ok(Reply::Int(n as i64))
    }

    fn zrange(&self, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let mut by_score = false;
        let mut rev = false;
        let mut rest = Vec::new();
        for o in &a[4..] {
            match upper(o).as_str() {
                "BYSCORE" => by_score = true,
                "REV" => rev = true,
                "BYLEX" => return Err(Reply::err(SYNTAX)),
                _ => rest.push(o.clone()),
            }
        }
        let opts = parse_range_opts(&rest, by_score)?;
        if by_score {
            let (min, max) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
            return self.zrange_by_score(key, score_bound(min)?, score_bound(max)?, rev, opts);
        }
        let (start, stop) = (int(&a[2])?, int(&a[3])?);
        let Some(m) = self.meta_of(key, Kind::ZSet)? else {
            return Ok(Reply::Array(vec![]));
        };
        let n = m.count() as i64;
        let norm = |i: i64| if i < 0 { (n + i).max(0) } else { i };
        let (start, stop) = (norm(start), norm(stop).min(n - 1));
        if start > stop || start >= n {
            return Ok(Reply::Array(vec![]));
        }
        let p = keys::sub_prefix(keys::ZSCORE, key);
        let entries = self.prefix(&p, (stop + 1) as usize, rev)?;
        let mut out = Vec::new();
        for (k, _) in entries.into_iter().skip(start as usize) {
            push_member(&mut out, &k[p.len()..], opts.with_scores);
        }
        Ok(Reply::Array(out))
    }

    fn zrange_by_score(
        &self,
        key: &[u8],
        min: ScoreBound,
        max: ScoreBound,
        rev: bool,
        opts: RangeOpts,
    ) -> Out {
        if self.meta_of(key, Kind::ZSet)?.is_none() {
            return Ok(Reply::Array(vec![]));
        }
        let entries =
            self.score_range(key, min, max, rev, opts.offset.saturating_add(opts.count))?;
        let p = keys::sub_prefix(keys::ZSCORE, key);
        let mut out = Vec::new();
        for (k, _) in entries.into_iter().skip(opts.offset) {
            push_member(&mut out, &k[p.len()..], opts.with_scores);
        }
        Ok(Reply::Array(out))
    }

    /// Score-index entries with scores between the bounds.
    fn score_range(
        &self,
        key: &[u8],
        min: ScoreBound,
        max: ScoreBound,
        rev: bool,
        limit: usize,
    ) -> Result<Entries, Reply> {
        if min.v > max.v || (min.v == max.v && (min.exclusive || max.exclusive)) {
            return Ok(vec![]);
        }
        let p = keys::sub_prefix(keys::ZSCORE, key);
        let at = |f: f64| {
            let mut k = p.clone();
            k.extend_from_slice(&keys::encode_score(f));
            k
        };
        let lo = if min.exclusive {
            keys::prefix_end(&at(min.v)).unwrap_or_else(|| at(min.v))
        } else {
            at(min.v)
        };
        let hi = if max.exclusive {
            Some(at(max.v))
        } else {
            keys::prefix_end(&at(max.v))
        };
        self.range(&lo, hi.as_deref(), limit, rev)
    }

    fn zremrangebyscore(&self, a: &[Vec<u8>]) -> Out {
        let key = &a[1];
        let (min, max) = (score_bound(&a[2])?, score_bound(&a[3])?);
        let _g = self.lock(key);
        let Some(m) = self.meta_of(key, Kind::ZSet)? else {
            return Ok(Reply::Int(0));
        };
        let p = keys::sub_prefix(keys::ZSCORE, key);
        let entries = self.score_range(key, min, max, false, usize::MAX)?;
        let mut b = WriteBatch::new();
        for (k, _) in &entries {
            b.delete(k);
            b.delete(keys::sub_key(keys::ZMEMBER, key, &k[p.len() + 8..]));
        }
        let n = entries.len() as u64;
        let count = m.count().saturating_sub(n);
        self.finish_container(&mut b, key, m, count);
        self.write(b)?;
        Ok(Reply::Int(n as i64))
    }
}

#[derive(Debug, Clone, Copy)]
struct RangeOpts {
    with_scores: bool,
    offset: usize,
    count: usize,
}

fn parse_range_opts(a: &[Vec<u8>], limit_ok: bool) -> Result<RangeOpts, Reply> {
    let mut o = RangeOpts {
        with_scores: false,
        offset: 0,
        count: usize::MAX,
    };
    let mut i = 0;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "WITHSCORES" => o.with_scores = true,
            "LIMIT" if limit_ok && i + 2 < a.len() => {
                let off = int(&a[i + 1])?;
                let cnt = int(&a[i + 2])?;
                if off < 0 {
                    o.count = 0;
                } else {
                    o.offset = off as usize;
                    o.count = if cnt < 0 { usize::MAX } else { cnt as usize };
                }
                i += 2;
            }
            _ => return Err(Reply::err(SYNTAX)),
        }
        i += 1;
    }
    Ok(o)
}

/// `rest` is the encoded score followed by the member.
fn push_member(out: &mut Vec<Reply>, rest: &[u8], with_scores: bool) {
    out.push(Reply::Bulk(rest[8..].to_vec()));
    if with_scores {
        let s = keys::decode_score(rest).unwrap_or(0.0);
        out.push(Reply::bulk(keys::format_score(s)));
    }
}

/// Commands that touch no data.
const ADMIN: &[&str] = &[
    "PING", "ECHO", "AUTH", "HELLO", "QUIT", "SELECT", "COMMAND", "CONFIG", "INFO", "DBSIZE",
    "FLUSHDB", "FLUSHALL",
];

/// Every command with its Redis arity (n exact, -n at least n).
pub const COMMANDS: &[(&str, i32)] = &[
    ("PING", -1),
    ("ECHO", 2),
    ("AUTH", -2),
    ("SELECT", 2),
    ("QUIT", -1),
    ("HELLO", -1),
    ("COMMAND", -1),
    ("CONFIG", -2),
    ("INFO", -1),
    ("DBSIZE", 1),
    ("FLUSHDB", -1),
    ("FLUSHALL", -1),
    ("GET", 2),
    ("SET", -3),
    ("SETNX", 3),
    ("GETSET", 3),
    ("MGET", -2),
    ("MSET", -3),
    ("DEL", -2),
    ("UNLINK", -2),
    ("EXISTS", -2),
    ("TYPE", 2),
    ("INCR", 2),
    ("DECR", 2),
    ("INCRBY", 3),
    ("DECRBY", 3),
    ("APPEND", 3),
    ("STRLEN", 2),
    ("EXPIRE", -3),
    ("PEXPIRE", -3),
    ("TTL", 2),
    ("PTTL", 2),
    ("PERSIST", 2),
    ("SCAN", -2),
    ("HSET", -4),
    ("HMSET", -4),
    ("HGET", 3),
    ("HMGET", -3),
    ("HGETALL", 2),
    ("HDEL", -3),
    ("HLEN", 2),
    ("HEXISTS", 3),
    ("ZADD", -4),
    ("ZREM", -3),
    ("ZSCORE", 3),
    ("ZCARD", 2),
    ("ZRANGE", -4),
    ("ZRANGEBYSCORE", -4),
    ("ZREMRANGEBYSCORE", 4),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn run(d: &Data, args: &[&str]) -> Reply {
        let mut s = Session {
            authenticated: true,
            quit: false,
        };
        let a: Vec<Vec<u8>> = args.iter().map(|x| x.as_bytes().to_vec()).collect();
        d.exec(&mut s, &a)
    }

    /// On an engine without atomic batches a command can land in part: a
    /// hash field without its metadata. A later HSET of the key must not
    /// bring that field back (HGETALL and HLEN must agree).
    #[test]
    fn orphans_of_a_partial_command_do_not_come_back() {
        for engine in ["engine=kvell", "engine=lsm"] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut o = strata::Options::default();
            o.apply(engine).expect("options");
            let store: Arc<dyn KvStore> = Arc::from(strata::open(dir.path(), o).expect("open"));
            // What a partial HSET and a partial ZADD leave: records, no metadata.
            store
                .put(&keys::sub_key(keys::HASH, b"h", b"f1"), b"v1")
                .expect("put");
            store
                .put(
                    &keys::sub_key(keys::ZMEMBER, b"z", b"m1"),
                    &keys::encode_score(0.5),
                )
                .expect("put");
            store
                .put(&keys::zscore_key(b"z", 0.5, b"m1"), b"")
                .expect("put");
            let d = Data::new(store.clone(), None, 0);
            assert!(matches!(run(&d, &["HSET", "h", "f2", "v2"]), Reply::Int(1)));
            assert!(matches!(run(&d, &["HLEN", "h"]), Reply::Int(1)));
            match run(&d, &["HGETALL", "h"]) {
                // On the LSM the orphan stays (it cannot arise there), on
                // KVell it is gone.
                Reply::Array(v) if engine == "engine=kvell" => assert_eq!(v.len(), 2, "{engine}"),
                Reply::Array(_) => {}
                other => panic!("{engine}: HGETALL: {other:?}"),
            }
            if engine == "engine=kvell" {
                assert!(matches!(run(&d, &["ZADD", "z", "1", "m2"]), Reply::Int(1)));
                assert!(matches!(run(&d, &["ZCARD", "z"]), Reply::Int(1)));
                match run(&d, &["ZRANGE", "z", "0", "-1"]) {
                    Reply::Array(v) => assert_eq!(v.len(), 1, "ZRANGE after ZADD"),
                    other => panic!("ZRANGE: {other:?}"),
                }
            }
            store.close().expect("close");
        }
    }
}
