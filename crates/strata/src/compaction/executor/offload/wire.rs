//! The worker protocol's messages: frames, compaction requests and
//! replies, and metrics (`docs/FORMAT.md` §10).

use crate::coding::{put_bytes, put_varint, Reader};
use crate::compaction::Plan;
use crate::error::{corrupt, Error, Result};
use crate::table::TableOptions;
use crate::version::FileDesc;
use std::io::Read;
use std::path::PathBuf;

pub const MAGIC: [u8; 4] = *b"SCWK";
/// Frame version: 2 adds [`RULES`] to requests and replies, 3 the block
/// padding to a request's table options.
pub const VERSION: u8 = 3;

/// The rules a host and a worker compact by: this build's version and the
/// version of what a compaction keeps, drops or rewrites (tombstone and
/// snapshot rules, the stale picker's drops), bumped whenever those
/// change. A request or reply naming other rules is refused.
pub const RULES: &str = concat!("strata ", env!("CARGO_PKG_VERSION"), ", compaction rules 1");
/// Largest payload either side accepts.
pub const MAX_PAYLOAD: u32 = 64 << 20;
const HEADER: usize = 4 + 4 + 8 + 4;

/// Message kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Compact = 1,
    Result = 2,
    Error = 3,
    MetricsRequest = 4,
    Metrics = 5,
}

/// Which side sent a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Host = 0,
    Device = 1,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub op: Op,
    pub origin: Origin,
    pub flags: u8,
    pub request_id: u64,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER + self.payload.len() + 4);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&[VERSION, self.op as u8, self.origin as u8, self.flags]);
        b.extend_from_slice(&self.request_id.to_le_bytes());
        b.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.payload);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a whole frame (header, payload and checksum).
    pub fn decode(buf: &[u8]) -> Result<Frame> {
        let (len, frame) = Self::header(buf.get(..HEADER).unwrap_or(buf))?;
        let total = HEADER + len as usize + 4;
        if buf.len() != total {
            return Err(corrupt(0, "worker frame: wrong length"));
        }
        let crc = u32::from_le_bytes(buf[total - 4..].try_into().unwrap_or_default());
        if crc32c::crc32c(&buf[..total - 4]) != crc {
            return Err(corrupt(0, "worker frame: checksum mismatch"));
        }
        Ok(Frame {
            payload: buf[HEADER..total - 4].to_vec(),
            ..frame
        })
    }

    /// Checks a header; returns the payload length and the frame without
    /// its payload.
    fn header(h: &[u8]) -> Result<(u32, Frame)> {
        let bad = |what: &str| corrupt(0, format!("worker frame: {what}"));
        if h.len() < HEADER {
            return Err(bad("truncated header"));
        }
        if h[..4] != MAGIC {
            return Err(bad("bad magic"));
        }
        if h[4] != VERSION {
            return Err(bad("unknown version"));
        }
        let op = match h[5] {
            1 => Op::Compact,
            2 => Op::Result,
            3 => Op::Error,
            4 => Op::MetricsRequest,
            5 => Op::Metrics,
            _ => return Err(bad("unknown op")),
        };
        let origin = match h[6] {
            0 => Origin::Host,
            1 => Origin::Device,
            _ => return Err(bad("unknown origin")),
        };
        if h[7] != 0 {
            return Err(bad("unknown flags"));
        }
        let request_id = u64::from_le_bytes(h[8..16].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(h[16..20].try_into().unwrap_or_default());
        if len > MAX_PAYLOAD {
            return Err(bad("payload too large"));
        }
        Ok((
            len,
            Frame {
                op,
                origin,
                flags: h[7],
                request_id,
                payload: Vec::new(),
            },
        ))
    }

    /// Reads one frame from `r`.
    pub fn read_from(r: &mut impl Read) -> Result<Frame> {
        let mut h = [0u8; HEADER];
        r.read_exact(&mut h).map_err(|e| Error::io("worker", e))?;
        let (len, _) = Self::header(&h)?;
        let mut buf = vec![0u8; HEADER + len as usize + 4];
        buf[..HEADER].copy_from_slice(&h);
        r.read_exact(&mut buf[HEADER..])
            .map_err(|e| Error::io("worker", e))?;
        Self::decode(&buf)
    }
}

