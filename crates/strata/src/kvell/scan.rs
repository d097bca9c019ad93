//! Reading a whole slab file slot by slot: the open's recovery and `strata
//! verify` both walk slabs with it.

use super::format::{self, Bad, Class, Slot, PAGE};
use super::io::AlignedBuf;
use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The extent of a slab's data.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Data pages (after the header page), a torn tail page included.
    pub data_pages: u64,
    /// Slots those pages hold (a torn tail slot included).
    pub slots: u32,
    /// Bytes read.
    pub bytes: u64,
}

/// Reads the header page of a slab of `len` bytes and checks it.
pub fn check_header(
    file: &File,
    path: &Path,
    len: u64,
    worker: u32,
    workers: u32,
    class: u32,
) -> Result<()> {
    if len < PAGE as u64 {
        return Err(Error::Corruption {
            file: path.to_path_buf(),
            offset: 0,
            reason: "slab shorter than its header page".into(),
        });
    }
    let mut header = AlignedBuf::zeroed(PAGE);
    file.read_exact_at(header.as_mut_slice(), 0)
        .map_err(|e| Error::io(path, e))?;
    format::check_header(header.as_slice(), path, worker, workers, class)
}

/// Calls `visit(slot, bytes, decoded)` for every slot of the slab (`len`
/// bytes, header page first; `bytes` are the slot's), reading 256 KiB (or
/// one slot) at a time. Bytes past the end of the file read as zeros.
pub fn scan_slab(
    file: &File,
    path: &Path,
    len: u64,
    class: Class,
    mut visit: impl FnMut(u32, &[u8], std::result::Result<Slot<'_>, Bad>),
) -> Result<Shape> {
    let data_pages = len.saturating_sub(PAGE as u64).div_ceil(PAGE as u64);
    let slots = if class.pages == 1 {
        class.slots_in(data_pages)
    } else {
        data_pages.div_ceil(u64::from(class.pages))
    };
    let slots = u32::try_from(slots).map_err(|_| Error::Corruption {
        file: path.to_path_buf(),
        offset: 0,
        reason: "slab has more than 2^32 slots".into(),
    })?;
    let unit_bytes = class.pages as usize * PAGE;
    let per_chunk = (256 * 1024 / unit_bytes).max(1);
    let units = if class.pages == 1 {
        data_pages
    } else {
        u64::from(slots)
    };
    let per = class.per_page as usize;
    let mut bytes = 0u64;
    let mut u = 0u64;
    while u < units {
        let n = (per_chunk as u64).min(units - u) as usize;
        let mut buf = AlignedBuf::zeroed(n * unit_bytes);
        let off = PAGE as u64 + u * unit_bytes as u64;
        let avail = len.saturating_sub(off).min(buf.len() as u64) as usize;
        super::io::read_zero_filled(file, &mut buf.as_mut_slice()[..avail], off)
            .map_err(|e| Error::io(path, e))?;
        bytes += avail as u64;
        for i in 0..n {
            let unit = &buf.as_slice()[i * unit_bytes..(i + 1) * unit_bytes];
            for j in 0..per {
                let slot = if class.pages == 1 {
                    (u as usize + i) * per + j
                } else {
                    u as usize + i
                } as u32;
                let bytes = &unit[j * class.slot..(j + 1) * class.slot];
                visit(slot, bytes, format::decode_slot(bytes));
            }
        }
        u += n as u64;
    }
    Ok(Shape {
        data_pages,
        slots,
        bytes,
    })
}
