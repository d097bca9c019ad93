//! The options reference (`docs/OPTIONS.md`), rendered from the options
//! table; a test keeps the file equal to it.

use super::Options;
use std::fmt::Write as _;

impl Options {
    /// The options reference in Markdown: every option of
    /// [`Options::TABLE`] with its type, default, accepted range, RocksDB
    /// name and doc, in table order.
    pub fn reference() -> String {
        let defaults = Options::default();
        let mut s = String::from(
            "# Options\n\n\
             Generated from the options table in `crates/strata/src/options/mod.rs` \
             (`cargo test -p strata --lib options::reference` checks this file; \
             `STRATA_BLESS=1` rewrites it). Set an option in Rust with its builder \
             method (`Options::default().write_buffer_size(4 << 20)`), as text with \
             `Options::set`/`apply` (`write_buffer_size=4M,compression=lz4`: what the \
             command line's `--opt`, the C ABI's `strata_options_set` and the \
             benchmark's engine specs take), and read one back with `Options::get`. \
             Sizes take `K`, `M` and `G` suffixes (powers of 1024); flags \
             `true|on|1|false|off|0`.\n",
        );
        for o in Options::TABLE {
            let default = defaults.get(o.name).unwrap_or_default();
            let _ = write!(
                s,
                "\n## `{}`\n\n`{}`, default `{}`",
                o.name,
                o.ty,
                show(&default)
            );
            if let Some(mib) = human(o.ty, &default) {
                let _ = write!(s, " ({mib})");
            }
            if !o.range.is_empty() {
                let _ = write!(s, ", accepted `{}`", o.range);
            }
            if let Some(r) = o.rocksdb {
                let _ = write!(s, "; RocksDB: `{r}`");
            }
            if o.field != o.name {
                let _ = write!(s, "; field `Options::{}`", o.field);
            }
            s.push_str(".\n\n");
            for line in o.doc.lines() {
                let _ = writeln!(s, "{}", line.strip_prefix(' ').unwrap_or(line));
            }
        }
        s
    }
}

/// An empty value printed so that it shows.
fn show(v: &str) -> &str {
    if v.is_empty() {
        "\"\""
    } else {
        v
    }
}

/// A size default in KiB, MiB or GiB when it is a whole number of them.
fn human(ty: &str, v: &str) -> Option<String> {
    if ty != "usize" && ty != "u64" {
        return None;
    }
    let n: u64 = v.parse().ok()?;
    [(30, "GiB"), (20, "MiB"), (10, "KiB")]
        .into_iter()
        .find(|&(shift, _)| n >= 1 << shift && n.is_multiple_of(1 << shift))
        .map(|(shift, unit)| format!("{} {unit}", n >> shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/OPTIONS.md` is the table rendered; `STRATA_BLESS=1` rewrites
    /// it after a change to the table.
    #[test]
    fn the_reference_is_the_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/OPTIONS.md");
        let want = Options::reference();
        if std::env::var_os("STRATA_BLESS").is_some() {
            std::fs::write(&path, &want).expect("write docs/OPTIONS.md");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/OPTIONS.md differs from the options table; rerun with STRATA_BLESS=1"
        );
    }

    #[test]
    fn every_option_is_documented_and_reads_back() {
        let d = Options::default();
        for o in Options::TABLE {
            assert!(!o.doc.trim().is_empty(), "{} has no doc", o.name);
            let v = d.get(o.name).expect("a listed option has a value");
            let mut p = Options::default();
            p.set(o.name, &v).expect("a default reads back");
            assert_eq!(p.get(o.name), Some(v), "{}", o.name);
        }
        assert_eq!(human("u64", "67108864").as_deref(), Some("64 MiB"));
        assert_eq!(human("usize", "100"), None);
    }
}