/// A compaction request: one sub-task of a plan, with the tables it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The rules the host compacts by ([`RULES`]).
    pub rules: String,
    pub dir: PathBuf,
    pub table_opts: TableOptions,
    pub plan: Plan,
    pub subtask: usize,
    pub inputs: Vec<FileDesc>,
    pub next: Vec<FileDesc>,
    pub deeper: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    pub grandparents: Vec<(Vec<u8>, Vec<u8>, u64)>,
    /// 0 linear, 1 pipelined, 2 the worker's decision.
    pub mode: u8,
    pub threshold: f64,
}

fn count(r: &mut Reader<'_>, max: u64) -> Option<usize> {
    r.varint().filter(|n| *n <= max).map(|n| n as usize)
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_bytes(&mut b, self.rules.as_bytes());
        put_bytes(&mut b, self.dir.as_os_str().as_encoded_bytes());
        put_varint(&mut b, self.table_opts.block_size as u64);
        put_varint(&mut b, self.table_opts.restart_interval as u64);
        put_varint(&mut b, self.table_opts.bloom_bits_per_key as u64);
        b.push(self.table_opts.compression as u8);
        b.push(u8::from(self.table_opts.block_align));
        put_varint(&mut b, self.table_opts.align_padding as u64);
        put_bytes(&mut b, &self.plan.encode());
        put_varint(&mut b, self.subtask as u64);
        for list in [&self.inputs, &self.next] {
            put_varint(&mut b, list.len() as u64);
            for d in list {
                d.encode_into(&mut b);
            }
        }
        put_varint(&mut b, self.deeper.len() as u64);
        for level in &self.deeper {
            put_varint(&mut b, level.len() as u64);
            for (lo, hi) in level {
                put_bytes(&mut b, lo);
                put_bytes(&mut b, hi);
            }
        }
        put_varint(&mut b, self.grandparents.len() as u64);
        for (lo, hi, size) in &self.grandparents {
            put_bytes(&mut b, lo);
            put_bytes(&mut b, hi);
            put_varint(&mut b, *size);
        }
        b.push(self.mode);
        crate::coding::put_u64(&mut b, self.threshold.to_bits());
        b
    }

    pub fn decode(buf: &[u8]) -> Result<Request> {
        let mut r = Reader::new(buf);
        let bad =
            |r: &Reader<'_>, what: &str| corrupt(r.pos() as u64, format!("worker request: {what}"));
        let rules = r.len_prefixed().ok_or_else(|| bad(&r, "truncated rules"))?;
        let rules = std::str::from_utf8(rules)
            .map_err(|_| bad(&r, "rules are not UTF-8"))?
            .to_string();
        let dir = r.len_prefixed().ok_or_else(|| bad(&r, "truncated dir"))?;
        let dir = PathBuf::from(std::str::from_utf8(dir).map_err(|_| bad(&r, "dir is not UTF-8"))?);
        let small = |r: &mut Reader<'_>, max: u64| r.varint().filter(|v| *v <= max);
        let block_size = small(&mut r, 64 << 20).ok_or_else(|| bad(&r, "bad block size"))?;
        let restart = small(&mut r, 1 << 16).ok_or_else(|| bad(&r, "bad restart interval"))?;
        let bloom = small(&mut r, 64).ok_or_else(|| bad(&r, "bad bloom bits"))?;
        let compression = r
            .u8()
            .and_then(crate::table::format::Compression::from_u8)
            .ok_or_else(|| bad(&r, "bad compression"))?;
        let block_align = match r.u8() {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(bad(&r, "bad block alignment")),
        };
        let align_padding = small(&mut r, 2048).ok_or_else(|| bad(&r, "bad block padding"))?;
        if block_size == 0 || restart == 0 {
            return Err(bad(&r, "zero block size or restart interval"));
        }
        let table_opts = TableOptions {
            block_size: block_size as usize,
            restart_interval: restart as usize,
            bloom_bits_per_key: bloom as usize,
            compression,
            block_align,
            align_padding: align_padding as usize,
        };
        let plan = Plan::decode(r.len_prefixed().ok_or_else(|| bad(&r, "truncated plan"))?)?;
        let subtask = count(&mut r, 1 << 16).ok_or_else(|| bad(&r, "bad sub-task"))?;
        if subtask >= plan.assigned.subtasks() {
            return Err(bad(&r, "sub-task out of range"));
        }
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = count(&mut r, 1 << 20).ok_or_else(|| bad(&r, "bad table count"))?;
            for _ in 0..n {
                list.push(FileDesc::decode_from(&mut r).ok_or_else(|| bad(&r, "truncated table"))?);
            }
        }
        let [inputs, next] = lists;
        if inputs.iter().map(|d| d.id).ne(plan.inputs.iter().copied())
            || next
                .iter()
                .map(|d| d.id)
                .ne(plan.next_inputs.iter().copied())
        {
            return Err(bad(&r, "tables differ from the plan's"));
        }
        let levels = count(&mut r, 64).ok_or_else(|| bad(&r, "bad level count"))?;
        let mut deeper = Vec::with_capacity(levels);
        // At most 2^20 spans over all levels.
        let mut spans_left: u64 = 1 << 20;
        for _ in 0..levels {
            let n = count(&mut r, spans_left).ok_or_else(|| bad(&r, "bad span count"))?;
            spans_left -= n as u64;
            let mut spans = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let lo = r.len_prefixed().ok_or_else(|| bad(&r, "truncated span"))?;
                let hi = r.len_prefixed().ok_or_else(|| bad(&r, "truncated span"))?;
                spans.push((lo.to_vec(), hi.to_vec()));
            }
            deeper.push(spans);
        }
        let n = count(&mut r, 1 << 20).ok_or_else(|| bad(&r, "bad grandparent count"))?;
        let mut grandparents = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let lo = r
                .len_prefixed()
                .ok_or_else(|| bad(&r, "truncated grandparent"))?;
            let hi = r
                .len_prefixed()
                .ok_or_else(|| bad(&r, "truncated grandparent"))?;
            let size = r.varint().ok_or_else(|| bad(&r, "truncated grandparent"))?;
            grandparents.push((lo.to_vec(), hi.to_vec(), size));
        }
        let mode = r
            .u8()
            .filter(|m| *m <= 2)
            .ok_or_else(|| bad(&r, "bad mode"))?;
        let threshold = r
            .u64()
            .map(f64::from_bits)
            .filter(|t| t.is_finite())
            .ok_or_else(|| bad(&r, "bad threshold"))?;
        if !r.is_empty() {
            return Err(bad(&r, "trailing bytes"));
        }
        Ok(Request {
            rules,
            dir,
            table_opts,
            plan,
            subtask,
            inputs,
            next,
            deeper,
            grandparents,
            mode,
            threshold,
        })
    }
}

