//! Per-process mapping tables: which data file (and where in it) each
//! address of a traced process maps, as its mmap, munmap and mremap calls
//! left it. A forked process starts with a copy of its parent's table
//! (DataLoader workers inherit the datasets the main process mapped), exec
//! empties it, exit drops it. `scene` and `stats` run every record through
//! one [`Maps`], so both read a fault or an munmap the same way.
//!
//! Only data mappings are kept (see [`MapClass`]): libraries, shared
//! memory and anonymous memory are counted from the records themselves,
//! and a fault outside a data mapping is not drawn.

use std::collections::BTreeMap;
use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use mltrace_log::*;

/// Pages are 4 KiB on the architectures mltrace records (x86_64).
pub const PAGE: u64 = 4096;

const PROT_EXEC: u32 = 4;
const MAP_ANONYMOUS: u32 = 0x20;
/// glibc's loader maps every library with it (MAP_COPY), code or not.
const MAP_DENYWRITE: u32 = 0x800;
const MREMAP_DONTUNMAP: u32 = 4;

/// What a mapping is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapClass {
    /// A regular file (or block device) on storage: data I/O.
    Data,
    /// Executable or loaded by the dynamic loader: libraries, programs.
    Code,
    /// A file in memory (tmpfs, /dev/shm, memfd): shared memory, not storage.
    SharedMemory,
    /// Anonymous memory.
    Anonymous,
    /// Devices (GPU drivers), anon inodes, files the kernel side could not name.
    Other,
}

/// The class of what an mmap record maps.
pub fn classify(m: &Mapping) -> MapClass {
    if m.op == MapOp::Anonymous || m.flags & MAP_ANONYMOUS != 0 {
        MapClass::Anonymous
    } else if m.prot & PROT_EXEC != 0 || m.flags & MAP_DENYWRITE != 0 {
        MapClass::Code
    } else if m.file_flags & mapf::MEMORY_FS != 0 || m.kind == FileKind::Memfd {
        MapClass::SharedMemory
    } else if matches!(m.kind, FileKind::Regular | FileKind::BlockDev) {
        MapClass::Data
    } else {
        MapClass::Other
    }
}

/// A mapped file, shared by the regions cut from one mmap and their copies.
#[derive(Debug, PartialEq, Eq)]
pub struct MappedFile {
    pub path: Box<[u8]>,
    pub dev: u32,
    pub ino: u64,
}

/// `[start, end)` of one process's address space mapping `file` from `offset`.
#[derive(Clone, Debug)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub file: Rc<MappedFile>,
    pub offset: u64,
    pub prot: u32,
    pub flags: u32,
}

impl Region {
    /// The file offset `addr` maps.
    pub fn offset_of(&self, addr: u64) -> u64 {
        self.offset + (addr - self.start)
    }
}

/// What one record did to its process's table.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// mmap: the class of what it mapped; munmap, mremap: `Data` when it
    /// touched a data mapping, else `None`.
    pub class: Option<MapClass>,
    /// The data file concerned and the file offset at the address the call
    /// was about (mmap: its own file, for a data mapping).
    pub file: Option<Rc<MappedFile>>,
    pub offset: u64,
    /// mremap: bytes a data mapping grew by.
    pub grown: u64,
    /// fork: bytes of data files the new process inherited mapped.
    pub inherited: u64,
}

#[derive(Clone, Default)]
struct Table {
    /// By start address.
    regions: BTreeMap<u64, Region>,
    /// Data regions per (dev, inode), for "does it map this file".
    files: HashMap<(u32, u64), u32>,
}

fn round_up(len: u64) -> u64 {
    len.saturating_add(PAGE - 1) & !(PAGE - 1)
}

impl Table {
    fn insert(&mut self, r: Region) {
        if r.end > r.start {
            *self.files.entry((r.file.dev, r.file.ino)).or_default() += 1;
            self.regions.insert(r.start, r);
        }
    }

