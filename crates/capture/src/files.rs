//! File identities named by the kernel (EV_FILE) and what user space makes
//! of them: a display path and a [`FileKind`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use libbpf_rs::{MapCore, MapFlags};
use mltrace_log::{FileKind, FrameEncoder, StrId};

use crate::name::{Cached, Name, Shared};

use crate::bpf::bpf_err;
use crate::error::CaptureError;
use crate::skel::MltraceSkel;

/// Super-block magics (include/uapi/linux/magic.h) that mark non-files.
const PIPEFS_MAGIC: u64 = 0x5049_5045;
const SOCKFS_MAGIC: u64 = 0x534f_434b;
const ANON_INODE_FS_MAGIC: u64 = 0x0904_1934;
const PIDFS_MAGIC: u64 = 0x5049_4446;

const S_IFMT: u16 = 0o170000;
const S_IFIFO: u16 = 0o010000;
const S_IFCHR: u16 = 0o020000;
const S_IFDIR: u16 = 0o040000;
const S_IFBLK: u16 = 0o060000;
const S_IFREG: u16 = 0o100000;
const S_IFLNK: u16 = 0o120000;
const S_IFSOCK: u16 = 0o140000;

/// What EV_FILE says about one file identity.
pub struct FileFacts<'a> {
    pub mode: u16,
    pub magic: u64,
    /// Kernel-internal dev_t (major << 20 | minor).
    pub rdev: u32,
    pub ino: u64,
    /// The path the kernel walked, or the lone dentry name when `disconnected`.
    pub path: &'a [u8],
    pub disconnected: bool,
}

fn is_tty(rdev: u32) -> bool {
    let (major, minor) = (rdev >> 20, rdev & 0xfffff);
    // 4: virtual consoles and serial ttys, 5: /dev/tty, console, ptmx, 136-143: pty slaves
    major == 4 || (major == 5 && minor <= 2) || (136..=143).contains(&major)
}

/// The kind of a file and the name to show for it. Non-files get the names
/// the kernel uses in /proc/PID/fd: `pipe:[123]`, `socket:[456]`,
/// `anon_inode:[eventfd]`, `memfd:name`.
pub fn classify<'a>(f: &FileFacts<'a>) -> (FileKind, Cow<'a, [u8]>) {
    let fmt = f.mode & S_IFMT;
    let named = |prefix: &str| Cow::Owned(format!("{prefix}:[{}]", f.ino).into_bytes());
    if f.magic == PIPEFS_MAGIC || (fmt == S_IFIFO && f.disconnected) {
        return (FileKind::Pipe, named("pipe"));
    }
    if f.magic == SOCKFS_MAGIC || fmt == S_IFSOCK {
        return (FileKind::Socket, named("socket"));
    }
    if f.magic == ANON_INODE_FS_MAGIC || f.magic == PIDFS_MAGIC {
        let mut name = b"anon_inode:".to_vec();
        if f.magic == PIDFS_MAGIC && f.path.is_empty() {
            name.extend_from_slice(b"[pidfd]");
        } else {
            name.extend_from_slice(f.path);
        }
        return (FileKind::AnonInode, Cow::Owned(name));
    }
    if f.disconnected && f.path.starts_with(b"memfd:") {
        return (FileKind::Memfd, Cow::Borrowed(f.path));
    }
    let kind = match fmt {
        S_IFREG => FileKind::Regular,
        S_IFDIR => FileKind::Directory,
        S_IFIFO => FileKind::Pipe,
        S_IFCHR if is_tty(f.rdev) => FileKind::Tty,
        S_IFCHR => FileKind::CharDev,
        S_IFBLK => FileKind::BlockDev,
        S_IFLNK => FileKind::Symlink,
        _ => FileKind::Unknown,
    };
    if f.disconnected {
        // An unlinked or internal file with no place in a tree (e.g. a
        // deleted O_TMPFILE): show the name the way /proc does.
        let mut p = f.path.to_vec();
        if p.is_empty() {
            return (kind, named("inode"));
        }
        p.extend_from_slice(b" (detached)");
        return (kind, Cow::Owned(p));
    }
    (kind, Cow::Borrowed(f.path))
}

