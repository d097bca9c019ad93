//! String commands: GET, SET and its variants, MGET, MSET, INCR/DECR,
//! APPEND, STRLEN.

use super::{int, now_ms, upper, wrong_args, Data, Out, Session, SYNTAX, WRONGTYPE};
use crate::keys::{self, Kind, Meta};
use crate::resp::Reply;
use strata::WriteBatch;

impl Data {
    pub(super) fn get(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        match self.meta_of(&a[1], Kind::String)? {
            Some(m) => Ok(Reply::Bulk(m.payload)),
            None => Ok(Reply::Nil),
        }
    }

    pub(super) fn setnx(&self, s: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
        let args = [a[0].clone(), a[1].clone(), a[2].clone(), b"NX".to_vec()];
        let r = self.set(s, name, &args)?;
        Ok(Reply::Int(i64::from(r == Reply::ok())))
    }

    pub(super) fn getset(&self, s: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
        let args = [a[0].clone(), a[1].clone(), a[2].clone(), b"GET".to_vec()];
        self.set(s, name, &args)
    }

    pub(super) fn mget(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let mut out = Vec::with_capacity(a.len() - 1);
        for k in &a[1..] {
            out.push(match self.meta(k)? {
                Some(m) if m.kind == Kind::String => Reply::Bulk(m.payload),
                _ => Reply::Nil,
            });
        }
        Ok(Reply::Array(out))
    }

    pub(super) fn incr(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        self.add(&a[1], 1)
    }

    pub(super) fn decr(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        self.add(&a[1], -1)
    }

    pub(super) fn incrby(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        self.add(&a[1], int(&a[2])?)
    }

    pub(super) fn decrby(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let d = int(&a[2])?
            .checked_neg()
            .ok_or_else(|| Reply::err("ERR decrement would overflow"))?;
        self.add(&a[1], d)
    }

    pub(super) fn strlen(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        Ok(Reply::Int(
            self.meta_of(&a[1], Kind::String)?
                .map_or(0, |m| m.payload.len() as i64),
        ))
    }

    pub(super) fn set(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn mset(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    /// Adds `by` to the integer string at `key` (0 when absent).
    fn add(&self, key: &[u8], by: i64) -> Out {
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

    pub(super) fn append(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let (key, tail) = (&a[1], &a[2]);
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
}