    fn take(&mut self, start: u64) -> Option<Region> {
        let r = self.regions.remove(&start)?;
        let key = (r.file.dev, r.file.ino);
        if let Some(n) = self.files.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.files.remove(&key);
            }
        }
        Some(r)
    }

    /// The parts of regions inside `[a, b)`, in address order.
    fn clip(&self, a: u64, b: u64) -> Vec<Region> {
        let mut v: Vec<Region> = self
            .regions
            .range(..b)
            .rev()
            .take_while(|(_, r)| r.end > a)
            .map(|(_, r)| {
                let (s, e) = (r.start.max(a), r.end.min(b));
                Region { start: s, end: e, offset: r.offset_of(s), ..r.clone() }
            })
            .collect();
        v.reverse();
        v
    }

    /// Unmaps `[a, b)`, splitting the regions it cuts; returns what it
    /// removed, in address order.
    fn cut(&mut self, a: u64, b: u64) -> Vec<Region> {
        let removed = self.clip(a, b);
        let starts: Vec<u64> = self.regions.range(..b).rev().take_while(|(_, r)| r.end > a).map(|(&s, _)| s).collect();
        for s in starts {
            let Some(r) = self.take(s) else { continue };
            if r.start < a {
                self.insert(Region { end: a, ..r.clone() });
            }
            if r.end > b {
                self.insert(Region { start: b, offset: r.offset_of(b), ..r });
            }
        }
        removed
    }

    fn find(&self, addr: u64) -> Option<&Region> {
        self.regions.range(..=addr).next_back().map(|(_, r)| r).filter(|r| addr < r.end)
    }

    fn data_bytes(&self) -> u64 {
        self.regions.values().map(|r| r.end - r.start).sum()
    }

    /// mremap of `[old, old + old_len)` to `new` (its result), `new_len` long.
    fn remap(&mut self, old: u64, old_len: u64, new_len: u64, new: u64, flags: u32) -> Applied {
        let (old_len, new_len) = (round_up(old_len), round_up(new_len));
        // With old_len 0 (a shared mapping) or MREMAP_DONTUNMAP the old
        // mapping stays and its pages are mapped again at `new`.
        let copy = old_len == 0 || flags & MREMAP_DONTUNMAP != 0;
        let span = if old_len == 0 { new_len } else { old_len };
        let mut pieces = if copy { self.clip(old, old + span) } else { self.cut(old, old + old_len) };
        let end = new.saturating_add(new_len);
        self.cut(new, end);
        let Some(first) = pieces.first() else { return Applied::default() };
        let applied = Applied {
            class: Some(MapClass::Data),
            file: Some(first.file.clone()),
            offset: first.offset,
            grown: new_len.saturating_sub(old_len),
            inherited: 0,
        };
        // Growing extends the mapping that ended the old range.
        if let Some(last) = pieces.last_mut().filter(|l| l.end == old + span) {
            last.end = last.end.max(old + new_len);
        }
        for p in pieces {
            let (s, e) = (p.start - old + new, (p.end - old + new).min(end));
            if s < e {
                self.insert(Region { start: s, end: e, ..p });
            }
        }
        applied
    }
}

/// Every live process's table, by pid. See the module docs.
#[derive(Default)]
pub struct Maps {
    tables: HashMap<u32, Table>,
}

impl Maps {
    /// Updates the tables for `rec` (fork, exec, exit, mapping records;
    /// others are ignored) and says what it did.
    pub fn apply(&mut self, f: &Frame<'_>, rec: &Record) -> Applied {
        let path = match rec {
            Record::Mapping(m) => f.str(m.path),
            _ => b"",
        };
        self.apply_path(rec, path)
    }

    /// [`Maps::apply`] with a mapping's path already resolved.
    pub fn apply_path(&mut self, rec: &Record, path: &[u8]) -> Applied {
        match rec {
            Record::Fork(r) if !r.thread => {
                let t = self.tables.get(&r.parent_pid).filter(|_| r.parent_pid != r.pid).cloned().unwrap_or_default();
                let inherited = t.data_bytes();
                if t.regions.is_empty() {
                    self.tables.remove(&r.pid);
                } else {
                    self.tables.insert(r.pid, t);
                }
                Applied { inherited, ..Default::default() }
            }
            Record::Exec(r) => {
                self.tables.remove(&r.pid);
                Applied::default()
            }
            Record::Exit(r) if r.process_exit => {
                self.tables.remove(&r.pid);
                Applied::default()
            }
            Record::Mapping(m) => self.mapping(path, m),
            _ => Applied::default(),
        }
    }

    fn mapping(&mut self, path: &[u8], m: &Mapping) -> Applied {
        if m.ret < 0 || m.op == MapOp::Anonymous {
            let class = (m.op == MapOp::Mmap).then(|| classify(m));
            return Applied { class, ..Default::default() };
        }
        let t = self.tables.entry(m.pid).or_default();
        let applied = match m.op {
            MapOp::Mmap => {
                let at = m.ret as u64;
                let end = at.saturating_add(round_up(m.len));
                // MAP_FIXED replaces whatever was there.
                t.cut(at, end);
                let class = classify(m);
                let file = (class == MapClass::Data).then(|| {
                    let file = Rc::new(MappedFile { path: path.into(), dev: m.dev, ino: m.ino });
                    let r =
                        Region { start: at, end, file: file.clone(), offset: m.offset, prot: m.prot, flags: m.flags };
                    t.insert(r);
                    file
                });
                Applied { class: Some(class), file, offset: m.offset, ..Default::default() }
            }
            MapOp::Munmap => {
                let removed = t.cut(m.addr, m.addr.saturating_add(round_up(m.len)));
                match removed.first() {
                    Some(r) => Applied {
                        class: Some(MapClass::Data),
                        file: Some(r.file.clone()),
                        offset: r.offset,
                        ..Default::default()
                    },
                    None => Applied::default(),
                }
            }
            MapOp::Mremap => t.remap(m.addr, m.len, m.new_len, m.ret as u64, m.flags),
            MapOp::Anonymous => Applied::default(),
        };
        if t.regions.is_empty() {
            self.tables.remove(&m.pid);
        }
        applied
    }

    /// The data mapping of process `pid` at `addr`.
    pub fn find(&self, pid: u32, addr: u64) -> Option<&Region> {
        self.tables.get(&pid)?.find(addr)
    }

    /// Whether process `pid` has (part of) file (dev, ino) mapped for data.
    pub fn maps_file(&self, pid: u32, dev: u32, ino: u64) -> bool {
        self.tables.get(&pid).is_some_and(|t| t.files.contains_key(&(dev, ino)))
    }

    /// Processes with a table (for tests of the memory bound).
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

#[cfg(test)]
mod tests;
