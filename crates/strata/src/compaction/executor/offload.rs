//! Offloaded compaction (CoPro's "device" side, emulated near-data
//! processing): a plan's sub-tasks are shared between this process and a
//! compaction worker process (`strata compaction-worker --listen ADDR`)
//! reached over a Unix socket or loopback TCP. Both open the same table
//! directory ("shared files"): the worker reads the input tables and
//! writes its outputs under the file numbers the plan reserved for its
//! sub-task, and answers with their descriptors; the host installs every
//! output in one edit. Both sides name the rules they compact by
//! ([`RULES`]: the build and the version of what a compaction keeps and
//! drops) and refuse a peer that names others. The host checks what it
//! can without redoing the work (`check_outputs`): each output's number,
//! key range, order, size and properties, read from the table itself, and,
//! once every piece is in, that the entries written and dropped over the
//! whole plan add up to the inputs' (else the worker's pieces run here
//! again); it does not compare the entries themselves, so a worker that
//! follows other rules under the same name is caught only when it loses
//! entries without counting them.
//!
//! If the worker cannot be reached, times out, dies or answers garbage,
//! the host removes whatever the worker wrote under the reserved numbers
//! and runs the sub-task itself with fresh numbers. Anything the worker
//! still writes later is an orphan no version names, removed at the next
//! open.
//!
//! The wire format (`docs/FORMAT.md` §10) is framed:
//!
//! ```text
//! frame := magic "SCWK" | u8 version(2) | u8 op | u8 origin | u8 flags
//!        | u64 request_id | u32 payload_len | payload | u32 crc32c
//! ```
//! little-endian; the crc32c covers every byte before it. Ops: 1 compact
//! (host → worker), 2 result, 3 error (UTF-8 message), 4 metrics request,
//! 5 metrics. Origin: 0 host, 1 device (the paper's "type").

use super::job::{Job, Piece};
use super::{run_all, run_here, Context, Decision, Env, Executor, Mode, Outcome};
use crate::coding::{put_bytes, put_varint, Reader};
use crate::compaction::Plan;
use crate::error::{corrupt, Error, Result};
use crate::filename::table_path;
use crate::io::{FileSystem, PosixFs};
use crate::options::Options;
use crate::table::{BlockCache, TableOptions};
use crate::version::{FileDesc, FileMeta, TableCache, Version};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const MAGIC: [u8; 4] = *b"SCWK";
/// Frame version: 2 adds [`RULES`] to requests and replies.
pub const VERSION: u8 = 2;

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

/// How the worker runs its sub-task (a byte of the request).
fn mode_code(m: &Mode) -> u8 {
    match m {
        Mode::Linear => 0,
        Mode::Pipelined => 1,
        Mode::Decide(_) => 2,
    }
}

