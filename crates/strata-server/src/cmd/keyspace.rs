//! Commands on keys of any type: DEL, EXISTS, TYPE, EXPIRE and TTL,
//! PERSIST, SCAN.

use super::{int, now_ms, upper, Data, Out, Session, MAX_CURSORS, SYNTAX};
use crate::keys::{self, Meta};
use crate::resp::Reply;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use strata::{ScanRange, WriteBatch};

impl Data {
    pub(super) fn del(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let mut n = 0;
        for k in &a[1..] {
            n += i64::from(self.delete_key(k)?);
        }
        Ok(Reply::Int(n))
    }

    pub(super) fn exists(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let mut n = 0;
        for k in &a[1..] {
            n += i64::from(self.meta(k)?.is_some());
        }
        Ok(Reply::Int(n))
    }

    pub(super) fn type_of(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        Ok(Reply::Status(
            self.meta(&a[1])?
                .map_or("none", |m| m.kind.name())
                .to_string(),
        ))
    }

    pub(super) fn ttl(&self, _: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn persist(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn expire(&self, _: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn scan(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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
        let page = self.store.scan(ScanRange::new(lo, hi).limit(count))?;
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
}
