//! Merges several internal iterators into one sorted stream.
//!
//! The valid children are kept in `order`, sorted by their current key
//! (ascending going forward, descending in reverse), so the current entry
//! is `order[0]`'s. A step moves that one child and puts it back in place
//! with a binary search over the others: children that ran out leave the
//! order and cost nothing more, and a step costs about log₂ of the valid
//! children's comparisons instead of a key read and a comparison per child.
//! Internal keys are unique across children, so no tie-breaking is needed.
//!
//! Errors are sticky: once any child fails (a checksum mismatch, an I/O
//! error), the merge becomes invalid and `status()` returns that error from
//! then on, whatever is called next — a re-seek or a direction change never
//! forgets it. Dropping the failed child and going on would surface older
//! versions of its keys, or resurrect keys it deletes.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::types::compare_internal;
use std::cmp::Ordering;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

impl Direction {
    /// `a` against `b` in the order children are kept in: reversed when
    /// going backwards, so `order[0]` is always the next entry out.
    fn cmp(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            Direction::Forward => compare_internal(a, b),
            Direction::Reverse => compare_internal(b, a),
        }
    }
}

/// The merge of its children; see the module doc.
pub struct MergeIter {
    children: Vec<Box<dyn InternalIterator>>,
    /// The valid children, the current one first (see the module doc).
    order: Vec<usize>,
    direction: Direction,
    /// The first child error met; the merge stays invalid once set.
    status: Option<Error>,
}

impl MergeIter {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let order = Vec::with_capacity(children.len());
        MergeIter {
            children,
            order,
            direction: Direction::Forward,
            status: None,
        }
    }

    /// After every child moved: takes the first child error, if any, and
    /// sorts the valid children.
    fn rebuild(&mut self) {
        self.order.clear();
        if self.status.is_none() {
            for c in &self.children {
                if let Err(e) = c.status() {
                    self.status = Some(e);
                    break;
                }
            }
        }
        if self.status.is_some() {
            return;
        }
        let children = &self.children;
        self.order
            .extend((0..children.len()).filter(|&i| children[i].valid()));
        let dir = self.direction;
        self.order
            .sort_unstable_by(|&a, &b| dir.cmp(children[a].key(), children[b].key()));
    }

    /// After only the current child (`order[0]`) moved: puts it back in
    /// place, or drops it (taking its error, if any) when it ran out.
    fn reinsert_first(&mut self) {
        let Some(&cur) = self.order.first() else {
            return;
        };
        let children = &self.children;
        let Some(key) = children[cur].current_key() else {
            if let Err(e) = children[cur].status() {
                self.status = Some(e);
                self.order.clear();
                return;
            }
            self.order.remove(0);
            return;
        };
        let dir = self.direction;
        let rest = &self.order[1..];
        // Usually the moved child is still first, or close to it: one
        // comparison settles the first case before the search.
        let pos = match rest.first() {
            Some(&next) if dir.cmp(children[next].key(), key).is_lt() => {
                1 + rest[1..].partition_point(|&j| dir.cmp(children[j].key(), key).is_lt())
            }
            _ => 0,
        };
        self.order[..=pos].rotate_left(1);
    }
}

impl InternalIterator for MergeIter {
    fn valid(&self) -> bool {
        !self.order.is_empty()
    }