/// The large-value size the worker's decision uses: the paper's device
/// setting (16 KB), lower than the host's because the device's CPU gains
/// less from pipelining.
pub const DEVICE_LARGE_VALUE: u64 = 16 * 1024;

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
        if block_size == 0 || restart == 0 {
            return Err(bad(&r, "zero block size or restart interval"));
        }
        let table_opts = TableOptions {
            block_size: block_size as usize,
            restart_interval: restart as usize,
            bloom_bits_per_key: bloom as usize,
            compression,
            block_align,
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

/// A connection to a worker.
enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Stream {
    fn connect(addr: &str, timeout: Duration) -> Result<Stream> {
        let io = |e| Error::io("compaction worker", e);
        let s = match addr.strip_prefix("unix:") {
            Some(path) => {
                let s = std::os::unix::net::UnixStream::connect(path).map_err(io)?;
                s.set_read_timeout(Some(timeout)).map_err(io)?;
                s.set_write_timeout(Some(timeout)).map_err(io)?;
                Stream::Unix(s)
            }
            None => {
                let s = std::net::TcpStream::connect(addr).map_err(io)?;
                s.set_read_timeout(Some(timeout)).map_err(io)?;
                s.set_write_timeout(Some(timeout)).map_err(io)?;
                s.set_nodelay(true).map_err(io)?;
                Stream::Tcp(s)
            }
        };
        Ok(s)
    }

    /// Sends `frame` and reads the answer to it.
    fn call(&mut self, frame: &Frame) -> Result<Frame> {
        let bytes = frame.encode();
        let io = |e| Error::io("compaction worker", e);
        match self {
            Stream::Unix(s) => s.write_all(&bytes).map_err(io)?,
            Stream::Tcp(s) => s.write_all(&bytes).map_err(io)?,
        }
        let answer = match self {
            Stream::Unix(s) => Frame::read_from(s)?,
            Stream::Tcp(s) => Frame::read_from(s)?,
        };
        if answer.request_id != frame.request_id || answer.origin != Origin::Device {
            return Err(corrupt(0, "worker frame: answer to another request"));
        }
        Ok(answer)
    }
}

/// Asks the worker at `addr` for its metrics.
pub fn worker_metrics(addr: &str, timeout: Duration) -> Result<Vec<(u8, u64)>> {
    let mut s = Stream::connect(addr, timeout)?;
    let f = s.call(&Frame {
        op: Op::MetricsRequest,
        origin: Origin::Host,
        flags: 0,
        request_id: 1,
        payload: Vec::new(),
    })?;
    match f.op {
        Op::Metrics => decode_metrics(&f.payload),
        _ => Err(corrupt(0, "worker frame: expected metrics")),
    }
}

/// The `offload` executor: two sub-tasks, the first run here, the second
/// by the worker (the paper's static 50/50 split), both with the decision
/// component.
pub struct Offload {
    addr: String,
    timeout: Duration,
    mode: Mode,
    next_request: AtomicU64,
}

impl Offload {
    pub fn new(addr: &str, timeout: Duration, mode: Mode) -> Self {
        Offload {
            addr: addr.to_string(),
            timeout,
            mode,
            next_request: AtomicU64::new(1),
        }
    }

    /// Sends sub-task `i` of `job` to the worker and checks its answer.
    fn offload(&self, job: &Job<'_>, env: &Env<'_>, i: usize) -> Result<Piece> {
        // The worker's working directory is not ours: send an absolute path.
        let dir = std::fs::canonicalize(env.dir).unwrap_or_else(|_| env.dir.to_path_buf());
        let req = Request {
            rules: RULES.to_string(),
            dir,
            table_opts: env.table_opts,
            plan: job.plan.clone(),
            subtask: i,
            inputs: job.inputs.iter().map(|f| f.desc.clone()).collect(),
            next: job.next.iter().map(|f| f.desc.clone()).collect(),
            deeper: job.deeper.clone(),
            grandparents: job.grandparents.clone(),
            mode: mode_code(&self.mode),
            threshold: match &self.mode {
                Mode::Decide(d) => d.threshold,
                _ => 0.7,
            },
        };
        let frame = Frame {
            op: Op::Compact,
            origin: Origin::Host,
            flags: 0,
            request_id: self.next_request.fetch_add(1, Ordering::Relaxed),
            payload: req.encode(),
        };
        let answer = Stream::connect(&self.addr, self.timeout)?.call(&frame)?;
        match answer.op {
            Op::Result => {}
            Op::Error => {
                return Err(Error::io(
                    "compaction",
                    std::io::Error::other(format!(
                        "compaction worker: {}",
                        String::from_utf8_lossy(&answer.payload)
                    )),
                ))
            }
            _ => return Err(corrupt(0, "worker frame: unexpected op")),
        }
        let reply = Reply::decode(&answer.payload)?;
        if reply.rules != RULES {
            return Err(corrupt(
                0,
                format!(
                    "compaction worker: it compacts by {:?}, this host by {RULES:?}",
                    reply.rules
                ),
            ));
        }
        check_outputs(job, env, i, &reply)?;
        let us = |m: u64| Duration::from_micros(m);
        Ok(Piece {
            descs: reply.descs,
            bytes_written: reply.bytes_written,
            dropped: reply.dropped,
            busy: reply.busy_micros.map(us),
            cpu: us(reply.cpu_micros),
            pipelined: reply.pipelined,
            offloaded: true,
            ..Piece::default()
        })
    }
}

/// Checks what a worker reports about sub-task `i`'s outputs: each one
/// must carry a reserved number (once), lie inside the sub-task's range and
/// the plan's, follow the previous one in key order, and be a readable
/// table on disk whose size and properties (key bounds, entries,
/// deletions, newest sequence) are what the descriptor says; the bytes
/// written must add up. Any mismatch fails the sub-task, which then runs
/// on the host, before anything reaches the version. The entries
/// themselves are not compared with the inputs' (`Offload::recount`
/// checks their number over the whole plan).
fn check_outputs(job: &Job<'_>, env: &Env<'_>, i: usize, reply: &Reply) -> Result<()> {
    let bad =
        |d: &FileDesc, why: &str| corrupt(0, format!("compaction worker: output {}: {why}", d.id));
    let reserved = job.plan.assigned.numbers(i);
    let (lo, hi) = job.plan.assigned.range(i);
    let all = || job.inputs.iter().chain(&job.next);
    let plan_lo = all()
        .map(|f| f.smallest_user_key())
        .min()
        .unwrap_or_default();
    let plan_hi = all()
        .map(|f| f.largest_user_key())
        .max()
        .unwrap_or_default();
    let mut prev: Option<&[u8]> = None;
    let mut total = 0u64;
    for d in &reply.descs {
        let (s, l) = (
            crate::types::user_key(&d.smallest),
            crate::types::user_key(&d.largest),
        );
        if !reserved.contains(&d.id) {
            return Err(bad(d, "number outside the reserved range"));
        }
        if s > l
            || s < plan_lo
            || l > plan_hi
            || lo.is_some_and(|lo| s < lo)
            || hi.is_some_and(|hi| l >= hi)
        {
            return Err(bad(d, "keys outside the sub-task"));
        }
        if prev.is_some_and(|p| p >= s) {
            return Err(bad(d, "out of key order"));
        }
        prev = Some(l);
        total = total.saturating_add(d.size);
        let path = table_path(env.dir, d.id);
        let file = env.fs.open_random(&path)?;
        if file.len() != d.size {
            return Err(bad(d, "size on disk differs"));
        }
        let t = crate::table::Table::open(file, path, d.id, Arc::new(BlockCache::new(0)), true)?;
        let p = t.properties();
        if p.smallest != d.smallest
            || p.largest != d.largest
            || p.entries != d.entries
            || p.deletions != d.deletions
            || p.max_seq != d.max_seq
        {
            return Err(bad(d, "properties differ from the descriptor"));
        }
    }
    if total != reply.bytes_written {
        return Err(corrupt(0, "compaction worker: output sizes do not add up"));
    }
    Ok(())
}

/// Removes the table files under `numbers` (what a failed worker may have
/// left).
fn remove_range(dir: &Path, fs: &dyn FileSystem, numbers: std::ops::Range<u64>) {
    for id in numbers {
        let _ = fs.remove_file(&table_path(dir, id));
    }
}

impl Executor for Offload {
    fn run(
        &self,
        plan: &Plan,
        version: &Version,
        ctx: &Context<'_>,
    ) -> Result<(crate::version::Edit, Outcome)> {
        let job = Job::resolve(plan, version)?;
        if job.is_move() {
            return Ok((job.move_edit(), Outcome::default()));
        }
        let env = ctx.env();
        let n = plan.assigned.subtasks();
        let pieces = run_all(n, &env, ctx.fs.as_ref(), |i| {
            let own = plan.assigned.numbers(i);
            // With stale tracking the host keeps every sub-task: the update
            // table lives here, and a worker could not drop stale versions
            // or tell where the tracked ones went.
            if i == 0 || !self.offloads(plan, env.stale.is_some()) {
                return run_here(&job, &env, i, own, &self.mode, ctx.more_numbers);
            }
            match self.offload(&job, &env, i) {
                Ok(p) => Ok(p),
                Err(_) => {
                    remove_range(env.dir, ctx.fs.as_ref(), own);
                    // The worker may still be writing under its numbers:
                    // fresh ones only.
                    let mut p = run_here(&job, &env, i, 0..0, &self.mode, ctx.more_numbers)?;
                    p.fell_back = true;
                    Ok(p)
                }
            }
        })?;
        let pieces = self.recount(&job, &env, ctx, pieces)?;
        Ok(job.finish(pieces))
    }

    fn subtasks(&self) -> usize {
        2
    }

    fn offloads(&self, plan: &Plan, tracking: bool) -> bool {
        // A worker reads tables, not the matrix container's rows.
        plan.assigned.subtasks() > 1 && !tracking && plan.rows.is_empty()
    }
}

impl Offload {
    /// Checks that the plan's pieces account for every input entry (each
    /// is written or dropped, whichever side ran it: `check_outputs`
    /// cannot, since a sub-task reads only part of its tables). When they
    /// do not, the pieces a worker ran are removed and run here again,
    /// with fresh numbers; what this host runs is trusted as every other
    /// executor's is.
    fn recount(
        &self,
        job: &Job<'_>,
        env: &Env<'_>,
        ctx: &Context<'_>,
        mut pieces: Vec<Piece>,
    ) -> Result<Vec<Piece>> {
        if !pieces.iter().any(|p| p.offloaded) {
            return Ok(pieces);
        }
        let read: u64 = job
            .inputs
            .iter()
            .chain(&job.next)
            .map(|f| f.desc.entries)
            .sum();
        let accounted: u64 = pieces
            .iter()
            .map(|p| {
                let written: u64 = p.descs.iter().map(|d| d.entries).sum();
                written + p.dropped + p.stale_dropped
            })
            .sum();
        if accounted == read {
            return Ok(pieces);
        }
        for (i, p) in pieces.iter_mut().enumerate() {
            if !p.offloaded {
                continue;
            }
            remove_range(env.dir, ctx.fs.as_ref(), job.plan.assigned.numbers(i));
            let mut local = run_here(job, env, i, 0..0, &self.mode, ctx.more_numbers)?;
            local.fell_back = true;
            *p = local;
        }
        Ok(pieces)
    }
}

/// Figures a worker keeps.
#[derive(Default)]
struct WorkerStats {
    subtasks: AtomicU64,
    cpu_micros: AtomicU64,
    bytes_written: AtomicU64,
    failures: AtomicU64,
    /// Connections being served.
    connections: AtomicU64,
}

/// Runs one request in this (worker) process.
fn serve_request(req: Request, cfg: &WorkerConfig) -> Result<Reply> {
    if req.rules != RULES {
        return Err(Error::NotSupported(format!(
            "this worker compacts by {RULES:?}, the host by {:?}",
            req.rules
        )));
    }
    if !cfg.allow.is_empty() && !cfg.allow.iter().any(|a| req.dir.starts_with(a)) {
        return Err(Error::InvalidArgument(format!(
            "directory {} is not under an --allow directory",
            req.dir.display()
        )));
    }
    let fs: Arc<dyn FileSystem> = cfg.fs.0.clone();
    let opts = Options::default().fs(fs.clone());
    let cache = Arc::new(TableCache::new(
        &req.dir,
        &opts,
        Arc::new(BlockCache::new(8 << 20)),
    ));
    let metas = |descs: &[FileDesc]| -> Vec<Arc<FileMeta>> {
        descs
            .iter()
            .map(|d| Arc::new(FileMeta::new(d.clone(), cache.clone())))
            .collect()
    };
    let (inputs, next) = (metas(&req.inputs), metas(&req.next));
    if !req.plan.rows.is_empty() {
        return Err(Error::InvalidArgument(
            "a compaction worker does not read matrix rows".into(),
        ));
    }
    let job = Job {
        plan: &req.plan,
        inputs,
        next,
        rows: Vec::new(),
        deeper: req.deeper,
        grandparents: req.grandparents,
    };
    let env = Env {
        dir: &req.dir,
        fs: &fs,
        table_opts: req.table_opts,
        collect_keys: false,
        // A worker process has no flushes to give way to.
        give_way: &|| {},
        stale: None,
    };
    let mode = match req.mode {
        0 => Mode::Linear,
        1 => Mode::Pipelined,
        _ => Mode::Decide(Decision::new(
            0.0,
            0.0,
            1.0,
            req.threshold,
            DEVICE_LARGE_VALUE,
        )),
    };
    let piece = super::run_bounded(&job, &env, req.subtask, &mode, true)?;
    Ok(Reply {
        rules: RULES.to_string(),
        descs: piece.descs,
        bytes_written: piece.bytes_written,
        dropped: piece.dropped,
        busy_micros: piece.busy.map(|d| d.as_micros() as u64),
        cpu_micros: piece.cpu.as_micros() as u64,
        pipelined: piece.pipelined,
    })
}

fn answer(stats: &WorkerStats, cfg: &WorkerConfig, f: Frame) -> Frame {
    let reply = |op: Op, payload: Vec<u8>| Frame {
        op,
        origin: Origin::Device,
        flags: 0,
        request_id: f.request_id,
        payload,
    };
    match f.op {
        Op::Compact => match Request::decode(&f.payload).and_then(|r| serve_request(r, cfg)) {
            Ok(r) => {
                stats.subtasks.fetch_add(1, Ordering::Relaxed);
                stats.cpu_micros.fetch_add(r.cpu_micros, Ordering::Relaxed);
                stats
                    .bytes_written
                    .fetch_add(r.bytes_written, Ordering::Relaxed);
                reply(Op::Result, r.encode())
            }
            Err(e) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                reply(Op::Error, e.to_string().into_bytes())
            }
        },
        Op::MetricsRequest => {
            let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
            reply(
                Op::Metrics,
                encode_metrics(&[
                    (METRIC_SUBTASKS, g(&stats.subtasks)),
                    (METRIC_CPU_MICROS, g(&stats.cpu_micros)),
                    (METRIC_BYTES_WRITTEN, g(&stats.bytes_written)),
                    (METRIC_FAILURES, g(&stats.failures)),
                ]),
            )
        }
        _ => reply(Op::Error, b"unexpected op".to_vec()),
    }
}

