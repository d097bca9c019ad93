//! The advice table maps get at open (`Options::mmap_huge`,
//! `Options::mmap_random`), read back from the kernel's view of this
//! process (`/proc/self/smaps`: `hg` = `MADV_HUGEPAGE`, `rr` =
//! `MADV_RANDOM`).
#![cfg(target_os = "linux")]

use std::path::Path;
use strata::{Db, Options};

/// The `VmFlags` of every map of a table file under `dir`.
fn table_map_flags(dir: &Path) -> Vec<Vec<String>> {
    // The kernel shows the resolved path.
    let dir = dir.canonicalize().expect("canonical dir");
    let dir = dir.to_string_lossy().into_owned();
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut out = Vec::new();
    let mut in_table = false;
    for line in smaps.lines() {
        // A map's header line: "start-end perms offset dev inode [path]".
        let header = line.split_whitespace().next().is_some_and(|f| {
            f.contains('-') && f.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        });
        if header {
            in_table = line.contains(&dir) && line.contains(".table");
        } else if in_table {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                out.push(flags.split_whitespace().map(str::to_owned).collect());
            }
        }
    }
    out
}

/// Writes a few tables and reads a key from each, so the table cache maps
/// them; returns the flags of their maps.
fn flags_with(opts: Options) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), opts).expect("open");
    for t in 0..3u32 {
        for i in 0..2000u32 {
            db.put(format!("key{t}-{i:05}"), [7u8; 100]).expect("put");
        }
        db.flush().expect("flush");
    }
    for t in 0..3u32 {
        assert_eq!(
            db.get(format!("key{t}-00042")).expect("get"),
            Some(vec![7u8; 100])
        );
    }
    let flags = table_map_flags(dir.path());
    db.close().expect("close");
    assert!(!flags.is_empty(), "no table map found");
    flags
}

fn has(flags: &[Vec<String>], flag: &str) -> bool {
    flags.iter().all(|f| f.iter().any(|x| x == flag))
}

fn none_has(flags: &[Vec<String>], flag: &str) -> bool {
    flags.iter().all(|f| f.iter().all(|x| x != flag))
}

/// Whether the page cache of files in `dir` holds large folios, derived
/// here from the file system's type and the kernel's release: XFS from
/// Linux 5.18, ext4 from 6.16 (the engine advises huge pages only there).
fn large_folios(dir: &Path) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut nums = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let version = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a NUL-terminated path and a writable `statfs` the call fills.
    let rc = unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) };
    assert_eq!(rc, 0, "statfs: {}", std::io::Error::last_os_error());
    // SAFETY: `statfs` succeeded and filled it.
    let kind = unsafe { st.assume_init() }.f_type as u64;
    match kind {
        0x5846_5342 => version >= (5, 18),
        0xef53 => version >= (6, 16),
        _ => false,
    }
}

#[test]
fn table_maps_are_advised_as_the_options_say() {
    // A kernel without transparent huge pages refuses the advice; a file
    // system without large folios is not given it.
    let thp = Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    let huge = flags_with(Options::default().mmap_huge(true));
    if thp && large_folios(&std::env::temp_dir()) {
        assert!(has(&huge, "hg"), "maps not advised huge: {huge:?}");
    } else {
        assert!(none_has(&huge, "hg"), "{huge:?}");
    }
    assert!(none_has(&huge, "rr"), "{huge:?}");

    // The default: neither.
    let plain = flags_with(Options::default());
    assert!(none_has(&plain, "hg"), "{plain:?}");
    assert!(none_has(&plain, "rr"), "{plain:?}");

    // Random advice wins over huge pages (a fault then reads its own page).
    let random = flags_with(Options::default().mmap_huge(true).mmap_random(true));
    assert!(has(&random, "rr"), "{random:?}");
    assert!(none_has(&random, "hg"), "{random:?}");
}