/// A worker's answer to a compaction request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The rules the worker compacted by ([`RULES`]).
    pub rules: String,
    pub descs: Vec<FileDesc>,
    pub bytes_written: u64,
    pub dropped: u64,
    /// Busy microseconds of the read, merge and write stages.
    pub busy_micros: [u64; 3],
    pub cpu_micros: u64,
    pub pipelined: bool,
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_bytes(&mut b, self.rules.as_bytes());
        put_varint(&mut b, self.descs.len() as u64);
        for d in &self.descs {
            d.encode_into(&mut b);
        }
        put_varint(&mut b, self.bytes_written);
        put_varint(&mut b, self.dropped);
        for m in self.busy_micros {
            put_varint(&mut b, m);
        }
        put_varint(&mut b, self.cpu_micros);
        b.push(u8::from(self.pipelined));
        b
    }

    pub fn decode(buf: &[u8]) -> Result<Reply> {
        let mut r = Reader::new(buf);
        let bad = |r: &Reader<'_>| corrupt(r.pos() as u64, "worker reply: truncated or malformed");
        let rules = r.len_prefixed().ok_or_else(|| bad(&r))?;
        let rules = std::str::from_utf8(rules).map_err(|_| bad(&r))?.to_string();
        let n = count(&mut r, 1 << 20).ok_or_else(|| bad(&r))?;
        let mut reply = Reply {
            rules,
            ..Reply::default()
        };
        for _ in 0..n {
            reply
                .descs
                .push(FileDesc::decode_from(&mut r).ok_or_else(|| bad(&r))?);
        }
        reply.bytes_written = r.varint().ok_or_else(|| bad(&r))?;
        reply.dropped = r.varint().ok_or_else(|| bad(&r))?;
        for m in &mut reply.busy_micros {
            *m = r.varint().ok_or_else(|| bad(&r))?;
        }
        reply.cpu_micros = r.varint().ok_or_else(|| bad(&r))?;
        reply.pipelined = match r.u8() {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(bad(&r)),
        };
        if !r.is_empty() {
            return Err(bad(&r));
        }
        Ok(reply)
    }
}

