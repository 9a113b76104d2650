//! Paths of files known only by (dev, inode), as page-cache insertions
//! name them: from the files the kernel side named (opened or used while
//! recording), else from the process's own /proc/PID/maps and fds, else
//! unknown (shown as `dev:inode`).

use rustc_hash::FxHashMap as HashMap;
use std::os::unix::fs::MetadataExt;

use crate::name::{Name, Shared};

/// Files remembered at most; past this the table starts again (and
/// /proc answers for files still mapped or open).
const CAPACITY: usize = 65536;

#[derive(Default)]
pub struct InodeNames {
    /// (kernel dev, inode) -> its name's hash and the name (shared with
    /// the file table), or the pid /proc was asked for in vain. The hash
    /// is here, not only in the name, so that a naming that changes
    /// nothing reads no more than the table.
    map: HashMap<(u32, u64), Result<(u64, Shared), u32>>,
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
    /// A file the kernel side named (a regular file): its name, the one
    /// held when the inode had the same.
    pub fn named(&mut self, dev: u32, ino: u64, path: &[u8]) -> Shared {
        if self.map.len() >= CAPACITY {
            self.map.clear();
        }
        // Every open of a file names it again: the same name is told by its
        // hash (a 64-bit hash of a few dozen bytes, not their comparison:
        // this ran on every open, a tenth of the consumer's time on (b)).
        let h = mltrace_log::hash_bytes(path);
        let slot = self.map.entry((dev, ino)).or_insert(Err(0));
        match slot {
            Ok((had, n)) if *had == h => n.clone(),
            _ => {
                let n = Name::new(path);
                *slot = Ok((h, n.clone()));
                n
            }
        }
    }

    /// The name of (dev, ino) if a file of that inode was named.
    pub fn known(&self, dev: u32, ino: u64) -> Option<&Name> {
        match self.map.get(&(dev, ino)) {
            Some(Ok((_, n))) => Some(n),
            _ => None,
        }
    }

    /// The path of (dev, ino), asking pid's /proc once when not known.
    pub fn lookup(&mut self, dev: u32, ino: u64, pid: u32) -> Option<&[u8]> {
        let known = match self.map.get(&(dev, ino)) {
            Some(Ok(_)) => true,
            // Another process may have it mapped or open: ask it too.
            Some(Err(tried)) => *tried == pid,
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
            if self.map.len() >= CAPACITY {
                self.map.clear();
            }
            let named = found.map(|p| (mltrace_log::hash_bytes(&p), Name::new(&p)));
            self.map.insert((dev, ino), named.ok_or(pid));
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
}
