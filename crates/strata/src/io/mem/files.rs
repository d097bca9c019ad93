//! `MemFs`'s files and its [`FileSystem`] implementation: the handles
//! buffer appends until `flush`, and every directory change is recorded
//! for the crash model.

use super::{not_found, split, InodeRef, MemFs, MemOp, State};
use crate::error::{Error, Result};
use crate::io::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct MemWritable {
    fs: MemFs,
    path: PathBuf,
    inode: InodeRef,
    buf: Vec<u8>,
    len: u64,
}

impl MemWritable {
    fn write_out(&mut self) {
        if !self.buf.is_empty() {
            self.inode.lock().data.extend_from_slice(&self.buf);
            self.buf.clear();
        }
    }
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.fs.state.lock().tick(MemOp::Append, &self.path);
        self.buf.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let state = self.fs.state.clone();
        let mut st = state.lock();
        self.write_out();
        st.tick(MemOp::Flush, &self.path);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let state = self.fs.state.clone();
        let mut st = state.lock();
        self.write_out();
        {
            let mut ino = self.inode.lock();
            ino.durable = ino.data.len();
        }
        st.tick(MemOp::Sync, &self.path);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for MemWritable {
    fn drop(&mut self) {
        // Like PosixFs: a dropped writer hands its bytes to the "OS".
        let state = self.fs.state.clone();
        let _st = state.lock();
        self.write_out();
    }
}

#[derive(Debug)]
struct MemRandom {
    path: PathBuf,
    inode: InodeRef,
    len: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let ino = self.inode.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let src = start
            .checked_add(buf.len())
            .and_then(|end| ino.data.get(start..end))
            .ok_or_else(|| Error::io(&self.path, std::io::Error::from(ErrorKind::UnexpectedEof)))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct MemSequential {
    inode: InodeRef,
    pos: usize,
}

impl SequentialFile for MemSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let ino = self.inode.lock();
        let rest = ino.data.get(self.pos..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

#[derive(Debug)]
struct MemLock {
    fs: MemFs,
    path: PathBuf,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.fs.state.lock().locks.remove(&self.path);
    }
}

impl MemFs {
    fn new_file(&self, st: &mut State, path: &Path) -> Result<InodeRef> {
        let (parent, name) = split(path)?;
        st.dir_mut(parent)?;
        let ino = st.next_inode;
        st.next_inode += 1;
        let node: InodeRef = Arc::default();
        let seq = st.next_change();
        st.dir_mut(parent)?.change(seq, None, Some((name, ino)));
        st.inodes.insert(ino, node.clone());
        Ok(node)
    }

    /// Drops inodes that no directory names, now, durably or in an unsynced
    /// change (which a `PowerLossDirPrefix` crash may keep).
    fn collect(st: &mut State) {
        let live: BTreeSet<u64> = st
            .dirs
            .values()
            .flat_map(|d| {
                d.current.values().chain(d.durable.values()).chain(
                    d.pending
                        .iter()
                        .filter_map(|c| c.insert.as_ref().map(|i| &i.1)),
                )
            })
            .copied()
            .collect();
        st.inodes.retain(|i, _| live.contains(i));
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        for p in path.ancestors() {
            if p.as_os_str().is_empty() {
                continue;
            }
            st.dirs.entry(p.to_path_buf()).or_default();
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        let inode = self.new_file(&mut st, path)?;
        st.tick(MemOp::Create, path);
        Self::collect(&mut st);
        Ok(Box::new(MemWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            inode,
            buf: Vec::new(),
            len: 0,
        }))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let w = self.create(path)?;
        self.state.lock().inode(path)?.lock().log = true;
        Ok(w)
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let inode = self.state.lock().inode(path)?;
        let len = inode.lock().data.len() as u64;
        Ok(Arc::new(MemRandom {
            path: path.to_path_buf(),
            inode,
            len,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let inode = self.state.lock().inode(path)?;
        Ok(Box::new(MemSequential { inode, pos: 0 }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        if !st.dirs.contains_key(tp) {
            return Err(not_found(to));
        }
        let ino = *st
            .dir_mut(fp)?
            .current
            .get(&fname)
            .ok_or_else(|| not_found(from))?;
        let seq = st.next_change();
        if fp == tp {
            st.dir_mut(fp)?.change(seq, Some(fname), Some((tname, ino)));
        } else {
            st.dir_mut(fp)?.change(seq, Some(fname), None);
            st.dir_mut(tp)?.change(seq, None, Some((tname, ino)));
        }
        st.tick(MemOp::Rename, to);
        Self::collect(&mut st);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let (parent, name) = split(path)?;
        if !st.dir_mut(parent)?.current.contains_key(&name) {
            return Err(not_found(path));
        }
        let seq = st.next_change();
        st.dir_mut(parent)?.change(seq, Some(name), None);
        st.tick(MemOp::Remove, path);
        Self::collect(&mut st);
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let st = self.state.lock();
        let dir = st.dirs.get(path).ok_or_else(|| not_found(path))?;
        let mut out: Vec<String> = dir.current.keys().cloned().collect();
        for p in st.dirs.keys() {
            if p.parent() == Some(path) {
                if let Some(n) = p.file_name().and_then(|n| n.to_str()) {
                    out.push(n.to_string());
                }
            }
        }
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.dirs.contains_key(path) || st.inode(path).is_ok()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let inode = self.state.lock().inode(path)?;
        let len = inode.lock().data.len() as u64;
        Ok(len)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let dir = st.dir_mut(path)?;
        dir.durable = dir.current.clone();
        dir.pending.clear();
        st.tick(MemOp::SyncDir, path);
        Self::collect(&mut st);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if st.inode(path).is_err() {
            self.new_file(&mut st, path)?;
        }
        if !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked(path.parent().unwrap_or(path).to_path_buf()));
        }
        Ok(Box::new(MemLock {
            fs: self.clone(),
            path: path.to_path_buf(),
        }))
    }
}
