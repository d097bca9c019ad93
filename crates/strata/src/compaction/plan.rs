//! The compaction plan: what to compact, as plain data.
//!
//! ```text
//! plan := u8 version(1) u8 kind varint(level) varint(output_level)
//!         varint(n) varint(id)*n   varint(m) varint(id)*m
//!         varint(target_file_size) u8 bottommost bytes(compact_pointer)
//! ```

use crate::coding::{put_bytes, put_varint, Reader};
use crate::error::{corrupt, Result};

/// How a plan is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Re-link the input files to the next level without rewriting them.
    Move = 0,
    /// Merge inputs into new tables.
    Merge = 1,
}

/// One compaction job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub kind: PlanKind,
    /// Level of `inputs`.
    pub level: usize,
    /// Level of `next_inputs` and of the outputs.
    pub output_level: usize,
    /// File ids taken from `level`.
    pub inputs: Vec<u64>,
    /// File ids taken from `output_level`.
    pub next_inputs: Vec<u64>,
    /// Outputs are cut near this size.
    pub target_file_size: u64,
    /// No level below `output_level` overlaps the inputs' key range.
    pub bottommost: bool,
    /// Largest internal key of the inputs: the level's next round-robin start.
    pub compact_pointer: Vec<u8>,
}

const PLAN_VERSION: u8 = 1;

impl Plan {
    /// All input file ids with their levels.
    pub fn all_inputs(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.inputs
            .iter()
            .map(|id| (self.level, *id))
            .chain(self.next_inputs.iter().map(|id| (self.output_level, *id)))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![PLAN_VERSION, self.kind as u8];
        put_varint(&mut b, self.level as u64);
        put_varint(&mut b, self.output_level as u64);
        for ids in [&self.inputs, &self.next_inputs] {
            put_varint(&mut b, ids.len() as u64);
            for id in ids {
                put_varint(&mut b, *id);
            }
        }
        put_varint(&mut b, self.target_file_size);
        b.push(u8::from(self.bottommost));
        put_bytes(&mut b, &self.compact_pointer);
        b
    }

    pub fn decode(buf: &[u8]) -> Result<Plan> {
        let mut r = Reader::new(buf);
        let bad = |r: &Reader<'_>, what: &str| {
            corrupt(r.pos() as u64, format!("compaction plan: {what}"))
        };
        if r.u8() != Some(PLAN_VERSION) {
            return Err(bad(&r, "unknown version"));
        }
        let kind = match r.u8() {
            Some(0) => PlanKind::Move,
            Some(1) => PlanKind::Merge,
            _ => return Err(bad(&r, "unknown kind")),
        };
        let small = |r: &mut Reader<'_>| r.varint().filter(|v| *v < 64).map(|v| v as usize);
        let level = small(&mut r).ok_or_else(|| bad(&r, "bad level"))?;
        let output_level = small(&mut r).ok_or_else(|| bad(&r, "bad level"))?;
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = r
                .varint()
                .filter(|n| *n <= 1 << 20)
                .ok_or_else(|| bad(&r, "bad count"))?;
            for _ in 0..n {
                list.push(r.varint().ok_or_else(|| bad(&r, "truncated id"))?);
            }
        }
        let [inputs, next_inputs] = lists;
        let target_file_size = r.varint().ok_or_else(|| bad(&r, "truncated size"))?;
        let bottommost = match r.u8() {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(bad(&r, "bad flag")),
        };
        let compact_pointer = r
            .len_prefixed()
            .ok_or_else(|| bad(&r, "truncated key"))?
            .to_vec();
        if !r.is_empty() {
            return Err(bad(&r, "trailing bytes"));
        }
        Ok(Plan {
            kind,
            level,
            output_level,
            inputs,
            next_inputs,
            target_file_size,
            bottommost,
            compact_pointer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trips_and_rejects_garbage() {
        let p = Plan {
            kind: PlanKind::Merge,
            level: 1,
            output_level: 2,
            inputs: vec![5],
            next_inputs: vec![7, 9],
            target_file_size: 1 << 20,
            bottommost: true,
            compact_pointer: b"abc".to_vec(),
        };
        let enc = p.encode();
        assert_eq!(Plan::decode(&enc).ok(), Some(p));
        for cut in 0..enc.len() {
            assert!(Plan::decode(&enc[..cut]).is_err());
        }
    }
}
