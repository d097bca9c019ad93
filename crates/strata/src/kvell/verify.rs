//! `strata verify` of a KVell store: the `KVELL` file, then every slab's
//! header page and every slot's checksum. Every slot that does not decode is
//! reported: one a crash tore reads as damaged until the next open erases it
//! (when an intact version of its key explains it); any other stays on disk,
//! and so in every later report, until its key is written or deleted or an
//! open with `kvell_on_damage=reclaim` drops it (`worker/recover.rs`).

use super::format::{self, Bad, Class};
use super::scan;
use crate::error::{Error, Result};
use crate::filename::FileKind;
use crate::report::{FileReport, VerifyReport};
use std::path::Path;

/// Checks every file of the KVell store in `dir` (read-only).
pub fn verify_dir(dir: &Path) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let meta = dir.join(format::META_FILE);
    let bytes = std::fs::read(&meta).map_err(|e| Error::io(&meta, e))?;
    let workers = format::decode_meta(&bytes, &meta);
    report.files.push(FileReport {
        kind: FileKind::KvellMeta,
        name: format::META_FILE.into(),
        entries: 1,
        bytes: bytes.len() as u64,
        error: workers.as_ref().err().cloned(),
    });
    let Ok(workers) = workers else {
        return Ok(report);
    };
    let mut names: Vec<(u32, u32, String)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((w, c)) = format::parse_slab_name(&name) {
            names.push((w, c, name));
        }
    }
    names.sort();
    for (w, c, name) in names {
        let path = dir.join(&name);
        report.files.push(verify_slab(&path, &name, w, workers, c));
    }
    Ok(report)
}

fn verify_slab(path: &Path, name: &str, worker: u32, workers: u32, class: u32) -> FileReport {
    let mut r = FileReport {
        kind: FileKind::Slab,
        name: name.into(),
        entries: 0,
        bytes: 0,
        error: None,
    };
    let run = |r: &mut FileReport| -> Result<()> {
        if worker >= workers {
            return Err(Error::Corruption {
                file: path.to_path_buf(),
                offset: 0,
                reason: format!("worker {worker} of a store with {workers} workers"),
            });
        }
        let c = Class::of(class as usize).ok_or_else(|| Error::Corruption {
            file: path.to_path_buf(),
            offset: 0,
            reason: format!("no size class {class}"),
        })?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        r.bytes = len;
        scan::check_header(&file, path, len, worker, workers, class)?;
        let mut first_bad = None;
        let (mut entries, mut bad) = (0, 0u64);
        scan::scan_slab(&file, path, len, c, |slot, _, decoded| match decoded {
            Ok(s) if s.ts >= super::worker::MAX_TS => {
                bad += 1;
                first_bad.get_or_insert((slot, "timestamp out of range"));
            }
            Ok(_) => entries += 1,
            Err(Bad::Empty) => {}
            Err(Bad::Damaged(why)) => {
                bad += 1;
                first_bad.get_or_insert((slot, why));
            }
        })?;
        r.entries = entries;
        if let Some((slot, why)) = first_bad {
            let (page, off) = c.locate(slot);
            return Err(Error::Corruption {
                file: path.to_path_buf(),
                offset: page * format::PAGE as u64 + off as u64,
                reason: format!(
                    "{bad} slots do not decode; the first, slot {slot}: {why} (torn by a \
                     crash, which the next open erases if an intact version of its key \
                     explains it; else damaged, kept and reported by every open)"
                ),
            });
        }
        Ok(())
    };
    if let Err(e) = run(&mut r) {
        r.error = Some(e);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::KvStore;

    #[test]
    fn verify_finds_a_flipped_byte() -> Result<()> {
        let d = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let mut o = crate::Options::default();
        o.apply("engine=kvell,kvell_workers=2")?;
        let s = super::super::Kvell::open(d.path(), o)?;
        for i in 0..100u32 {
            s.put(format!("k{i}").as_bytes(), &[7u8; 300])?;
        }
        s.close()?;
        let r = super::verify_dir(d.path())?;
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.files.iter().map(|f| f.entries).sum::<u64>(), 101);
        let slab = r
            .files
            .iter()
            .find(|f| f.kind == FileKind::Slab)
            .map(|f| d.path().join(&f.name))
            .ok_or_else(|| Error::InvalidArgument("no slab".into()))?;
        let mut b = std::fs::read(&slab).map_err(|e| Error::io(&slab, e))?;
        b[format::PAGE + 40] ^= 1;
        std::fs::write(&slab, &b).map_err(|e| Error::io(&slab, e))?;
        let r = super::verify_dir(d.path())?;
        assert_eq!(r.damaged().count(), 1, "{r}");
        Ok(())
    }
}