    fn seek_to_first(&mut self) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn seek_to_last(&mut self) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.rebuild();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        if self.children.len() > 1 {
            // Every source's first read starts before any seek waits.
            for c in &mut self.children {
                c.prefetch_seek(target);
            }
        }
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.rebuild();
    }

    fn next(&mut self) {
        let Some(&cur) = self.order.first() else {
            return;
        };
        if self.direction != Direction::Forward {
            // Every other child is positioned before key(); move each to the
            // first entry after it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() && compare_internal(c.key(), &key).is_eq() {
                        c.next();
                    }
                }
            }
            self.direction = Direction::Forward;
            self.children[cur].next();
            self.rebuild();
            return;
        }
        self.children[cur].next();
        self.reinsert_first();
    }

    fn prev(&mut self) {
        let Some(&cur) = self.order.first() else {
            return;
        };
        if self.direction != Direction::Reverse {
            // Every other child is positioned after key(); move each to the
            // last entry before it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() {
                        c.prev();
                    } else {
                        c.seek_to_last();
                    }
                }
            }
            self.direction = Direction::Reverse;
            self.children[cur].prev();
            self.rebuild();
            return;
        }
        self.children[cur].prev();
        self.reinsert_first();
    }

    fn key(&self) -> &[u8] {
        match self.order.first() {
            Some(&c) => self.children[c].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.order.first() {
            Some(&c) => self.children[c].value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.status {
            return Err(e.clone());
        }
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }

    /// Forwarded to every child.
    fn prefetch_seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.prefetch_seek(target);
        }
    }

    /// Forwarded to every child: a walk returning `entries` entries
    /// usually takes no more than that from any one of them.
    fn scan_hint(&mut self, entries: usize) {
        for c in &mut self.children {
            c.scan_hint(entries);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{internal_key, ValueKind};

    const KIND_VALUE: u8 = ValueKind::Value as u8;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// A sorted in-memory child, optionally failing once it reaches an
    /// entry (`fail_at`).
    struct VecIter {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        pos: Option<usize>,
        fail_at: Option<usize>,
        failed: bool,
    }

    impl VecIter {
        fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
            VecIter {
                entries,
                pos: None,
                fail_at: None,
                failed: false,
            }
        }
        fn settle(&mut self, p: Option<usize>) {
            self.pos = p.filter(|&i| i < self.entries.len());
            if self.pos.is_some() && self.pos == self.fail_at {
                self.failed = true;
                self.pos = None;
            }
        }
    }

    impl InternalIterator for VecIter {
        fn valid(&self) -> bool {
            self.pos.is_some()
        }
        fn seek_to_first(&mut self) {
            self.settle(Some(0));
        }
        fn seek_to_last(&mut self) {
            self.settle(self.entries.len().checked_sub(1));
        }
        fn seek(&mut self, target: &[u8]) {
            let i = self
                .entries
                .partition_point(|(k, _)| compare_internal(k, target).is_lt());
            self.settle(Some(i));
        }
        fn next(&mut self) {
            let p = self.pos.map(|i| i + 1);
            self.settle(p);
        }
        fn prev(&mut self) {
            let p = self.pos.and_then(|i| i.checked_sub(1));
            self.settle(p);
        }
        fn key(&self) -> &[u8] {
            self.pos.map_or(&[], |i| &self.entries[i].0)
        }
        fn value(&self) -> &[u8] {
            self.pos.map_or(&[], |i| &self.entries[i].1)
        }
        fn status(&self) -> Result<()> {
            if self.failed {
                Err(Error::corruption(
                    std::path::Path::new("child"),
                    0,
                    "child failed",
                ))
            } else {
                Ok(())
            }
        }
    }

    /// Random children over one key space (each key in exactly one child,
    /// some children empty), and every entry sorted.
    fn children(rng: &mut SmallRng) -> (Vec<VecIter>, Vec<Vec<u8>>) {
        let n = rng.gen_range(1..7);
        let mut parts = vec![Vec::new(); n];
        let mut all = Vec::new();
        for seq in 1..rng.gen_range(0..300u64) {
            let user = format!("k{:03}", rng.gen_range(0..120)).into_bytes();
            let k = internal_key(&user, seq, KIND_VALUE);
            parts[rng.gen_range(0..n)].push((k.clone(), seq.to_le_bytes().to_vec()));
            all.push(k);
        }
        for p in &mut parts {
            p.sort_by(|a, b| compare_internal(&a.0, &b.0));
        }
        all.sort_by(|a, b| compare_internal(a, b));
        (parts.into_iter().map(VecIter::new).collect(), all)
    }

    fn merge(children: Vec<VecIter>) -> MergeIter {
        MergeIter::new(
            children
                .into_iter()
                .map(|c| Box::new(c) as Box<dyn InternalIterator>)
                .collect(),
        )
    }

    /// A child that logs its `prefetch_seek` and `seek` calls by its id.
    struct Logged(
        usize,
        std::sync::Arc<parking_lot::Mutex<Vec<(&'static str, usize)>>>,
    );

    impl InternalIterator for Logged {
        fn valid(&self) -> bool {
            false
        }
        fn seek_to_first(&mut self) {}
        fn seek_to_last(&mut self) {}
        fn seek(&mut self, _: &[u8]) {
            self.1.lock().push(("seek", self.0));
        }
        fn prefetch_seek(&mut self, _: &[u8]) {
            self.1.lock().push(("ask", self.0));
        }
        fn next(&mut self) {}
        fn prev(&mut self) {}
        fn key(&self) -> &[u8] {
            &[]
        }
        fn value(&self) -> &[u8] {
            &[]
        }
        fn status(&self) -> Result<()> {
            Ok(())
        }
    }

    /// A seek asks every child for what it will read before any child
    /// seeks, so that their reads overlap.
    #[test]
    fn a_seek_asks_every_child_before_seeking_any() {
        let log = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let children = (0..3)
            .map(|i| Box::new(Logged(i, log.clone())) as Box<dyn InternalIterator>)
            .collect();
        let mut m = MergeIter::new(children);
        m.seek(b"k");
        assert_eq!(
            *log.lock(),
            [
                ("ask", 0),
                ("ask", 1),
                ("ask", 2),
                ("seek", 0),
                ("seek", 1),
                ("seek", 2)
            ]
        );
    }

    #[test]
    fn walks_match_the_sorted_union_both_ways_with_turns() {
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..300 {
            let (kids, all) = children(&mut rng);
            let mut m = merge(kids);
            m.seek_to_first();
            let mut fwd = Vec::new();
            while m.valid() {
                fwd.push(m.key().to_vec());
                m.next();
            }
            assert_eq!(fwd, all);
            m.seek_to_last();
            let mut back = Vec::new();
            while m.valid() {
                back.push(m.key().to_vec());
                m.prev();
            }
            back.reverse();
            assert_eq!(back, all);
            // A random walk with direction changes, seeks and
            // seek_for_prevs, each position checked against the model.
            let mut at: Option<usize> = None;
            for _ in 0..200 {
                match rng.gen_range(0..6) {
                    0 | 1 if at.is_some() => {
                        m.next();
                        at = at.map(|i| i + 1).filter(|&i| i < all.len());
                    }
                    2 | 3 if at.is_some() => {
                        m.prev();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                    4 => {
                        let t = internal_key(
                            format!("k{:03}", rng.gen_range(0..125)).as_bytes(),
                            rng.gen_range(0..300),
                            KIND_VALUE,
                        );
                        m.seek(&t);
                        let i = all.partition_point(|k| compare_internal(k, &t).is_lt());
                        at = (i < all.len()).then_some(i);
                    }
                    _ => {
                        let t = internal_key(
                            format!("k{:03}", rng.gen_range(0..125)).as_bytes(),
                            rng.gen_range(0..300),
                            KIND_VALUE,
                        );
                        m.seek_for_prev(&t);
                        let i = all.partition_point(|k| compare_internal(k, &t).is_le());
                        at = i.checked_sub(1);
                    }
                }
                assert_eq!(m.valid(), at.is_some());
                if let Some(i) = at {
                    assert_eq!(m.key(), all[i].as_slice());
                }
                assert!(m.status().is_ok());
            }
        }
    }

    #[test]
    fn a_child_error_met_while_stepping_sticks() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut met = 0;
        for _ in 0..200 {
            let (mut kids, all) = children(&mut rng);
            let victim = rng.gen_range(0..kids.len());
            let len = kids[victim].entries.len();
            if len < 2 {
                continue;
            }
            kids[victim].fail_at = Some(rng.gen_range(1..len));
            let mut m = merge(kids);
            m.seek_to_first();
            let mut seen = 0;
            while m.valid() {
                seen += 1;
                m.next();
            }
            // Stopped early, with the error, and stays stopped.
            assert!(seen < all.len());
            assert!(m.status().is_err());
            m.seek_to_first();
            assert!(!m.valid());
            assert!(m.status().is_err());
            met += 1;
        }
        assert!(met > 50, "{met}");
    }
}
