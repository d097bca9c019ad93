//! A [`Cursor`] for engines whose reads are range scans (KVell): it fetches
//! pages of entries ahead of the position and fetches again past a page's
//! end or on a change of direction. Each page is read when it is fetched, so
//! the cursor is only as point-in-time as the engine's scans.

use super::{Cursor, ScanRange};
use crate::error::{Error, Result};
use std::ops::Bound;

/// Fetches the entries a range selects (the engine's scan).
pub type FetchPage = Box<dyn Fn(ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> + Send>;

/// A cursor over pages of range scans.
pub struct PagedCursor {
    fetch: FetchPage,
    page_len: usize,
    page: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    /// The page runs backwards (fetched descending).
    reverse: bool,
    error: Option<Error>,
}

impl PagedCursor {
    /// An unpositioned cursor fetching `page_len` entries at a time.
    pub fn new(fetch: FetchPage, page_len: usize) -> Self {
        PagedCursor {
            fetch,
            page_len: page_len.max(1),
            page: Vec::new(),
            pos: 0,
            reverse: false,
            error: None,
        }
    }

    fn load(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>, reverse: bool) {
        self.pos = 0;
        self.reverse = reverse;
        if self.error.is_some() {
            self.page.clear();
            return;
        }
        let range = ScanRange::new(start, end)
            .limit(self.page_len)
            .reverse(reverse);
        match (self.fetch)(range) {
            Ok(p) => self.page = p,
            Err(e) => {
                self.page.clear();
                self.error = Some(e);
            }
        }
    }

    /// Steps in direction `reverse`, fetching the next page when needed.
    fn step(&mut self, reverse: bool) {
        if !self.valid() {
            return;
        }
        if self.reverse == reverse {
            self.pos += 1;
            if self.pos < self.page.len() || self.page.len() < self.page_len {
                return;
            }
        }
        // Past a full page, or turning around: fetch from the current key on.
        let (key, _) = if self.reverse == reverse {
            self.page[self.pos - 1].clone()
        } else {
            self.page[self.pos].clone()
        };
        if reverse {
            self.load(Bound::Unbounded, Bound::Excluded(&key), true);
        } else {
            self.load(Bound::Excluded(&key), Bound::Unbounded, false);
        }
    }
}

impl Cursor for PagedCursor {
    fn valid(&self) -> bool {
        self.error.is_none() && self.pos < self.page.len()
    }
    fn key(&self) -> &[u8] {
        self.page.get(self.pos).map_or(&[], |e| &e.0)
    }
    fn value(&self) -> &[u8] {
        self.page.get(self.pos).map_or(&[], |e| &e.1)
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
    fn seek_to_first(&mut self) {
        self.load(Bound::Unbounded, Bound::Unbounded, false);
    }
    fn seek_to_last(&mut self) {
        self.load(Bound::Unbounded, Bound::Unbounded, true);
    }
    fn seek(&mut self, target: &[u8]) {
        self.load(Bound::Included(target), Bound::Unbounded, false);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.load(Bound::Unbounded, Bound::Included(target), true);
    }
    fn next(&mut self) {
        self.step(false);
    }
    fn prev(&mut self) {
        self.step(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn over(map: BTreeMap<Vec<u8>, Vec<u8>>, page: usize) -> PagedCursor {
        let map = Arc::new(map);
        PagedCursor::new(
            Box::new(move |range| {
                if range.is_empty() {
                    return Ok(Vec::new());
                }
                let owned = (
                    super::super::own_bound(range.start),
                    super::super::own_bound(range.end),
                );
                let (limit, r) = (range.limit, map.range::<Vec<u8>, _>(owned));
                let v: Vec<_> = if range.reverse {
                    r.rev()
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    r.take(limit).map(|(k, v)| (k.clone(), v.clone())).collect()
                };
                Ok(v)
            }),
            page,
        )
    }

    #[test]
    fn walks_both_ways_across_pages() {
        let map: BTreeMap<Vec<u8>, Vec<u8>> =
            (0..10u8).map(|i| (vec![b'a' + i], vec![i])).collect();
        for page in [1, 2, 3, 10, 64] {
            let mut c = over(map.clone(), page);
            c.seek_to_first();
            let mut fwd = Vec::new();
            while c.valid() {
                fwd.push(c.key().to_vec());
                c.next();
            }
            assert_eq!(fwd, map.keys().cloned().collect::<Vec<_>>(), "page {page}");
            c.seek_to_last();
            let mut back = Vec::new();
            while c.valid() {
                back.push(c.key()[0]);
                c.prev();
            }
            assert_eq!(back, (b'a'..=b'j').rev().collect::<Vec<_>>());
            // Turning around mid-page and at page ends.
            c.seek(b"d");
            c.next();
            assert_eq!(c.key(), b"e");
            c.prev();
            assert_eq!(c.key(), b"d");
            c.prev();
            assert_eq!(c.key(), b"c");
            c.next();
            assert_eq!(c.key(), b"d");
            c.seek_for_prev(b"dd");
            assert_eq!(c.key(), b"d");
            c.seek(b"zz");
            assert!(!c.valid());
            assert!(c.status().is_ok());
        }
    }

    #[test]
    fn an_error_invalidates_and_sticks() {
        let mut c = PagedCursor::new(
            Box::new(|_| {
                Err(Error::Corruption {
                    file: "x".into(),
                    offset: 0,
                    reason: "test".into(),
                })
            }),
            4,
        );
        c.seek_to_first();
        assert!(!c.valid());
        assert!(c.status().is_err());
        c.seek(b"a");
        assert!(c.status().is_err());
    }
}