/// Worker metrics (the paper's metric message): kind → value.
pub const METRIC_SUBTASKS: u8 = 1;
pub const METRIC_CPU_MICROS: u8 = 2;
pub const METRIC_BYTES_WRITTEN: u8 = 3;
pub const METRIC_FAILURES: u8 = 4;

/// Encodes metrics as `varint(n) (u8 kind, varint value)*n`.
pub fn encode_metrics(m: &[(u8, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, m.len() as u64);
    for (k, v) in m {
        b.push(*k);
        put_varint(&mut b, *v);
    }
    b
}

pub fn decode_metrics(buf: &[u8]) -> Result<Vec<(u8, u64)>> {
    let mut r = Reader::new(buf);
    let bad = || corrupt(0, "worker metrics: malformed");
    let n = count(&mut r, 256).ok_or_else(bad)?;
    let mut m = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.u8().ok_or_else(bad)?;
        m.push((k, r.varint().ok_or_else(bad)?));
    }
    if !r.is_empty() {
        return Err(bad());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_damage() {
        let f = Frame {
            op: Op::Compact,
            origin: Origin::Host,
            flags: 0,
            request_id: 77,
            payload: b"plan bytes".to_vec(),
        };
        let flagged = Frame {
            flags: 3,
            ..f.clone()
        };
        assert!(
            Frame::decode(&flagged.encode()).is_err(),
            "flags are reserved"
        );
        let enc = f.encode();
        assert_eq!(Frame::decode(&enc).ok(), Some(f.clone()));
        assert_eq!(Frame::read_from(&mut &enc[..]).ok(), Some(f));
        for cut in 0..enc.len() {
            assert!(Frame::decode(&enc[..cut]).is_err());
        }
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x40;
            assert!(Frame::decode(&bad).is_err(), "flipped byte {i} passed");
        }
    }

    #[test]
    fn replies_and_metrics_round_trip() {
        let r = Reply {
            rules: RULES.to_string(),
            descs: vec![FileDesc {
                id: 9,
                size: 100,
                smallest: b"a\0\0\0\0\0\0\0\x01".to_vec(),
                largest: b"b\0\0\0\0\0\0\0\x01".to_vec(),
                entries: 3,
                deletions: 1,
                max_seq: 5,
                min_seq: 0,
                swept_seq: 0,
            }],
            bytes_written: 100,
            dropped: 2,
            busy_micros: [1, 2, 3],
            cpu_micros: 4,
            pipelined: true,
        };
        assert_eq!(Reply::decode(&r.encode()).ok(), Some(r.clone()));
        let enc = r.encode();
        for cut in 0..enc.len() {
            assert!(Reply::decode(&enc[..cut]).is_err());
        }
        let m = vec![(METRIC_SUBTASKS, 3), (METRIC_FAILURES, 0)];
        assert_eq!(decode_metrics(&encode_metrics(&m)).ok(), Some(m));
    }
}
