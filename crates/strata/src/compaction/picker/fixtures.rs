//! Data-driven picker tests: `testdata/picker.txt` holds cases of an LSM
//! shape (tables, stale scores, running compactions, tables in flight) and the plan
//! each picker must return. No disk: tables are descriptors only.
//!
//! ```text
//! case <name>
//! options <name=value,...>            (Options::apply; optional)
//! table L<level> <id> <lo>..<hi> size=<bytes> [entries=<n>] [stale=<n>] [misses=<n>]
//!       [seqs=<min>..<max>] [swept=<n>]
//! running L<level>->L<out> <lo>..<hi> [<id> ...]   (ids: its input tables)
//! inflight <id>
//! rangedel <lo>..<hi> seq=<n>          (a range tombstone of the version)
//! horizon <n>                          (the oldest readable sequence; default MAX_SEQ)
//! pick <leveled|stale|range-dels> => <plan>|none
//! ```
//! A plan prints as `<kind> L<level> [ids] -> L<out> [ids] <trigger>`,
//! plus ` bottommost` when set. Lines starting with `#` are comments.

use super::{Leveled, PickEnv, Picker, Stale};
use crate::compaction::scheduler::InFlight;
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::options::Options;
use crate::table::BlockCache;
use crate::types::{internal_key, ValueKind};
use crate::version::{FileDesc, FileMeta, TableCache, Version};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn show(plan: Option<Plan>) -> String {
    let Some(p) = plan else {
        return "none".to_string();
    };
    let kind = match p.kind {
        PlanKind::Move => "move",
        PlanKind::Merge => "merge",
        PlanKind::Rewrite => "rewrite",
        PlanKind::Drop => "drop",
    };
    let trigger = match p.trigger {
        Trigger::Size => "size",
        Trigger::Stale => "stale",
        Trigger::Manual => "manual",
        Trigger::Read => "read",
        Trigger::RangeDel => "range-del",
        Trigger::Expired => "expired",
    };
    let ids = |v: &[u64]| {
        let s: Vec<String> = v.iter().map(u64::to_string).collect();
        format!("[{}]", s.join(" "))
    };
    format!(
        "{kind} L{} {} -> L{} {} {trigger}{}",
        p.level,
        ids(&p.inputs),
        p.output_level,
        ids(&p.next_inputs),
        if p.bottommost { " bottommost" } else { "" }
    )
}

struct Case {
    name: String,
    opts: Options,
    tables: Vec<(usize, FileDesc)>,
    stale: HashMap<u64, u64>,
    /// Lookups charged to a table as having searched it in vain.
    misses: HashMap<u64, u64>,
    in_flight: InFlight,
    range_dels: Vec<crate::rangedel::RangeTombstone>,
    horizon: crate::types::SeqNo,
}

impl Case {
    fn new(name: &str) -> Self {
        Case {
            name: name.to_string(),
            opts: Options::default(),
            tables: Vec::new(),
            stale: HashMap::new(),
            misses: HashMap::new(),
            in_flight: InFlight::default(),
            range_dels: Vec::new(),
            horizon: crate::types::MAX_SEQ,
        }
    }

    /// The plan of `picker`, or of the range-tombstone picker for `None`.
    fn pick(&self, picker: Option<&dyn Picker>) -> Option<Plan> {
        let cache = Arc::new(TableCache::new(
            Path::new("/nowhere"),
            &self.opts,
            Arc::new(BlockCache::new(0)),
        ));
        let mut v = Version::new(self.opts.num_levels);
        for (level, d) in &self.tables {
            let f = Arc::new(FileMeta::new(d.clone(), cache.clone()));
            for _ in 0..self.misses.get(&d.id).copied().unwrap_or(0) {
                f.charge_miss();
            }
            v.levels[*level].push(f);
        }
        v.seal();
        v.range_dels = Arc::new(crate::rangedel::RangeDels::new(self.range_dels.clone()));
        let pointers = vec![Vec::new(); self.opts.num_levels];
        let env = PickEnv {
            version: &v,
            opts: &self.opts,
            in_flight: &self.in_flight,
            pointers: &pointers,
            stale: &self.stale,
            horizon: self.horizon,
            expired_to: 0,
        };
        match picker {
            Some(p) => p.pick(&env),
            None => super::range_dels::pick(&env, None),
        }
    }
}

fn level(s: &str) -> usize {
    s.strip_prefix('L')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad level {s:?}"))
}

fn number(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("bad number {s:?}"))
}

#[test]
fn picker_fixtures() {
    let text = include_str!("testdata/picker.txt");
    let mut case = Case::new("");
    let mut checked = 0;
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "case" => case = Case::new(rest),
            "options" => case.opts.apply(rest).expect("options"),
            "table" => {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (lo, hi) = f[2].split_once("..").expect("lo..hi");
                let mut d = FileDesc {
                    id: number(f[1]),
                    smallest: internal_key(lo.as_bytes(), 100, ValueKind::Value as u8),
                    largest: internal_key(hi.as_bytes(), 1, ValueKind::Value as u8),
                    entries: 100,
                    ..FileDesc::default()
                };
                for kv in &f[3..] {
                    let (k, val) = kv.split_once('=').expect("k=v");
                    match k {
                        "size" => d.size = number(val),
                        "entries" => d.entries = number(val),
                        "stale" => {
                            case.stale.insert(d.id, number(val));
                        }
                        "misses" => {
                            case.misses.insert(d.id, number(val));
                        }
                        "seqs" => {
                            let (a, b) = val.split_once("..").expect("min..max");
                            (d.min_seq, d.max_seq) = (number(a), number(b));
                        }
                        "swept" => d.swept_seq = number(val),
                        _ => panic!("line {}: unknown field {k}", lineno + 1),
                    }
                }
                case.tables.push((level(f[0]), d));
            }
            "running" => {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (from, to) = f[0].split_once("->").expect("L<a>->L<b>");
                let (lo, hi) = f[1].split_once("..").expect("lo..hi");
                let ids: Vec<u64> = f[2..].iter().map(|s| number(s)).collect();
                case.in_flight
                    .push(level(from), level(to), lo.as_bytes(), hi.as_bytes(), &ids);
            }
            "inflight" => {
                let l = case.tables.iter().find(|(_, d)| d.id == number(rest));
                let lvl = l.map_or(1, |(l, _)| *l);
                case.in_flight.push(lvl, lvl + 1, b"", b"", &[number(rest)]);
            }
            "rangedel" => {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (lo, hi) = f[0].split_once("..").expect("lo..hi");
                let seq = f[1].strip_prefix("seq=").expect("seq=<n>");
                case.range_dels.push(crate::rangedel::RangeTombstone {
                    start: lo.as_bytes().to_vec(),
                    end: hi.as_bytes().to_vec(),
                    seq: number(seq),
                });
            }
            "horizon" => case.horizon = number(rest),
            "pick" => {
                let (kind, want) = rest.split_once(" => ").expect("pick <kind> => <plan>");
                let picker: Option<&dyn Picker> = match kind {
                    "leveled" => Some(&Leveled),
                    "stale" => Some(&Stale),
                    "range-dels" => None,
                    _ => panic!("line {}: unknown picker {kind}", lineno + 1),
                };
                let got = show(case.pick(picker));
                assert_eq!(
                    got,
                    want,
                    "case {:?} (line {}), picker {kind}",
                    case.name,
                    lineno + 1
                );
                checked += 1;
            }
            _ => panic!("line {}: unknown directive {word}", lineno + 1),
        }
    }
    assert!(checked >= 10, "only {checked} expectations");
}
