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
mod python;
mod sched;
mod summary;

pub(crate) use aio::read_uring_ops;
pub(crate) use io::io_op;
pub(crate) use mem::anon_summaries;
pub(crate) use sched::open_spans;

use crate::files::FileTable;
use crate::inodes::InodeNames;
use crate::skel::types::{self, ev_file, ev_hdr, ev_open};

/// BPF flag bits, as events.h declares them (its enums reach the skeleton).
const TR_ARG: u8 = types::str_bits::TR_ARG.0 as u8;
const TR_ABS: u8 = types::str_bits::TR_ABS.0 as u8;
const TR_UNREADABLE: u8 = types::str_bits::TR_UNREADABLE.0 as u8;
const F_DISCONNECTED: u8 = types::str_bits::F_DISCONNECTED.0 as u8;
const F_PASSED: u8 = types::str_bits::F_PASSED.0 as u8;

/// Copies the first bytes of `data` into a zeroed `T` (a plain C struct from
/// the skeleton, valid for any bytes). Records with strings are shorter than
/// their struct: only what was sent is copied.
#[inline]
fn read<T: Copy>(data: &[u8]) -> T {
    if data.len() >= size_of::<T>() {
        // SAFETY: the bytes are there; any byte pattern is a valid T (as
        // below). A copy of a known size, not a call to memcpy.
        return unsafe { data.as_ptr().cast::<T>().read_unaligned() };
    }
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
/// open. Only its fields before the strings (`HEAD` bytes) are copied
/// here; the strings are read from the record itself (the box's bytes
/// past `HEAD` stay zeros).
struct Reused<T, const HEAD: usize>(Option<Box<T>>);

impl<T, const HEAD: usize> Default for Reused<T, HEAD> {
    fn default() -> Self {
        Reused(None)
    }
}

impl<T: Copy, const HEAD: usize> Reused<T, HEAD> {
    fn read(&mut self, data: &[u8]) -> Box<T> {
        // SAFETY: T is a repr(C) struct of integers and integer arrays, so
        // all-zero bytes are a valid value.
        const { assert!(HEAD <= size_of::<T>()) };
        let mut b = self.0.take().unwrap_or_else(|| unsafe { Box::<T>::new_zeroed().assume_init() });
        if data.len() >= HEAD {
            // A constant size: copied inline, not by a call whose wide
            // stores the fields' loads then wait for.
            // SAFETY: HEAD bytes fit both; any byte pattern is a valid T.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (&mut *b as *mut T).cast::<u8>(), HEAD) };
            return b;
        }
        // A record shorter than its fields (its decoder checked its kind's
        // least length): the rest reads as zeros, not as the last record's.
        // SAFETY: as above; HEAD is at most the struct's size, and the
        // record's bytes fewer.
        unsafe {
            std::ptr::write_bytes((&mut *b as *mut T).cast::<u8>(), 0, HEAD);
            std::ptr::copy_nonoverlapping(data.as_ptr(), (&mut *b as *mut T).cast::<u8>(), data.len());
        }
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

/// The 8 bytes of `data` at `at` as a number (0 where the record is
/// shorter), for the fields read before a record is decoded.
#[inline]
fn word(data: &[u8], at: usize) -> u64 {
    data.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
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
    pub(crate) sums: Vec<crate::summary::SlotSum>,
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
    open_buf: Reused<ev_open, { offset_of!(ev_open, path) }>,
    /// Opens looked at ahead (see [`Self::ahead`]).
    ahead: open::Ahead,
    meta_buf: meta::Buf,
    file_buf: Reused<ev_file, { offset_of!(ev_file, path) }>,
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
    /// Python stacks, and the processes to look at for them.
    pub py: crate::python::PyStacks,
    pub stats: DecodeStats,
}

impl KernelDecoder {
    /// A decoder for a recording whose command is `root_pid`.
    pub fn for_command(root_pid: u32) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        KernelDecoder { pre_exec: Some(root_pid), page_size, ..Default::default() }
    }

    /// Whether the file table keeps the names of identities named anew,
    /// for the sums that come after (`--detail summary`; on by default).
    pub fn keep_replaced_names(&mut self, on: bool) {
        self.files.keep_replaced = on;
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
    /// identity; none for a close. `None` when no name is known yet (see
    /// [`Self::unnamed_sum`]).
    pub fn summed_file(
        &mut self,
        key: u64,
        dev: u32,
        ino: u64,
        pid: u32,
        enc: &mut FrameEncoder,
    ) -> Option<(StrId, FileKind)> {
        if key == 0 && ino == 0 {
            return Some((enc.intern(b""), FileKind::Unknown));
        }
        if let Some(n) = self.inodes.known(dev, ino) {
            return Some((n.id_in(enc), FileKind::Regular));
        }
        if let Some(found) = self.files.lookup_ino(key, crate::files::inode_ident(dev, ino), enc) {
            return Some(found);
        }
        self.inodes.lookup(dev, ino, pid).map(|p| (enc.intern(p), FileKind::Regular))
    }

    /// A sum whose file no name was found for: counted, and shown as `?`.
    pub fn unnamed_sum(&mut self, enc: &mut FrameEncoder) -> (StrId, FileKind) {
        self.stats.unknown_file += 1;
        (enc.intern(b"?"), FileKind::Unknown)
    }

    /// A ring record a few records before [`Self::decode`] is given it
    /// (see [`crate::ring::Sink`]).
    #[inline]
    pub fn ahead(&mut self, data: &[u8]) {
        self.ahead.looked += 1;
        if data.first() == Some(&Open::CODE) {
            self.open_ahead(data);
        }
        self.opens_ahead();
    }

    /// Decodes one ring record into zero or more log records.
    pub fn decode(&mut self, data: &[u8], enc: &mut FrameEncoder) {
        if data.len() < size_of::<ev_hdr>() {
            self.stats.malformed += 1;
            return;
        }
        let h: ev_hdr = read(data);
        let Some(ev) = event_of(h.kind) else {
            self.stats.malformed += 1;
            return;
        };
        if data.len() < ev.min {
            self.stats.malformed += 1;
            return;
        }
        if let Some(root) = self.pre_exec {
            if h.pid == root {
                if ev.kind == Exec::CODE {
                    self.pre_exec = None;
                } else if ev.commands_io {
                    return;
                }
            }
        }
        self.stats.records += 1;
        (ev.decode)(self, &h, data, enc);
    }
}

/// How the decoder reads one kind of event the programs send.
struct Event {
    /// Its code (the log kind's, or a ring-only code of 64 and up).
    kind: u8,
    /// The bytes it needs at least (a record with a path is shorter than
    /// its struct: the path is sent at its real length).
    min: usize,
    /// The command's own I/O: dropped until the command's exec (before
    /// it, the process is still mltrace's launcher).
    commands_io: bool,
    decode: fn(&mut KernelDecoder, &ev_hdr, &[u8], &mut FrameEncoder),
}

/// Codes of the events only the ring has (64 and up: no log kind has
/// one), as their BPF headers declare them with EV_KIND.
const RING_FILE: u8 = 64;
const RING_UNTRACED: u8 = 65;
const RING_PYPROBE: u8 = 66;
const RING_PYCODE: u8 = 67;

/// Every module's events: a code the programs send that no module
/// decodes is counted as malformed.
const EVENT_LISTS: &[&[Event]] = &[
    aio::EVENTS,
    block::EVENTS,
    gpu::EVENTS,
    io::EVENTS,
    mem::EVENTS,
    meta::EVENTS,
    net::EVENTS,
    open::EVENTS,
    proc::EVENTS,
    python::EVENTS,
    sched::EVENTS,
    summary::EVENTS,
];

/// (list, entry) + 1 of each code in [`EVENT_LISTS`] (0: none): the
/// decoder looks a record's kind up once.
const EVENT_OF: [(u8, u8); 128] = {
    let mut t = [(0u8, 0u8); 128];
    let mut l = 0;
    while l < EVENT_LISTS.len() {
        let mut i = 0;
        while i < EVENT_LISTS[l].len() {
            let k = EVENT_LISTS[l][i].kind as usize;
            assert!(k < t.len() && t[k].0 == 0, "an event code below 128, decoded by one module");
            t[k] = (l as u8 + 1, i as u8);
            i += 1;
        }
        l += 1;
    }
    t
};

/// The decoder of event code `kind`.
#[inline]
fn event_of(kind: u8) -> Option<&'static Event> {
    let (l, i) = *EVENT_OF.get(usize::from(kind))?;
    EVENT_LISTS.get(usize::from(l).wrapping_sub(1))?.get(usize::from(i))
}

/// A ring record's merge key (see [`crate::ring::Merged`]): a clock read
/// its program made after whatever the record depends on. A call's record
/// carries its start and duration, whose sum is its exit's clock read; a
/// block request's, its completion; every other record's header time is
/// its program's own (a summary's sum: set as it is sent).
pub fn record_key(data: &[u8]) -> u64 {
    let ts = word(data, offset_of!(ev_hdr, ts));
    match KEY_AT[usize::from(data.first().copied().unwrap_or(0))] {
        0 => ts,
        at if at & KEY_ALONE != 0 => word(data, usize::from(at & !KEY_ALONE)),
        at => ts.wrapping_add(word(data, usize::from(at))),
    }
}

/// [`record_key`]'s word by kind: 0, none (the header's time); else its
/// offset, added to the header's time (a call's duration) or, marked
/// [`KEY_ALONE`], the key by itself (a block request's completion).
const KEY_AT: [u8; 256] = {
    const fn at(offset: usize) -> u8 {
        assert!(offset > 0 && offset < KEY_ALONE as usize, "a key word's offset fits 7 bits");
        offset as u8
    }
    let mut t = [0u8; 256];
    t[Io::CODE as usize] = at(offset_of!(types::ev_io, dur));
    t[Close::CODE as usize] = at(offset_of!(types::ev_close, dur));
    t[Transfer::CODE as usize] = at(offset_of!(types::ev_xfer, dur));
    t[Open::CODE as usize] = at(offset_of!(ev_open, dur));
    t[Mapping::CODE as usize] = at(offset_of!(types::ev_map, dur));
    t[IoUring::CODE as usize] = at(offset_of!(types::ev_uring, dur));
    t[Aio::CODE as usize] = at(offset_of!(types::ev_aio, dur));
    t[NetCall::CODE as usize] = at(offset_of!(types::ev_net, dur));
    t[MetaCall::CODE as usize] = at(offset_of!(types::ev_meta, dur));
    t[GpuCall::CODE as usize] = at(offset_of!(types::ev_gpu, dur));
    t[Collective::CODE as usize] = at(offset_of!(types::ev_nccl, dur));
    t[Block::CODE as usize] = at(offset_of!(types::ev_block, complete)) | KEY_ALONE;
    t
};
const KEY_ALONE: u8 = 0x80;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::files::join_normalize;

    /// A record's fields before its strings are copied whole; a record
    /// shorter than them reads zeros past its end, never the last one's.
    #[test]
    fn a_reused_heads_short_record_reads_zeros_past_its_end() {
        const HEAD: usize = offset_of!(ev_open, path);
        let mut buf = Reused::<ev_open, HEAD>::default();
        let full = keyed::<ev_open>(7, 11, offset_of!(ev_open, ino), 0x5555);
        let e = buf.read(&full);
        assert_eq!((e.h.kind, e.h.ts, e.ino), (7, 11, 0x5555));
        buf.give_back(e);
        let short = &keyed::<ev_open>(8, 12, offset_of!(ev_open, dur), 3)[..offset_of!(ev_open, ino)];
        let e = buf.read(short);
        assert_eq!((e.h.kind, e.h.ts, e.dur, e.ino), (8, 12, 3, 0));
    }

    /// A record of `T` with its header's time, and `at` holding `word`.
    fn keyed<T: Copy>(kind: u8, ts: u64, at: usize, word: u64) -> Vec<u8> {
        let mut b = vec![0u8; size_of::<T>()];
        b[0] = kind;
        b[offset_of!(ev_hdr, ts)..][..8].copy_from_slice(&ts.to_ne_bytes());
        b[at..at + 8].copy_from_slice(&word.to_ne_bytes());
        b
    }

    #[test]
    fn a_records_key_is_its_calls_end_or_its_requests_completion() {
        let (ts, w) = (1_000_000, 2_500);
        let io = keyed::<types::ev_io>(Io::CODE, ts, offset_of!(types::ev_io, dur), w);
        assert_eq!(record_key(&io), ts + w, "a read: its start plus its duration");
        let open = keyed::<ev_open>(Open::CODE, ts, offset_of!(ev_open, dur), w);
        assert_eq!(record_key(&open), ts + w);
        let meta = keyed::<types::ev_meta>(MetaCall::CODE, ts, offset_of!(types::ev_meta, dur), w);
        assert_eq!(record_key(&meta), ts + w);
        let block = keyed::<types::ev_block>(Block::CODE, ts, offset_of!(types::ev_block, complete), 7 * w);
        assert_eq!(record_key(&block), 7 * w, "a block request: its completion");
        let sched = keyed::<types::ev_sched>(SchedSwitch::CODE, ts, 24, w);
        assert_eq!(record_key(&sched), ts, "anything else: its header's time");
        assert_eq!(record_key(&io[..20]), 0, "too short for a time");
    }

    const EVENTS_H: &str = include_str!("../../../bpf/events.h");
    const GPU_H: &str = include_str!("../../../bpf/mltrace/gpu.bpf.h");

    /// The members of C's `enum name { ... }` in `src` with their values
    /// (one without a value is the previous one's plus one, as in C).
    pub(crate) fn c_enum(src: &str, name: &str) -> Vec<(String, u64)> {
        let at = src.find(&format!("enum {name} {{")).unwrap_or_else(|| panic!("no enum {name}"));
        let mut body = src[at..].split_once('{').unwrap().1.split_once("};").unwrap().0.to_string();
        while let Some(i) = body.find("/*") {
            let j = i + body[i..].find("*/").unwrap() + 2;
            body.replace_range(i..j, "");
        }
        let mut next = 0;
        let members = body.split(',').map(str::trim).filter(|m| !m.is_empty());
        members
            .map(|m| {
                let (n, v) = match m.split_once('=') {
                    Some((n, v)) => {
                        let v = v.trim();
                        let v = v.strip_prefix("0x").map_or_else(|| v.parse(), |h| u64::from_str_radix(h, 16));
                        (n.trim(), v.unwrap_or_else(|e| panic!("enum {name}: {m}: {e}")))
                    }
                    None => (m, next),
                };
                next = v + 1;
                (n.to_string(), v)
            })
            .collect()
    }

    /// The EV_KIND codes of the BPF headers, each with its header.
    fn ring_codes() -> Vec<(String, String, u64)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf/mltrace");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap();
            for l in text.lines().filter_map(|l| l.strip_prefix("EV_KIND(")) {
                let (name, rest) = l.split_once(',').unwrap();
                let code = rest.split_once(')').unwrap().0.trim().parse().unwrap();
                out.push((e.file_name().to_string_lossy().into_owned(), name.to_string(), code));
            }
        }
        out
    }

    /// Every code a BPF header sends is decoded, and every code decoded is
    /// sent: one code space, the log's kinds' codes and 64 up for the
    /// ring's own.
    #[test]
    fn each_ring_code_is_decoded_and_each_decoded_code_sent() {
        let sent = ring_codes();
        assert!(sent.len() >= 26, "{sent:?}");
        for (file, name, code) in &sent {
            let ev = event_of(*code as u8).unwrap_or_else(|| panic!("{file}'s {name} ({code}) has no decoder"));
            assert_eq!(u64::from(ev.kind), *code, "{name}");
            let log = Record::CODES.contains(&(*code as u8));
            assert!(log == (*code < 64), "{file}'s {name} ({code}): a log kind's code below 64, the ring's own above");
        }
        for list in EVENT_LISTS {
            for ev in *list {
                assert!(sent.iter().any(|s| s.2 == u64::from(ev.kind)), "code {} is decoded, never sent", ev.kind);
            }
        }
    }

    /// C's `enum c_name`, whose values decode reads with `from_u8`, against
    /// the log's enum: each member (but a `__COUNT`) decodes to the variant
    /// of its own number, which its name abbreviates (GPU_CTX_SYNC,
    /// CtxSynchronize) and which is not one of `rust_only`, the variants
    /// user space makes itself; every other variant has a member.
    fn same_codes<E: Copy + PartialEq + std::fmt::Debug>(
        src: &str,
        c_name: &str,
        all: &[E],
        code: impl Fn(E) -> u8,
        from_u8: impl Fn(u8) -> E,
        rust_only: &[E],
    ) {
        let c: Vec<_> = c_enum(src, c_name).into_iter().filter(|(n, _)| !n.contains("__")).collect();
        assert!(!c.is_empty(), "enum {c_name}");
        let rust = std::any::type_name::<E>().rsplit("::").next().unwrap();
        for (name, v) in &c {
            let n = u8::try_from(*v).unwrap_or_else(|_| panic!("events.h's {name} = {v} is over the log's 255"));
            let e = from_u8(n);
            let ok = code(e) == n && !rust_only.contains(&e);
            assert!(ok, "events.h's {name} = {v} has no {rust} of its number (decodes as {rust}::{e:?})");
            let short = name.split_once('_').unwrap().1.replace('_', "").to_lowercase();
            let long = format!("{e:?}").to_lowercase();
            assert!(long.starts_with(&short), "events.h's {name} = {v} decodes as {rust}::{e:?}, not of its name");
        }
        for &e in all.iter().filter(|e| !rust_only.contains(e)) {
            let v = u64::from(code(e));
            assert!(c.iter().any(|m| m.1 == v), "{rust}::{e:?} ({v}) has no member in events.h's enum {c_name}");
        }
    }

    /// The codes the BPF headers and the log keep each by hand agree.
    #[test]
    fn the_codes_of_events_h_are_the_logs() {
        same_codes(GPU_H, "gpu_api", GpuApi::ALL, |e| e as u8, GpuApi::from_u8, &[]);
        same_codes(GPU_H, "gpu_counted", GpuCounted::ALL, |e| e as u8, GpuCounted::from_u8, &[]);
        same_codes(GPU_H, "nccl_api", NcclOp::ALL, |e| e as u8, NcclOp::from_u8, &[]);
        same_codes(EVENTS_H, "sched_state", SchedState::ALL, |e| e as u8, SchedState::from_u8, &[]);
        same_codes(EVENTS_H, "wake_by", WakeBy::ALL, |e| e as u8, WakeBy::from_u8, &[]);
        let mine = [LostKind::Other, LostKind::Malformed, LostKind::UnknownFile, LostKind::Skipped, LostKind::Unsent];
        same_codes(EVENTS_H, "lost", LostKind::ALL, |e| e as u8, LostKind::from_u8, &mine);
    }

    /// Each io_uring opcode the kernel side records (uring_submit's switch)
    /// is a UringOp of its number and name, a read or a write.
    #[test]
    fn each_recorded_uring_opcode_is_a_uring_op() {
        let src = include_str!("../../../bpf/mltrace/uring.bpf.h");
        let switch = src.split_once("switch (opcode) {").unwrap().1.split_once("default:").unwrap().0;
        let cases: Vec<&str> =
            switch.lines().filter_map(|l| l.trim().strip_prefix("case ")?.strip_suffix(':')).collect();
        assert!(cases.len() >= 6, "{cases:?}");
        for case in cases {
            let def = format!("#define {case} ");
            let v = src.lines().find_map(|l| l.strip_prefix(&def)).unwrap_or_else(|| panic!("no {def}"));
            let v: u8 = v.trim().parse().unwrap();
            let op = UringOp::from_u8(v);
            assert!(op != UringOp::Other && op as u8 == v, "{case} ({v}) is no UringOp (decodes as {op:?})");
            assert_eq!(op.name(), case.trim_start_matches("IORING_OP_").to_lowercase(), "{case}");
            assert!(op.is_read() != op.is_write(), "{case} is not either a read or a write");
        }
    }

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