/// Lexically joins `rel` onto the absolute directory `base` and removes
/// `.`, `..` and repeated slashes: what "relative to the cwd" means for a
/// path that does not exist (so no symlinks can be followed).
pub fn join_normalize(base: &[u8], rel: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let start: &[&[u8]] = if rel.first() == Some(&b'/') { &[] } else { &[base] };
    for piece in start.iter().copied().chain(std::iter::once(rel)) {
        for c in piece.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    parts.pop();
                }
                c => parts.push(c),
            }
        }
    }
    let mut out = Vec::with_capacity(base.len() + rel.len() + 1);
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// An inode's identity for the table: its number with its device mixed
/// in (0: not known). The number alone is not the file: a fresh
/// filesystem's numbers and pipefs' are all small, and a pipe once kept
/// the name of a data file that had had its number and its struct file.
pub fn inode_ident(dev: u32, ino: u64) -> u64 {
    if ino == 0 {
        return 0;
    }
    ino ^ u64::from(dev).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

struct Entry {
    name: Shared,
    kind: FileKind,
    /// The name's id in the frame, kept here too: a read finds it without
    /// a second pointer to follow.
    cached: Cached,
    /// The inode ([`inode_ident`]), when an open's absolute passed path
    /// named it (0 otherwise).
    passed_ino: u64,
    /// The inode ([`inode_ident`]) it was named for (0: not known).
    ino: u64,
}

impl Entry {
    #[inline]
    fn id_in(&mut self, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        let generation = enc.generation();
        if self.cached.generation != generation {
            self.cached = Cached { generation, id: self.name.id_in(enc) };
        }
        (self.cached.id, self.kind)
    }
}

#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        // Kernel addresses: the low bits are alignment, mix them away.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Map = HashMap<u64, Entry, BuildHasherDefault<IdentityHasher>>;

/// How many identities one generation holds before it becomes the old one.
/// A full generation takes about 5 MB; live and old are kept, a third is
/// held briefly while retired. More identities than this in use in turn
/// cost a kernel-side path walk per use (half the kernel's files_seen).
pub const GENERATION: usize = 32 * 1024;

/// File identity (from the kernel) -> path and kind, bounded for recordings
/// of hours: identities are struct file addresses, so every open makes one,
/// and the kernel side names each only once. Two generations are kept; an
/// identity not used for a whole generation is forgotten, and the kernel
/// side is told to forget it too (its `files_seen` entry deleted, the
/// per-thread shortcut invalidated), so it names it again if it is ever
/// used again. Forgotten entries stay resolvable ("retired") until the
/// ring buffer has drained past the moment the kernel side forgot them.
pub struct FileTable {
    live: Map,
    old: Map,
    retired: Map,
    generation: usize,
    /// Identities the kernel side must forget (see [`FileTable::take_forgotten`]).
    forget: Vec<u64>,
    /// Identities forgotten so far.
    pub forgotten: u64,
    /// Names an identity had for another inode before it was named anew
    /// (its file closed, the address given to the next one), oldest
    /// first, at most [`REPLACED`]: a summary's sum comes a second or so
    /// after its calls, and names the identity and the inode it was for.
    replaced: rustc_hash::FxHashMap<(u64, u64), Entry>,
    replaced_order: std::collections::VecDeque<(u64, u64)>,
    /// Whether `replaced` is kept: only a summary's sums of files other
    /// than regular ones look there (in full detail a record never names
    /// an identity's earlier file, as the kernel names the new one before
    /// its calls), and on a small-file loader keeping it was a fifth of the
    /// recorder's consumer.
    pub keep_replaced: bool,
}

/// Names kept for identities named anew: far more than a second's worth
/// of files closed and reopened under one address (a small-file loader
/// opens about 100,000 a second on this machine, across all addresses).
const REPLACED: usize = 1 << 16;

impl Default for FileTable {
    fn default() -> Self {
        FileTable::with_generation(GENERATION)
    }
}

impl FileTable {
    pub fn with_generation(generation: usize) -> Self {
        FileTable {
            live: Map::default(),
            old: Map::default(),
            retired: Map::default(),
            generation: generation.max(1),
            replaced: rustc_hash::FxHashMap::default(),
            replaced_order: std::collections::VecDeque::new(),
            keep_replaced: true,
            forget: Vec::new(),
            forgotten: 0,
        }
    }

    pub fn insert(&mut self, key: u64, kind: FileKind, path: &[u8]) {
        self.insert_entry(key, kind, Name::new(path), 0, 0);
    }

    /// Names `key` as inode `ino` (an [`inode_ident`], as every `ino` of
    /// this table): a sum that comes later for the same key
    /// and another inode is not this file's (see [`FileTable::lookup_ino`]).
    pub fn insert_ino(&mut self, key: u64, kind: FileKind, name: Shared, ino: u64) {
        self.insert_entry(key, kind, name, 0, ino);
    }

    /// Names `key` by the absolute path an open passed (inode `ino`): a
    /// later walk of the same file keeps this name (see [`FileTable::passed_name`]).
    pub fn insert_passed(&mut self, key: u64, kind: FileKind, name: Shared, ino: u64) {
        self.insert_entry(key, kind, name, ino, ino);
    }

    fn insert_entry(&mut self, key: u64, kind: FileKind, name: Shared, passed_ino: u64, ino: u64) {
        let entry = Entry { name, kind, cached: Cached::NONE, passed_ino, ino };
        // A key is in one generation at most (lookup and this move it to
        // the live one): found live, the others need no look.
        if let Some(slot) = self.live.get_mut(&key) {
            let prev = std::mem::replace(slot, entry);
            if self.keep_replaced && prev.ino != 0 && prev.ino != ino {
                self.keep_replaced(key, prev);
            }
            return;
        }
        // Not live: the other two are looked in only when they hold any.
        let before = [
            if self.old.is_empty() { None } else { self.old.remove(&key) },
            if self.retired.is_empty() { None } else { self.retired.remove(&key) },
        ];
        let prev = self.live.insert(key, entry);
        if self.keep_replaced {
            for e in before.into_iter().chain([prev]).flatten() {
                if e.ino != 0 && e.ino != ino {
                    self.keep_replaced(key, e);
                }
            }
        }
        self.maybe_rotate();
    }

    /// Brings `key`'s live entry, and the name an open naming it anew
    /// would let go of, into the cache.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        if let Some(e) = self.live.get(&key) {
            crate::cache::prefetch(std::sync::Arc::as_ptr(&e.name));
        }
    }

    /// Whether `key` is still the file (inode `ino`) an open named by its
    /// passed path. The kernel side names a file again when a task other
    /// than the opener uses it first; that walk resolves symlinks, and one
    /// file should not change its name halfway through a run.
    pub fn passed_name(&self, key: u64, ino: u64) -> bool {
        ino != 0 && self.get(key).is_some_and(|e| e.passed_ino == ino)
    }

    fn get(&self, key: u64) -> Option<&Entry> {
        self.live.get(&key).or_else(|| self.old.get(&key)).or_else(|| self.retired.get(&key))
    }

    pub fn path(&self, key: u64) -> Option<&[u8]> {
        self.get(key).map(|e| e.name.path())
    }

    /// What `key` names, if it was named for inode `ino` (or the inode is
    /// not known): a summary's key is a struct file's address, which the
    /// kernel hands to the next file opened once this one is closed, and
    /// the table has its newest name by the time the sum is read.
    pub fn lookup_ino(&mut self, key: u64, ino: u64, enc: &mut FrameEncoder) -> Option<(StrId, FileKind)> {
        let stale = |e: &Entry| e.ino != 0 && ino != 0 && e.ino != ino;
        if self.get(key).is_some_and(stale) {
            return self.replaced.get_mut(&(key, ino)).map(|e| e.id_in(enc));
        }
        match self.lookup(key, enc) {
            Some(found) => Some(found),
            // Forgotten and released since its sum's calls.
            None if ino != 0 => self.replaced.get_mut(&(key, ino)).map(|e| e.id_in(enc)),
            None => None,
        }
    }

    /// The path's id in `enc`'s current frame and the kind, interning at most
    /// once per frame. `None` for an identity never named.
    #[inline]
    pub fn lookup(&mut self, key: u64, enc: &mut FrameEncoder) -> Option<(StrId, FileKind)> {
        if let Some(e) = self.live.get_mut(&key) {
            return Some(e.id_in(enc));
        }
        // Used again: back into the live generation.
        let mut e = self.old.remove(&key).or_else(|| self.retired.remove(&key))?;
        let found = e.id_in(enc);
        self.live.insert(key, e);
        self.maybe_rotate();
        Some(found)
    }

    /// As [`FileTable::lookup`], with what `f` makes of the name: one
    /// probe where the entry is live (an open's just named file).
    #[inline]
    pub fn resolve<R>(
        &mut self,
        key: u64,
        enc: &mut FrameEncoder,
        f: impl FnOnce(&Name) -> R,
    ) -> Option<(StrId, FileKind, R)> {
        if let Some(e) = self.live.get_mut(&key) {
            let (id, kind) = e.id_in(enc);
            return Some((id, kind, f(&e.name)));
        }
        // Wherever a rotation the lookup caused has put it.
        let (id, kind) = self.lookup(key, enc)?;
        Some((id, kind, f(&self.get(key)?.name)))
    }

    fn keep_replaced(&mut self, key: u64, e: Entry) {
        // A regular file's sums carry its inode, not its identity (the
        // kernel sums every open of it as one): found by inode, never here.
        if !self.keep_replaced || e.kind == FileKind::Regular {
            return;
        }
        let id = (key, e.ino);
        if self.replaced.insert(id, e).is_none() {
            self.replaced_order.push_back(id);
        }
        while self.replaced_order.len() > REPLACED {
            if let Some(old) = self.replaced_order.pop_front() {
                self.replaced.remove(&old);
            }
        }
    }

    fn maybe_rotate(&mut self) {
        if self.live.len() < self.generation {
            return;
        }
        // The old generation went unused for a whole generation: forget it.
        self.forget.extend(self.old.keys());
        self.forgotten += self.old.len() as u64;
        if self.retired.is_empty() {
            self.retired = std::mem::take(&mut self.old);
        } else {
            self.retired.extend(self.old.drain());
        }
        self.old = std::mem::take(&mut self.live);
    }

    /// Identities the kernel side must forget now. Once it has, and the
    /// ring buffer has been drained after that, call
    /// [`FileTable::release_retired`].
    pub fn take_forgotten(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.forget)
    }

    /// No record naming a forgotten identity without the kernel side
    /// naming it again first can still be in the ring buffer.
    pub fn release_retired(&mut self) {
        // A summary's sum may name one still: a thread's slot holds its
        // identity until the slot is sent or read, a second or so after
        // its last call, past the ring's drain. Kept by identity and inode
        // among the names replaced, as far as they reach.
        for (key, e) in std::mem::take(&mut self.retired) {
            if e.ino != 0 {
                self.keep_replaced(key, e);
            }
        }
    }

    /// Identities held (live, old and retired).
    pub fn len(&self) -> usize {
        self.live.len() + self.old.len() + self.retired.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Makes the kernel side forget file identities user space has forgotten
/// (so it names them again if they are used again), then moves to `epoch`
/// so threads stop trusting the last file they remember.
pub fn forget_files(skel: &MltraceSkel<'_>, keys: &[u64], epoch: u64) -> Result<(), CaptureError> {
    for k in keys {
        // Already gone (the kernel's LRU evicted it) is fine.
        let _ = skel.maps.files_seen.delete(&k.to_ne_bytes());
    }
    skel.maps
        .files_epoch
        .update(&0u32.to_ne_bytes(), &epoch.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("updating the file epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(f: &FileFacts<'_>) -> (FileKind, Vec<u8>) {
        let (kind, name) = super::classify(f);
        (kind, name.into_owned())
    }

    fn facts(mode: u16, magic: u64, path: &[u8], disconnected: bool) -> FileFacts<'_> {
        FileFacts { mode, magic, rdev: 0, ino: 77, path, disconnected }
    }

    #[test]
    fn non_files_are_named_like_proc_fd() {
        assert_eq!(classify(&facts(S_IFIFO | 0o600, PIPEFS_MAGIC, b"", true)), (FileKind::Pipe, b"pipe:[77]".to_vec()));
        assert_eq!(
            classify(&facts(S_IFSOCK | 0o777, SOCKFS_MAGIC, b"", true)),
            (FileKind::Socket, b"socket:[77]".to_vec())
        );
        assert_eq!(
            classify(&facts(0o600, ANON_INODE_FS_MAGIC, b"[eventfd]", true)),
            (FileKind::AnonInode, b"anon_inode:[eventfd]".to_vec())
        );
        assert_eq!(
            classify(&facts(S_IFREG | 0o600, 0x0102_1994, b"memfd:weights", true)),
            (FileKind::Memfd, b"memfd:weights".to_vec())
        );
        assert_eq!(
            classify(&facts(S_IFREG | 0o600, 0x0102_1994, b"/dev/shm/x", false)),
            (FileKind::Regular, b"/dev/shm/x".to_vec())
        );
        assert_eq!(classify(&facts(S_IFIFO | 0o600, 0xef53, b"/tmp/fifo", false)).0, FileKind::Pipe);
        let tty = FileFacts {
            mode: S_IFCHR | 0o620,
            magic: 0x1cd1,
            rdev: (136 << 20) | 3,
            ino: 6,
            path: b"/dev/pts/3",
            disconnected: false,
        };
        assert_eq!(classify(&tty), (FileKind::Tty, b"/dev/pts/3".to_vec()));
        let null = FileFacts { rdev: (1 << 20) | 3, path: b"/dev/null", ..tty };
        assert_eq!(classify(&null).0, FileKind::CharDev);
    }

    #[test]
    fn the_table_is_bounded_and_keeps_what_is_used() {
        let mut t = FileTable::with_generation(4);
        let mut enc = FrameEncoder::new();
        let name = |k: u64| format!("/f{k}").into_bytes();
        // 0 is used all along; 1..=20 once each.
        t.insert(0, FileKind::Regular, &name(0));
        let mut forgotten = Vec::new();
        for k in 1..=20 {
            t.insert(k, FileKind::Regular, &name(k));
            assert!(t.lookup(0, &mut enc).is_some(), "in use, never forgotten");
            assert!(t.len() <= 3 * 4 + 1, "{}", t.len());
            forgotten.extend(t.take_forgotten());
            t.release_retired();
        }
        assert!(!forgotten.contains(&0));
        assert_eq!(forgotten.len() as u64, t.forgotten);
        assert!(t.forgotten >= 10, "{}", t.forgotten);
        for k in &forgotten {
            assert!(t.path(*k).is_none(), "forgotten {k}");
        }
        // The newest are still known.
        assert_eq!(t.path(20), Some(&b"/f20"[..]));
        // Named again by the kernel side after being forgotten: known again.
        t.insert(1, FileKind::Regular, &name(1));
        assert_eq!(t.path(1), Some(&b"/f1"[..]));
    }

    #[test]
    fn forgotten_entries_resolve_until_released() {
        let mut t = FileTable::with_generation(2);
        let mut enc = FrameEncoder::new();
        for k in 1..=6 {
            t.insert(k, FileKind::Regular, format!("/f{k}").as_bytes());
        }
        let gone = t.take_forgotten();
        assert!(!gone.is_empty());
        // Still in the ring: resolves (and is live again).
        assert!(t.lookup(gone[0], &mut enc).is_some());
        t.release_retired();
        assert!(t.path(gone[0]).is_some(), "used again after being forgotten: kept");
        assert!(gone[1..].iter().all(|k| t.path(*k).is_none()));
    }

    /// A struct file's address named anew (its file closed, the next one
    /// opened there): a sum that comes later for the old inode still gets
    /// the old name, never the new one.
    #[test]
    fn a_reused_address_keeps_its_old_name_for_its_old_inode() {
        let mut t = FileTable::default();
        let mut enc = FrameEncoder::new();
        t.insert_ino(7, FileKind::Pipe, Name::new(b"pipe:[11]"), 11);
        t.insert_ino(7, FileKind::Regular, Name::new(b"/data/a"), 500);
        let (a, pipe) = (enc.intern(b"/data/a"), enc.intern(b"pipe:[11]"));
        assert_eq!(t.lookup_ino(7, 500, &mut enc), Some((a, FileKind::Regular)));
        assert_eq!(t.lookup_ino(7, 11, &mut enc), Some((pipe, FileKind::Pipe)));
        assert_eq!(t.lookup_ino(7, 12, &mut enc), None, "an inode it never named");
        // Without an inode to check, the newest name.
        assert_eq!(t.lookup_ino(7, 0, &mut enc), Some((a, FileKind::Regular)));
    }

    /// One inode number on two filesystems is two files.
    #[test]
    fn an_inode_number_is_told_apart_by_its_device() {
        let mut t = FileTable::default();
        let (data, pipe) = (inode_ident(8 << 20 | 1, 597), inode_ident(14, 597));
        assert_ne!(data, pipe);
        t.insert_passed(3, FileKind::Regular, Name::new(b"/data/597"), data);
        assert!(t.passed_name(3, data));
        assert!(!t.passed_name(3, pipe), "a pipe of the same number is named anew");
        assert_eq!(inode_ident(5, 0), 0, "not known stays not known");
    }

    /// A sum read from a thread's slot a second after its calls may name
    /// an identity the table forgot and released since: by its inode, the
    /// name it had.
    #[test]
    fn a_sum_names_a_file_forgotten_since_its_calls() {
        let mut t = FileTable::with_generation(2);
        let mut enc = FrameEncoder::new();
        t.insert_ino(1, FileKind::Pipe, Name::new(b"pipe:[11]"), 11);
        for k in 2..=7 {
            t.insert_ino(k, FileKind::Regular, Name::new(format!("/f{k}").as_bytes()), 100 + k);
        }
        assert!(t.take_forgotten().contains(&1));
        t.release_retired();
        assert!(t.path(1).is_none(), "released");
        let pipe = enc.intern(b"pipe:[11]");
        assert_eq!(t.lookup_ino(1, 11, &mut enc), Some((pipe, FileKind::Pipe)));
        assert_eq!(t.lookup_ino(1, 12, &mut enc), None, "an inode it never named");
    }

    #[test]
    fn join_is_lexical() {
        assert_eq!(join_normalize(b"/home/u", b"data/../x.bin"), b"/home/u/x.bin");
        assert_eq!(join_normalize(b"/home/u", b"/etc//passwd"), b"/etc/passwd");
        assert_eq!(join_normalize(b"/", b"../../a/./b/"), b"/a/b");
        assert_eq!(join_normalize(b"/a", b".."), b"/");
    }
}
