//! What the KVell preset needs beyond runs: every child's memory capped to
//! the same budget by a cgroup (v1 `memory.limit_in_bytes` or v2
//! `memory.max`), so that page-cache reads count against each engine
//! alike, and the device's own 4 KiB random read/write ceilings, measured
//! with the same io_uring (or pread) path KVell uses, O_DIRECT.

use crate::BenchError;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use strata::kvell::io::{self as kio, AlignedBuf, Req, Submitted};

/// A memory cgroup for the benchmark's children.
#[derive(Debug)]
pub struct MemoryCap {
    dir: PathBuf,
    /// The file a child's pid is written to.
    procs: PathBuf,
    pub bytes: u64,
    pub how: String,
}

impl MemoryCap {
    /// A fresh cgroup limited to `bytes`, or why none could be made.
    pub fn new(bytes: u64) -> Result<MemoryCap, String> {
        let name = format!("strata-bench-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (dir, limit_file, how) = if v1.join("memory.limit_in_bytes").exists() {
            (
                v1.join(&name),
                "memory.limit_in_bytes",
                "cgroup v1 memory.limit_in_bytes",
            )
        } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
        {
            (
                Path::new("/sys/fs/cgroup").join(&name),
                "memory.max",
                "cgroup v2 memory.max",
            )
        } else {
            return Err("no memory cgroup controller on this machine".into());
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let limit = dir.join(limit_file);
        std::fs::write(&limit, bytes.to_string()).map_err(|e| {
            let _ = std::fs::remove_dir(&dir);
            format!("{}: {e}", limit.display())
        })?;
        Ok(MemoryCap {
            procs: dir.join("cgroup.procs"),
            dir,
            bytes,
            how: how.into(),
        })
    }

    /// The file a process writes its pid to in order to enter the cgroup.
    pub fn procs(&self) -> &Path {
        &self.procs
    }

    /// Moves process `pid` (a child just started) into the cgroup.
    pub fn enter(&self, pid: u32) -> Result<(), String> {
        std::fs::write(&self.procs, pid.to_string())
            .map_err(|e| format!("{}: {e}", self.procs.display()))
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The device's 4 KiB random I/O ceilings (O_DIRECT where allowed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Ceilings {
    /// `io_uring` or `pread`.
    pub backend: String,
    pub direct: bool,
    pub file_mib: u64,
    pub read_qd1_iops: f64,
    pub read_qd64_iops: f64,
    pub write_qd1_iops: f64,
    pub write_qd64_iops: f64,
}

/// Measures the ceilings on a `file_mib` MiB file in `dir` (written first),
/// each pattern for `secs` seconds.
pub fn measure(dir: &Path, file_mib: u64, secs: f64) -> Result<Ceilings, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::Io(dir.to_path_buf(), e))?;
    let path = dir.join("ceilings.dat");
    let io_err = |e| BenchError::Io(path.clone(), e);
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&path)
    };
    let (file, direct) = match open(true) {
        Ok(f) => (f, true),
        Err(_) => (open(false).map_err(io_err)?, false),
    };
    let pages = file_mib * 256;
    {
        let mut chunk = AlignedBuf::zeroed(1 << 20);
        chunk.as_mut_slice().fill(0x5A);
        for i in 0..file_mib {
            std::os::unix::fs::FileExt::write_all_at(&file, chunk.as_slice(), i << 20)
                .map_err(io_err)?;
        }
        file.sync_all().map_err(io_err)?;
    }
    let mut out = Ceilings {
        direct,
        file_mib,
        ..Ceilings::default()
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for (qd, write) in [(1, false), (64, false), (1, true), (64, true)] {
        let mut io = kio::backend(strata::KvellIo::Auto, qd).map_err(BenchError::Engine)?;
        out.backend = io.name().into();
        let mut bufs: Vec<AlignedBuf> = (0..qd).map(|_| AlignedBuf::zeroed(4096)).collect();
        let mut counts = Submitted::default();
        let start = Instant::now();
        let mut done = 0u64;
        while start.elapsed() < Duration::from_secs_f64(secs) {
            let offs: Vec<u64> = (0..qd).map(|_| rng.gen_range(0..pages) * 4096).collect();
            let mut reqs: Vec<Req<'_>> = bufs
                .iter_mut()
                .zip(&offs)
                .map(|(buf, &offset)| Req {
                    file: &file,
                    path: &path,
                    offset,
                    buf,
                })
                .collect();
            if write {
                io.write(&mut reqs, &mut counts)?;
            } else {
                io.read(&mut reqs, &mut counts)?;
            }
            done += qd as u64;
        }
        let iops = done as f64 / start.elapsed().as_secs_f64();
        match (qd, write) {
            (1, false) => out.read_qd1_iops = iops,
            (_, false) => out.read_qd64_iops = iops,
            (1, true) => out.write_qd1_iops = iops,
            _ => out.write_qd64_iops = iops,
        }
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(out)
}
