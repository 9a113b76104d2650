//! Kernel ring-buffer records -> log records. Runs on the consumer thread
//! for every event, so it allocates only for strings the kernel sends once
//! (file names, exec arguments), never for reads and writes.

use std::mem::{offset_of, size_of, MaybeUninit};

use mltrace_log::*;

mod aio;
mod block;
mod gpu;
mod io;
mod mem;
mod meta;
mod net;
mod open;
mod proc;
mod sched;

pub(crate) use io::io_op;
pub(crate) use sched::span_record;

use crate::files::FileTable;
use crate::inodes::InodeNames;
use crate::skel::types::{
    self, ev_aio, ev_block, ev_close, ev_comm, ev_exec, ev_exit, ev_fault, ev_file, ev_fork, ev_gpu, ev_hdr, ev_io,
    ev_kind, ev_map, ev_meta, ev_nccl, ev_net, ev_open, ev_pcache, ev_sched, ev_span, ev_untraced, ev_uring, ev_xfer,
    sum_slot,
};

/// BPF flag bits, as events.h declares them (its enums reach the skeleton).
const TR_ARG: u8 = types::str_bits::TR_ARG.0 as u8;
const TR_ABS: u8 = types::str_bits::TR_ABS.0 as u8;
const TR_UNREADABLE: u8 = types::str_bits::TR_UNREADABLE.0 as u8;
const F_DISCONNECTED: u8 = types::str_bits::F_DISCONNECTED.0 as u8;
const F_PASSED: u8 = types::str_bits::F_PASSED.0 as u8;

/// Copies the first bytes of `data` into a zeroed `T` (a plain C struct from
/// the skeleton, valid for any bytes). Records with strings are shorter than
/// their struct: only what was sent is copied.
fn read<T: Copy>(data: &[u8]) -> T {
    let mut v = MaybeUninit::<T>::zeroed();
    let n = data.len().min(size_of::<T>());
    // SAFETY: `n` bytes fit both buffers; T is a repr(C) struct of integers
    // and integer arrays, so every byte pattern is a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), v.as_mut_ptr().cast::<u8>(), n);
        v.assume_init()
    }
}

/// A record struct with room for its strings (ev_open carries 8 KiB of
/// them), kept between records: [`read`] would zero all of it for every
/// open, where only the sent prefix is copied here. What lies past that
/// prefix is a previous record's bytes; strings are read from the record.
struct Reused<T>(Option<Box<T>>);

impl<T> Default for Reused<T> {
    fn default() -> Self {
        Reused(None)
    }
}

impl<T: Copy> Reused<T> {
    fn read(&mut self, data: &[u8]) -> Box<T> {
        // SAFETY: T is a repr(C) struct of integers and integer arrays, so
        // all-zero bytes are a valid value.
        let mut b = self.0.take().unwrap_or_else(|| unsafe { Box::<T>::new_zeroed().assume_init() });
        let n = data.len().min(size_of::<T>());
        // SAFETY: `n` bytes fit both; any byte pattern is a valid T.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (&mut *b as *mut T).cast::<u8>(), n) };
        b
    }

    fn give_back(&mut self, b: Box<T>) {
        self.0 = Some(b);
    }
}

/// An absolute path that lexical normalisation leaves as it is (no empty,
/// `.` or `..` component, no trailing `/`).
fn is_normal(p: &[u8]) -> bool {
    p.first() == Some(&b'/')
        && (p.len() == 1
            || (p.last() != Some(&b'/') && p[1..].split(|&b| b == b'/').all(|c| !matches!(c, b"" | b"." | b".."))))
}

fn tail(data: &[u8], offset: usize, len: usize) -> &[u8] {
    data.get(offset..).map(|d| &d[..len.min(d.len())]).unwrap_or(&[])
}

fn cstr(b: &[i8]) -> Vec<u8> {
    b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect()
}

