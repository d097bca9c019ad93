//! Sorted-set commands: ZADD, ZREM, ZSCORE, ZCARD, ZRANGE, ZRANGEBYSCORE,
//! ZREMRANGEBYSCORE.

use super::{float, int, upper, Data, Entries, Out, Session, SYNTAX};
use crate::keys::{self, Kind};
use crate::resp::Reply;
use std::collections::HashMap;
use strata::WriteBatch;

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
    pub(super) fn zscore(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn zcard(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        Ok(Reply::Int(
            self.meta_of(&a[1], Kind::ZSet)?
                .map_or(0, |m| m.count() as i64),
        ))
    }

    pub(super) fn zrangebyscore(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let opts = parse_range_opts(&a[4..], true)?;
        let (min, max) = (score_bound(&a[2])?, score_bound(&a[3])?);
        self.zrange_by_score(&a[1], min, max, false, opts)
    }

    pub(super) fn zadd(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn zrem(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn zrange(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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

    pub(super) fn zremrangebyscore(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
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
