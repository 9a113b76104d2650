//! Paths of files known only by (dev, inode), as page-cache insertions
//! name them: from the files the kernel side named (opened or used while
//! recording), else from the process's own /proc/PID/maps and fds, else
//! unknown (shown as `dev:inode`).

use std::os::unix::fs::MetadataExt;

use crate::name::{Name, Shared};

/// Files remembered at most; past this the table starts again (and
/// /proc answers for files still mapped or open).
const CAPACITY: usize = 65536;

/// One inode's entry: its name's hash and the name (shared with the file
/// table), or the pid /proc was asked for in vain. The hash is here, not
/// only in the name, so that a naming that changes nothing reads no more
/// than this entry. A slot per half line, never across two.
#[derive(Default)]
#[repr(align(32))]
struct Slot {
    ino: u64,
    dev: u32,
    /// With no name: the pid asked in vain, or 0 for an empty slot.
    tried: u32,
    hash: u64,
    name: Option<Shared>,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.name.is_none() && self.tried == 0
    }
}

/// (kernel dev, inode) -> name, in one array probed in order from a slot
/// its key picks: not a `HashMap`, so that an open's slot can be asked
/// for ahead of it ([`InodeNames::prefetch`]) without reading anything.
#[derive(Default)]
pub struct InodeNames {
    /// A power of two of them, at most half full (none before the first).
    slots: Box<[Slot]>,
    len: usize,
    /// Lookups /proc answered, and could not.
    pub resolved: u64,
    pub unresolved: u64,
}

/// "fe:01" (hex major:minor, as /proc/PID/maps shows it) in the kernel's
/// internal encoding (major << 20 | minor).
fn maps_dev(s: &str) -> Option<u32> {
    let (ma, mi) = s.split_once(':')?;
    Some((u32::from_str_radix(ma, 16).ok()? << 20) | u32::from_str_radix(mi, 16).ok()?)
}

/// A path from `/proc/PID/maps` text for a mapping of (dev, ino).
pub fn path_in_maps(text: &str, dev: u32, ino: u64) -> Option<Vec<u8>> {
    for line in text.lines() {
        // start-end perms offset dev inode   path
        let mut f = line.splitn(6, ' ');
        let (_, _, _, d, i) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        if i.parse::<u64>().ok() != Some(ino) || maps_dev(d) != Some(dev) {
            continue;
        }
        let path = f.next().unwrap_or("").trim_start();
        if path.starts_with('/') {
            return Some(path.trim_end_matches(" (deleted)").as_bytes().to_vec());
        }
    }
    None
}

fn from_fds(pid: u32, dev: u32, ino: u64) -> Option<Vec<u8>> {
    let (major, minor) = (dev >> 20, dev & 0xfffff);
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let Ok(m) = std::fs::metadata(fd.path()) else { continue };
        let d = m.dev();
        if m.ino() == ino && libc::major(d) == major && libc::minor(d) == minor {
            let p = std::fs::read_link(fd.path()).ok()?;
            return Some(p.into_os_string().into_encoded_bytes());
        }
    }
    None
}

