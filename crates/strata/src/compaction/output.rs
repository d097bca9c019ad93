//! Cuts a sorted stream of kept entries into table files.
//!
//! A new table starts once the current one reaches the target size, but
//! never between two versions of the same user key, so that deeper levels
//! hold each user key in exactly one table.

use crate::error::Result;
use crate::filename::table_path;
use crate::io::FileSystem;
use crate::table::{TableBuilder, TableOptions};
use crate::types;
use crate::version::FileDesc;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The table files written by one flush or compaction.
pub struct Outputs<'a> {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    table_opts: TableOptions,
    target_size: u64,
    new_file_number: &'a mut dyn FnMut() -> u64,
    current: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    collect_keys: bool,
    current_keys: Vec<Vec<u8>>,
    pub finished: Vec<FileDesc>,
    /// With `collect_keys`, the distinct user keys of each finished table.
    pub keys: Vec<Vec<Vec<u8>>>,
    pub bytes_written: u64,
}

impl<'a> Outputs<'a> {
    pub fn new(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        table_opts: TableOptions,
        target_size: u64,
        new_file_number: &'a mut dyn FnMut() -> u64,
    ) -> Self {
        Outputs {
            dir: dir.to_path_buf(),
            fs,
            table_opts,
            target_size,
            new_file_number,
            current: None,
            last_user_key: Vec::new(),
            collect_keys: false,
            current_keys: Vec::new(),
            finished: Vec::new(),
            keys: Vec::new(),
            bytes_written: 0,
        }
    }

    /// Also records the user keys of every table (for event listeners).
    pub fn collect_keys(mut self, on: bool) -> Self {
        self.collect_keys = on;
        self
    }

    /// Appends one entry; entries must arrive in internal-key order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let uk = types::user_key(ikey);
        let cut = match &self.current {
            Some((_, b)) => {
                b.estimated_size() >= self.target_size && uk != self.last_user_key.as_slice()
            }
            None => false,
        };
        if cut {
            self.finish_current()?;
        }
        if self.current.is_none() {
            let id = (self.new_file_number)();
            let file = self.fs.create(&table_path(&self.dir, id))?;
            self.current = Some((id, TableBuilder::new(file, self.table_opts)));
        }
        if let Some((_, b)) = self.current.as_mut() {
            if self.collect_keys && (b.entries() == 0 || uk != self.last_user_key.as_slice()) {
                self.current_keys.push(uk.to_vec());
            }
            b.add(ikey, value)?;
        }
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(uk);
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((id, b)) = self.current.take() {
            let props = b.finish()?;
            self.bytes_written += props.file_size;
            self.keys.push(std::mem::take(&mut self.current_keys));
            self.finished.push(FileDesc {
                id,
                size: props.file_size,
                smallest: props.smallest,
                largest: props.largest,
                entries: props.entries,
                deletions: props.deletions,
                max_seq: props.max_seq,
            });
        }
        Ok(())
    }

    /// Finishes the last table and returns the descriptors of all outputs.
    /// The caller syncs the directory before the manifest names them.
    pub fn finish(&mut self) -> Result<Vec<FileDesc>> {
        self.finish_current()?;
        self.fs.sync_dir(&self.dir)?;
        Ok(self.finished.clone())
    }

    /// Removes every file written so far (after a failure).
    pub fn abandon(mut self) {
        if let Some((id, _)) = self.current.take() {
            let _ = self.fs.remove_file(&table_path(&self.dir, id));
        }
        for f in &self.finished {
            let _ = self.fs.remove_file(&table_path(&self.dir, f.id));
        }
    }
}