/// How a worker runs.
#[derive(Debug, Clone, Default)]
pub struct WorkerConfig {
    /// Wait this long between finishing a sub-task and answering (tests
    /// use it to kill a worker whose outputs are on disk but unreported).
    pub reply_delay: Duration,
    /// Run only on these CPUs (sched_setaffinity), to mimic a weaker
    /// device; empty: anywhere.
    pub cpus: Vec<usize>,
    /// Serve only requests for table directories under one of these
    /// (absolute paths); empty: any directory this user may write.
    pub allow: Vec<PathBuf>,
    /// The file system the worker reads input tables from and writes its
    /// outputs to: the operating system's by default; a worker serving a
    /// host that keeps its files elsewhere (a test's `MemFs`) is given the
    /// host's.
    pub fs: WorkerFs,
}

/// The file system of a [`WorkerConfig`].
#[derive(Clone, Debug)]
pub struct WorkerFs(pub Arc<dyn FileSystem>);

impl Default for WorkerFs {
    fn default() -> Self {
        WorkerFs(Arc::new(PosixFs))
    }
}

/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;
/// A connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(600);

/// Serves one connection: frames until the peer closes it or sends garbage.
fn serve_connection<S: Read + Write>(stats: &WorkerStats, cfg: &WorkerConfig, mut s: S) {
    while let Ok(f) = Frame::read_from(&mut s) {
        let a = answer(stats, cfg, f);
        if a.op == Op::Result {
            std::thread::sleep(cfg.reply_delay);
        }
        if s.write_all(&a.encode()).is_err() {
            return;
        }
    }
}

