//! Hash commands: HSET/HMSET, HGET, HMGET, HGETALL, HDEL, HLEN, HEXISTS.

use super::{wrong_args, Data, Out, Session};
use crate::keys::{self, Kind};
use crate::resp::Reply;
use strata::WriteBatch;

impl Data {
    pub(super) fn hget(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        if self.meta_of(&a[1], Kind::Hash)?.is_none() {
            return Ok(Reply::Nil);
        }
        Ok(Reply::opt(self.store.get(&keys::sub_key(
            keys::HASH,
            &a[1],
            &a[2],
        ))?))
    }

    pub(super) fn hmget(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn hgetall(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn hlen(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        Ok(Reply::Int(
            self.meta_of(&a[1], Kind::Hash)?
                .map_or(0, |m| m.count() as i64),
        ))
    }

    pub(super) fn hexists(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        if self.meta_of(&a[1], Kind::Hash)?.is_none() {
            return Ok(Reply::Int(0));
        }
        let k = keys::sub_key(keys::HASH, &a[1], &a[2]);
        Ok(Reply::Int(i64::from(self.store.get(&k)?.is_some())))
    }

    pub(super) fn hset(&self, _: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn hdel(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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
}
