//! The commands: Redis types mapped onto a `KvStore` (see `keys`), with a
//! striped lock per key so that read-modify-write commands are atomic.
//!
//! Every command is a row of one table (`table`): its name, arity, whether
//! it touches data, and the method that runs it. The methods live by the
//! type they serve: `server` (connection and administration), `keyspace`
//! (keys of any type: DEL, EXPIRE, SCAN...), `strings`, `hashes`, `zsets`;
//! this module holds the server's data and what they share.

use crate::keys::{self, Kind, Meta};
use crate::resp::Reply;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use strata::{KvStore, ScanRange, WriteBatch, WriteOptions};

mod hashes;
mod keyspace;
mod server;
mod strings;
mod table;
mod zsets;

use table::{find, COMMANDS};

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
    /// The engine deletes a key range with one tombstone (`Semantics`):
    /// a container's records then go in O(1), whatever their number.
    ranges: bool,
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

impl Data {
    pub fn new(store: Arc<dyn KvStore>, requirepass: Option<String>, port: u16) -> Data {
        Data {
            atomic: store.semantics().atomic_batches,
            ranges: store.semantics().range_deletes,
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
        Ok(self.store.scan(
            ScanRange::new(Bound::Included(lo), end)
                .limit(limit)
                .reverse(reverse),
        )?)
    }

    fn prefix(&self, p: &[u8], limit: usize, reverse: bool) -> Result<Entries, Reply> {
        let end = keys::prefix_end(p);
        self.range(p, end.as_deref(), limit, reverse)
    }

    /// Adds to `b` the deletion of every record of `key` (described by
    /// `old`); the metadata record too unless `keep_meta`. On an engine
    /// with range deletion each kind of record goes by one range
    /// tombstone; otherwise each record is read and deleted.
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
            let p = keys::sub_prefix(t, key);
            match keys::prefix_end(&p) {
                Some(end) if self.ranges => b.delete_range(&p, &end),
                _ => {
                    for (k, _) in self.prefix(&p, usize::MAX, false)? {
                        b.delete(k);
                    }
                }
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
        let Some(cmd) = find(&name) else {
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
        if (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) {
            return wrong_args(cmd.name);
        }
        match (cmd.run)(self, s, cmd.name, a) {
            Ok(r) | Err(r) => r,
        }
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
            let page = self.store.scan(ScanRange::new(lo, hi).limit(1024))?;
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
}

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