/// Counts of what the decoder produced and what it could not.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeStats {
    pub records: u64,
    pub malformed: u64,
    pub unknown_file: u64,
    /// File events left out by `--path`.
    pub filtered: u64,
    /// Block requests shown without their issuer (see `hide_others_block`).
    pub block_hidden: u64,
}

#[derive(Default)]
pub struct KernelDecoder {
    /// Processes that stopped being traced as they became another user
    /// or group, each said in a sentence (the first 64).
    pub untraced: Vec<String>,
    /// By pid: its last exec's id (low 16 bits) and time, for summaries.
    pub(crate) execs: rustc_hash::FxHashMap<u32, (u16, u64)>,
    /// Summary slots their threads sent, for [`crate::summary::Summaries`].
    pub(crate) sums: Vec<crate::bpf::SlotSum>,
    files: FileTable,
    /// Paths by (dev, inode), for page-cache insertions.
    inodes: InodeNames,
    /// The last page-cache file's path, interned in the current frame:
    /// (dev, inode, frame generation, id).
    last_pcache: Option<(u32, u64, u64, StrId)>,
    page_size: u64,
    /// SQPOLL threads already named (they are never forked where
    /// sched_process_fork sees them).
    sqpoll_named: Vec<u32>,
    /// The command's pid until it has exec'd: its syscalls before that are
    /// mltrace's own launch handshake, not the command's.
    pre_exec: Option<u32>,
    open_buf: Reused<ev_open>,
    meta_buf: Reused<ev_meta>,
    file_buf: Reused<ev_file>,
    /// A network call's peer as text, before it is interned (reused).
    peer_buf: Vec<u8>,
    /// `--path`: only file events on paths under this prefix are kept.
    path_filter: Option<Vec<u8>>,
    /// Without root: block requests of processes not traced (kernel
    /// threads aside) keep their disk, sector and size but not who issued
    /// them (another user's I/O).
    hide_others_block: bool,
    /// Watch mappings for `libcuda.so*` and `libnccl.so*` files (see
    /// [`Self::take_libraries`]).
    lib_watch: bool,
    /// The library paths seen mapped, and those not yet taken.
    lib_seen: Vec<Vec<u8>>,
    lib_new: Vec<Vec<u8>>,
    pub stats: DecodeStats,
}

