//! Column compactions (MatrixKV's column compaction): when the container
//! is due, which rows form the compacting group, and where the next
//! column ends. The plan around a column (the L1 tables it meets) is made
//! by `compaction`.

use super::{Matrix, RowRef, RowSlice};
use crate::l0::Levels;
use crate::options::Options;

/// The next column of `v`'s container, if it is due: L0 must hold no
/// tables (rows are newer than any table there), and the container must
/// have a compacting group or be at 2/3 of `matrix_capacity`. The caller
/// checks that no other L0 compaction runs.
pub fn pick_column(v: &dyn Levels, opts: &Options) -> Option<Vec<RowSlice>> {
    let m = v.rows();
    if m.is_empty() || !v.tables(0).is_empty() {
        return None;
    }
    let group = match compacting(m) {
        Some(g) => g,
        None if m.remaining_bytes().saturating_mul(3) >= opts.matrix.capacity.saturating_mul(2) => {
            m.rows.iter().collect()
        }
        None => return None,
    };
    column_of(v, opts.matrix.column_bytes, &group)
}

/// The compacting group, if there is one.
fn compacting(m: &Matrix) -> Option<Vec<&RowRef>> {
    let group: Vec<&RowRef> = m.rows.iter().filter(|r| r.compacting).collect();
    (!group.is_empty()).then_some(group)
}

/// A column of every row of the container at once (manual compaction),
/// or `None` when it is empty.
pub fn pick_all(v: &dyn Levels) -> Option<Vec<RowSlice>> {
    let m = v.rows();
    let group = compacting(m).unwrap_or_else(|| m.rows.iter().collect());
    column_of(v, u64::MAX, &group)
}

/// The next column of `group`: from the rows' cursors up to the first L1
/// table boundary where the column's bytes (row cells plus L1 tables)
/// reach `target`; past the last L1 table, cut where the row with the most
/// bytes there reaches its share of what is left of the target. `None`
/// when the column would hold no cell.
fn column_of(v: &dyn Levels, target: u64, group: &[&RowRef]) -> Option<Vec<RowSlice>> {
    let live: Vec<&RowRef> = group
        .iter()
        .copied()
        .filter(|r| r.cursor < r.meta.row.len())
        .collect();
    let start = live
        .iter()
        .map(|r| r.meta.row.user_key(r.cursor))
        .min()?
        .to_vec();
    let row_bytes_upto = |b: &[u8]| -> u64 {
        live.iter()
            .map(|r| {
                let row = &r.meta.row;
                let to = row.upper_bound(b, r.cursor, row.len());
                row.bytes_between(r.cursor, to)
            })
            .sum()
    };
    let l1 = v.tables(1);
    // L1 tables at or after the start, in key order.
    let first = l1.partition_point(|f| f.largest_user_key() < start.as_slice());
    let mut boundary: Option<Vec<u8>> = None;
    let mut table_bytes = 0;
    for f in l1.get(first..).unwrap_or_default() {
        table_bytes += f.size();
        let b = f.largest_user_key();
        if row_bytes_upto(b) + table_bytes >= target {
            boundary = Some(b.to_vec());
            break;
        }
    }
    if boundary.is_none() {
        // The L1 tables from here on (if any) did not reach the target:
        // past the last of them, cut where the row with the most bytes
        // there reaches its share of what is left of the target (a data
        // quantile), so one column never takes the whole group.
        let floor = (first < l1.len())
            .then(|| l1.last().map(|f| f.largest_user_key()))
            .flatten();
        let used = floor.map_or(0, |f| row_bytes_upto(f) + table_bytes);
        let budget = target.saturating_sub(used);
        let beyond: Vec<(&RowRef, u32)> = live
            .iter()
            .map(|r| {
                let row = &r.meta.row;
                let from = floor.map_or(r.cursor, |f| row.upper_bound(f, r.cursor, row.len()));
                (*r, from)
            })
            .collect();
        let size = |(r, from): &(&RowRef, u32)| r.meta.row.bytes_between(*from, r.meta.row.len());
        let total: u64 = beyond.iter().map(size).sum();
        if total > budget {
            if budget == 0 {
                boundary = floor.map(<[u8]>::to_vec);
            } else if let Some(big) = beyond.iter().max_by_key(|x| size(x)) {
                let (r, from) = *big;
                let row = &r.meta.row;
                let share =
                    (u128::from(size(big)) * u128::from(budget) / u128::from(total.max(1))) as u64;
                let want = row.data_offset(from).saturating_add(share);
                let lo = row.cell_at_offset(want, from);
                boundary = row
                    .user_key(lo.min(row.len().saturating_sub(1)))
                    .to_vec()
                    .into();
            }
        }
    }
    // Cells with user keys ≤ boundary (all of them without one).
    let rows: Vec<RowSlice> = group
        .iter()
        .map(|r| {
            let row = &r.meta.row;
            let to = match &boundary {
                Some(b) => row.upper_bound(b, r.cursor, row.len()),
                None => row.len(),
            };
            RowSlice {
                id: r.meta.id(),
                from: r.cursor,
                to: to.max(r.cursor),
            }
        })
        .collect();
    v.rows().slices_range(&rows)?;
    Some(rows)
}