/// Restricts this process to `cpus`.
fn pin(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus {
        if *c >= libc::CPU_SETSIZE as usize {
            return Err(Error::InvalidArgument(format!("no CPU {c}")));
        }
        // SAFETY: `c` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(*c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is
    // the calling thread (threads spawned later inherit the mask).
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(Error::io(
            "sched_setaffinity",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Serves `conn` on its own thread, unless [`MAX_CONNECTIONS`] are served.
fn spawn_connection<S: Read + Write + Send + 'static>(
    stats: &Arc<WorkerStats>,
    cfg: &WorkerConfig,
    conn: S,
) {
    if stats.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS as u64 {
        stats.connections.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let (stats, cfg) = (stats.clone(), cfg.clone());
    std::thread::spawn(move || {
        serve_connection(&stats, &cfg, conn);
        stats.connections.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Runs a compaction worker on `addr` (`unix:PATH` or `HOST:PORT`) until
/// the process ends: one thread per connection. `ready` is called once
/// the socket listens.
pub fn serve(addr: &str, cfg: &WorkerConfig, ready: impl FnOnce()) -> Result<()> {
    pin(&cfg.cpus)?;
    let stats = Arc::new(WorkerStats::default());
    let io = |e| Error::io("compaction worker", e);
    match addr.strip_prefix("unix:") {
        Some(path) => {
            // A stale socket of an earlier worker goes; anything else stays.
            if std::fs::symlink_metadata(path)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            {
                let _ = std::fs::remove_file(path);
            }
            let l = std::os::unix::net::UnixListener::bind(path).map_err(io)?;
            ready();
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                if conn.set_read_timeout(Some(IDLE)).is_ok() {
                    spawn_connection(&stats, cfg, conn);
                }
            }
        }
        None => {
            // A request names a directory to write tables into: only this
            // machine may send one.
            let loopback = std::net::ToSocketAddrs::to_socket_addrs(addr)
                .map_err(io)?
                .all(|a| a.ip().is_loopback());
            if !loopback {
                return Err(Error::InvalidArgument(format!(
                    "compaction worker: {addr} is not a loopback address (use unix:PATH or 127.0.0.1:PORT)"
                )));
            }
            let l = std::net::TcpListener::bind(addr).map_err(io)?;
            ready();
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let _ = conn.set_nodelay(true);
                if conn.set_read_timeout(Some(IDLE)).is_ok() {
                    spawn_connection(&stats, cfg, conn);
                }
            }
        }
    }
    Ok(())
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

    /// A request for the whole of a small merge plan, naming `rules`.
    fn request(rules: &str) -> Request {
        use crate::compaction::{Assignment, PlanKind, Trigger};
        let desc = |id: u64| FileDesc {
            id,
            size: 4096,
            smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
            largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
            entries: 10,
            deletions: 0,
            max_seq: 9,
        };
        Request {
            rules: rules.to_string(),
            dir: "/nonexistent/strata-db".into(),
            table_opts: TableOptions::default(),
            plan: Plan {
                kind: PlanKind::Merge,
                level: 0,
                output_level: 1,
                inputs: vec![4],
                next_inputs: vec![],
                target_file_size: 1 << 20,
                bottommost: true,
                compact_pointer: Vec::new(),
                trigger: Trigger::Size,
                rows: Vec::new(),
                assigned: Assignment {
                    snapshots: vec![],
                    splits: vec![],
                    first_file_number: 30,
                    file_numbers: 4,
                },
            },
            subtask: 0,
            inputs: vec![desc(4)],
            next: vec![],
            deeper: vec![],
            grandparents: vec![],
            mode: 0,
            threshold: 0.7,
        }
    }

    #[test]
    fn a_worker_refuses_a_host_that_compacts_by_other_rules() {
        // Before the rules were named, a worker of another build compacted
        // whatever it was sent, by its own rules.
        let stats = WorkerStats::default();
        let cfg = WorkerConfig::default();
        let frame = |req: &Request| Frame {
            op: Op::Compact,
            origin: Origin::Host,
            flags: 0,
            request_id: 3,
            payload: req.encode(),
        };
        let other = request("strata 0.0.1, compaction rules 0");
        assert_eq!(Request::decode(&other.encode()).ok(), Some(other.clone()));
        let a = answer(&stats, &cfg, frame(&other));
        assert_eq!(a.op, Op::Error);
        let msg = String::from_utf8_lossy(&a.payload).to_string();
        assert!(msg.contains("compaction rules 0"), "{msg}");
        // The same request by this build's rules gets past that check (and
        // fails on the missing directory instead).
        let a = answer(&stats, &cfg, frame(&request(RULES)));
        let msg = String::from_utf8_lossy(&a.payload).to_string();
        assert!(!msg.contains("compacts by"), "{msg}");
        assert_eq!(stats.failures.load(Ordering::Relaxed), 2);
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