impl InodeNames {
    /// The slot (dev, ino) is in, or the empty one it would go in.
    #[inline]
    fn find(&self, dev: u32, ino: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(dev, ino);
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return Err(i);
            }
            if s.ino == ino && s.dev == dev {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn home(&self, dev: u32, ino: u64) -> usize {
        let h = (ino ^ u64::from(dev).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    fn get(&self, dev: u32, ino: u64) -> Option<&Slot> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(dev, ino).ok().map(|i| &self.slots[i])
    }

    /// The slot of (dev, ino), made (empty of names) where it is not.
    fn slot(&mut self, dev: u32, ino: u64) -> &mut Slot {
        if let Some(Ok(i)) = (!self.slots.is_empty()).then(|| self.find(dev, ino)) {
            return &mut self.slots[i];
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        // Not there, and room made: the search ends at an empty slot.
        let i = self.find(dev, ino).unwrap_or_else(|i| i);
        self.len += 1;
        self.slots[i] = Slot { ino, dev, tried: 0, hash: 0, name: None };
        &mut self.slots[i]
    }

    /// Twice the room, or a fresh start at [`CAPACITY`].
    #[cold]
    fn grow(&mut self) {
        let start_over = self.len >= CAPACITY;
        let size = if start_over { 1024 } else { (self.slots.len() * 2).max(1024) };
        let old = std::mem::replace(&mut self.slots, (0..size).map(|_| Slot::default()).collect());
        self.len = 0;
        if start_over {
            return;
        }
        for s in old.into_vec().into_iter().filter(|s| !s.is_empty()) {
            if let Err(i) = self.find(s.dev, s.ino) {
                self.slots[i] = s;
                self.len += 1;
            }
        }
    }

    /// Asks for (dev, ino)'s slot ahead of its naming (see [`crate::cache`]).
    #[inline]
    pub fn prefetch(&self, dev: u32, ino: u64) {
        if !self.slots.is_empty() {
            crate::cache::prefetch(&self.slots[self.home(dev, ino)]);
        }
    }

    /// Asks for (dev, ino)'s name, its slot fetched by now.
    #[inline]
    pub fn prefetch_name(&self, dev: u32, ino: u64) {
        if let Some(n) = self.get(dev, ino).and_then(|s| s.name.as_ref()) {
            crate::cache::prefetch(std::sync::Arc::as_ptr(n));
        }
    }

    /// A file the kernel side named (a regular file): its name, the one
    /// held when the inode had the same.
    pub fn named(&mut self, dev: u32, ino: u64, path: &[u8]) -> Shared {
        // Every open of a file names it again: the same name is told by its
        // hash (a 64-bit hash of a few dozen bytes, not their comparison:
        // this ran on every open, a tenth of the consumer's time on (b)).
        let h = mltrace_log::hash_bytes(path);
        let slot = self.slot(dev, ino);
        match &slot.name {
            Some(n) if slot.hash == h => n.clone(),
            _ => {
                let n = Name::new(path);
                (slot.hash, slot.name, slot.tried) = (h, Some(n.clone()), 0);
                n
            }
        }
    }

    /// The name of (dev, ino) if a file of that inode was named.
    pub fn known(&self, dev: u32, ino: u64) -> Option<&Name> {
        self.get(dev, ino)?.name.as_deref()
    }

    /// The path of (dev, ino), asking pid's /proc once when not known.
    pub fn lookup(&mut self, dev: u32, ino: u64, pid: u32) -> Option<&[u8]> {
        let known = match self.get(dev, ino) {
            Some(s) if s.name.is_some() => true,
            // Another process may have it mapped or open: ask it too.
            Some(s) => s.tried == pid,
            None => false,
        };
        if !known {
            let found = std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .ok()
                .and_then(|t| path_in_maps(&t, dev, ino))
                .or_else(|| from_fds(pid, dev, ino));
            if found.is_some() {
                self.resolved += 1;
            } else {
                self.unresolved += 1;
            }
            let slot = self.slot(dev, ino);
            match found {
                Some(p) => (slot.hash, slot.name, slot.tried) = (mltrace_log::hash_bytes(&p), Some(Name::new(&p)), 0),
                // Never 0 (an empty slot): pid 0 is not a process that maps files.
                None => slot.tried = pid.max(1),
            }
        }
        self.known(dev, ino).map(Name::path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_mapping_by_dev_and_inode() {
        let maps = "\
55d0c6a00000-55d0c6a02000 r--p 00000000 fe:00 2621541                    /usr/bin/cat
7f1c2e000000-7f1c36000000 r--s 00000000 fe:01 131090                     /data/shard 0001.arrow
7f1c36000000-7f1c37000000 r--s 00000000 fe:01 131091                     /data/gone.bin (deleted)
7ffd5a1e0000-7ffd5a201000 rw-p 00000000 00:00 0                          [stack]
";
        let dev = (0xfe << 20) | 1;
        assert_eq!(path_in_maps(maps, dev, 131090).as_deref(), Some(&b"/data/shard 0001.arrow"[..]));
        assert_eq!(path_in_maps(maps, dev, 131091).as_deref(), Some(&b"/data/gone.bin"[..]));
        assert_eq!(path_in_maps(maps, 0xfe << 20, 131090), None, "same inode, other filesystem");
        assert_eq!(path_in_maps(maps, 0, 0), None, "anonymous mappings have no path");
        assert_eq!(path_in_maps("garbage\n\n1 2", dev, 1), None);
    }

    #[test]
    fn remembers_named_files_and_asks_proc_once_per_process() {
        let mut n = InodeNames::default();
        n.named(1 << 20, 7, b"/a");
        assert_eq!(n.lookup(1 << 20, 7, 1), Some(&b"/a"[..]));
        // Our own fds: a file we hold open is found by its inode.
        let f = tempfile::NamedTempFile::new().unwrap();
        let m = f.as_file().metadata().unwrap();
        let dev = (libc::major(m.dev()) << 20) | libc::minor(m.dev());
        let me = std::process::id();
        let want = f.path().canonicalize().unwrap().into_os_string().into_encoded_bytes();
        assert_eq!(n.lookup(dev, m.ino(), me), Some(&want[..]));
        assert_eq!(n.lookup(dev, u64::MAX, me), None);
        assert_eq!((n.resolved, n.unresolved), (1, 1));
        assert_eq!(n.lookup(dev, u64::MAX, me), None);
        assert_eq!(n.unresolved, 1, "not asked again for the same process");
    }

    #[test]
    fn holds_many_inodes_and_starts_again_past_its_capacity() {
        let mut n = InodeNames::default();
        n.prefetch(1, 1);
        n.prefetch_name(1, 1);
        assert!(n.known(1, 1).is_none(), "an empty table knows nothing");
        let path = |i: u64| format!("/data/{i}").into_bytes();
        // Two devices with the same inode numbers: different files.
        for i in 0..CAPACITY as u64 / 2 {
            n.named(1 << 20, i + 1, &path(i));
            n.named(2 << 20, i + 1, &path(i + 1_000_000));
        }
        assert_eq!(n.len, CAPACITY);
        for i in (0..CAPACITY as u64 / 2).step_by(997) {
            assert_eq!(n.known(1 << 20, i + 1).map(Name::path), Some(&path(i)[..]));
            assert_eq!(n.known(2 << 20, i + 1).map(Name::path), Some(&path(i + 1_000_000)[..]));
        }
        // The same name again is the same name; another path names it anew.
        let a = n.named(1 << 20, 5, &path(4));
        assert!(std::sync::Arc::ptr_eq(&a, &n.named(1 << 20, 5, &path(4))));
        let b = n.named(1 << 20, 5, b"/data/renamed");
        assert_eq!(b.path(), b"/data/renamed");
        assert_eq!(n.len, CAPACITY, "named anew in its slot");
        // One more starts the table again, with that one in it.
        n.named(3 << 20, 1, b"/x");
        assert_eq!(n.len, 1);
        assert!(n.known(1 << 20, 5).is_none());
        assert_eq!(n.known(3 << 20, 1).map(Name::path), Some(&b"/x"[..]));
    }
}