impl KernelDecoder {
    /// A decoder for a recording whose command is `root_pid`.
    pub fn for_command(root_pid: u32) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        KernelDecoder { pre_exec: Some(root_pid), page_size, ..Default::default() }
    }

    /// A decoder whose file table forgets identities unused for
    /// `generation` others (see [`FileTable`]).
    pub fn with_file_generation(root_pid: u32, generation: usize) -> Self {
        KernelDecoder { files: FileTable::with_generation(generation), ..Self::for_command(root_pid) }
    }

    /// A decoder for a recording that attached to running processes
    /// (nothing of theirs is a launch handshake); with `--path`, file
    /// events on other paths are left out.
    /// See `hide_others_block`: a recorder run by a user other than root
    /// (with capabilities) must not show what other users' processes do.
    pub fn hide_others_block_io(&mut self, hide: bool) {
        self.hide_others_block = hide;
    }

    /// Notes the `libcuda.so*` and `libnccl.so*` files traced processes
    /// map, for the recorder to attach the CUDA and NCCL probes to.
    pub fn watch_libraries(&mut self, on: bool) {
        self.lib_watch = on;
    }

    /// The probed libraries' files mapped since the last call (each path once).
    pub fn take_libraries(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.lib_new)
    }

    #[cold]
    fn lib_mapped(&mut self, key: u64) {
        let Some(p) = self.files.path(key) else { return };
        if crate::cuda::library_of(p).is_some() && self.lib_seen.len() < 256 && !self.lib_seen.iter().any(|s| s == p) {
            self.lib_seen.push(p.to_vec());
            self.lib_new.push(p.to_vec());
        }
    }

    pub fn attached(generation: usize, path_filter: Option<Vec<u8>>) -> Self {
        KernelDecoder { pre_exec: None, path_filter, ..Self::with_file_generation(0, generation) }
    }

    /// Whether `--path` keeps an event on file identity `key` (an unknown
    /// file is kept: it is counted as such, never hidden).
    #[inline]
    fn keeps(&mut self, key: u64) -> bool {
        let Some(prefix) = &self.path_filter else { return true };
        let keep = match self.files.path(key) {
            Some(p) => crate::attach::under(p, prefix),
            None => key != 0,
        };
        self.stats.filtered += u64::from(!keep);
        keep
    }

    /// The same for a path already known.
    #[inline]
    fn keeps_path(&mut self, path: Option<&[u8]>) -> bool {
        let Some(prefix) = &self.path_filter else { return true };
        let keep = path.is_some_and(|p| crate::attach::under(p, prefix));
        self.stats.filtered += u64::from(!keep);
        keep
    }

    pub fn files(&self) -> &FileTable {
        &self.files
    }

    pub fn files_mut(&mut self) -> &mut FileTable {
        &mut self.files
    }

    /// The path id and kind of a file identity; key 0 is "no file" (a bad fd).
    #[inline]
    fn file(&mut self, key: u64, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        if key == 0 {
            return (enc.intern(b""), FileKind::Unknown);
        }
        match self.files.lookup(key, enc) {
            Some(v) => v,
            None => {
                self.stats.unknown_file += 1;
                (enc.intern(b"?"), FileKind::Unknown)
            }
        }
    }

    /// The path id and kind of the file an [`IoSummary`](mltrace_log::IoSummary)
    /// sums: by its inode for a regular file (its struct file may have
    /// been reused since, by the next file the loader opened), else by its
    /// identity; none for a close.
    pub fn summed_file(&mut self, key: u64, dev: u32, ino: u64, pid: u32, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        if key == 0 && ino == 0 {
            return (enc.intern(b""), FileKind::Unknown);
        }
        if let Some(p) = self.inodes.known(dev, ino) {
            return (enc.intern(p), FileKind::Regular);
        }
        if let Some(found) = self.files.lookup_ino(key, ino, enc) {
            return found;
        }
        match self.inodes.lookup(dev, ino, pid) {
            Some(p) => (enc.intern(p), FileKind::Regular),
            None => {
                self.stats.unknown_file += 1;
                (enc.intern(b"?"), FileKind::Unknown)
            }
        }
    }

    /// Decodes one ring record into zero or more log records.
    pub fn decode(&mut self, data: &[u8], enc: &mut FrameEncoder) {
        if data.len() < size_of::<ev_hdr>() {
            self.stats.malformed += 1;
            return;
        }
        let h: ev_hdr = read(data);
        let need = match ev_kind(h.kind.into()) {
            ev_kind::EV_IO => size_of::<ev_io>(),
            ev_kind::EV_CLOSE => size_of::<ev_close>(),
            ev_kind::EV_XFER => size_of::<ev_xfer>(),
            ev_kind::EV_FORK => size_of::<ev_fork>(),
            ev_kind::EV_EXIT => size_of::<ev_exit>(),
            ev_kind::EV_COMM => size_of::<ev_comm>(),
            ev_kind::EV_FILE => offset_of!(ev_file, path),
            ev_kind::EV_OPEN => offset_of!(ev_open, path),
            ev_kind::EV_EXEC => offset_of!(ev_exec, data),
            ev_kind::EV_BLOCK => size_of::<ev_block>(),
            ev_kind::EV_PCACHE => size_of::<ev_pcache>(),
            ev_kind::EV_URING => size_of::<ev_uring>(),
            ev_kind::EV_AIO => size_of::<ev_aio>(),
            ev_kind::EV_SCHED => size_of::<ev_sched>(),
            ev_kind::EV_SPAN => size_of::<ev_span>(),
            ev_kind::EV_MAP => size_of::<ev_map>(),
            ev_kind::EV_FAULT => size_of::<ev_fault>(),
            ev_kind::EV_NET => size_of::<ev_net>(),
            ev_kind::EV_GPU => size_of::<ev_gpu>(),
            ev_kind::EV_NCCL => size_of::<ev_nccl>(),
            ev_kind::EV_UNTRACED => size_of::<ev_untraced>(),
            ev_kind::EV_SUM => size_of::<sum_slot>(),
            ev_kind::EV_META => offset_of!(ev_meta, path),
            _ => usize::MAX,
        };
        if data.len() < need {
            self.stats.malformed += 1;
            return;
        }
        let kind = ev_kind(h.kind.into());
        if let Some(root) = self.pre_exec {
            if h.pid == root {
                match kind {
                    ev_kind::EV_EXEC => self.pre_exec = None,
                    ev_kind::EV_IO
                    | ev_kind::EV_OPEN
                    | ev_kind::EV_CLOSE
                    | ev_kind::EV_XFER
                    | ev_kind::EV_PCACHE
                    | ev_kind::EV_URING
                    | ev_kind::EV_AIO
                    | ev_kind::EV_MAP
                    | ev_kind::EV_FAULT
                    | ev_kind::EV_NET
                    | ev_kind::EV_META => return,
                    _ => {}
                }
            }
        }
        self.stats.records += 1;
        match kind {
            ev_kind::EV_SUM => self.sums.extend(crate::bpf::SlotSum::parse(data)),
            ev_kind::EV_IO => self.io(&h, data, enc),
            ev_kind::EV_CLOSE => self.close(&h, data, enc),
            ev_kind::EV_XFER => self.xfer(&h, data, enc),
            ev_kind::EV_NET => self.net(&h, data, enc),
            ev_kind::EV_META => self.meta(&h, data, enc),
            ev_kind::EV_GPU => self.gpu(&h, data, enc),
            ev_kind::EV_UNTRACED => self.untraced(&h, data, enc),
            ev_kind::EV_NCCL => self.nccl(&h, data, enc),
            ev_kind::EV_FILE => self.file_named(data),
            ev_kind::EV_OPEN => self.open(&h, data, enc),
            ev_kind::EV_FORK => self.fork(&h, data, enc),
            ev_kind::EV_EXEC => self.exec(&h, data, enc),
            ev_kind::EV_EXIT => self.exit(&h, data, enc),
            ev_kind::EV_COMM => self.comm(&h, data, enc),
            ev_kind::EV_PCACHE => self.pcache(&h, data, enc),
            ev_kind::EV_URING => self.uring(&h, data, enc),
            ev_kind::EV_AIO => self.aio(&h, data, enc),
            ev_kind::EV_SPAN => {
                let e: ev_span = read(data);
                enc.push(&span_record(&e));
            }
            ev_kind::EV_SCHED => self.sched(data, enc),
            ev_kind::EV_MAP => self.map(&h, data, enc),
            ev_kind::EV_FAULT => self.major_fault(&h, data, enc),
            ev_kind::EV_BLOCK => self.block(data, enc),
            _ => {
                self.stats.records -= 1;
                self.stats.malformed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::join_normalize;

    #[test]
    fn a_normal_path_is_what_normalising_it_gives() {
        for p in ["/", "/a", "/data/train/0001.jpg", "/a/.hidden/b", "/a/..b/c", "/a/b.", "/a/..."] {
            assert!(is_normal(p.as_bytes()), "{p}");
            assert_eq!(join_normalize(b"/", p.as_bytes()), p.as_bytes(), "{p}");
        }
        for p in ["", "a/b", "//a", "/a//b", "/a/./b", "/a/../b", "/a/", "/a/.", "/a/.."] {
            assert!(!is_normal(p.as_bytes()), "{p}");
        }
    }
}
