//! Memory: mappings, major faults and page-cache insertions (ev_map,
//! ev_fault, ev_pcache).

use libbpf_rs::{MapCore, MapFlags};
use mltrace_log::*;

use super::{read, KernelDecoder};
use crate::skel::types::{self, ev_fault, ev_hdr, ev_map, ev_pcache, op};
use crate::skel::MltraceSkel;

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: PageCache::CODE,
        min: size_of::<ev_pcache>(),
        commands_io: true,
        decode: |d, h, b, e| d.pcache(h, b, e),
    },
    super::Event {
        kind: Mapping::CODE,
        min: size_of::<ev_map>(),
        commands_io: true,
        decode: |d, h, b, e| d.map(h, b, e),
    },
    super::Event {
        kind: MajorFault::CODE,
        min: size_of::<ev_fault>(),
        commands_io: true,
        decode: |d, h, b, e| d.major_fault(h, b, e),
    },
];

/// BPF's MAPF_* bit (events.h): a summary of anonymous mappings.
const MAPF_ANON_SUMMARY: u16 = types::map_bits::MAPF_ANON_SUMMARY.0 as u16;

/// Super-block magics of file systems in memory: tmpfs and shmem
/// (/dev/shm, memfd), ramfs, hugetlbfs.
const MEMORY_FS_MAGICS: [u64; 3] = [0x0102_1994, 0x8584_58f6, 0x9584_58f6];

fn cache_during(o: u8) -> CacheDuring {
    match op(o.into()) {
        op::OP_NONE => CacheDuring::Fault,
        op::OP_READ | op::OP_PREAD64 | op::OP_READV | op::OP_PREADV | op::OP_PREADV2 => CacheDuring::Read,
        op::OP_WRITE | op::OP_PWRITE64 | op::OP_WRITEV | op::OP_PWRITEV | op::OP_PWRITEV2 => CacheDuring::Write,
        op::OP_SENDFILE | op::OP_COPY_FILE_RANGE => CacheDuring::Transfer,
        _ => CacheDuring::Other,
    }
}

pub(super) fn map_op(o: u8) -> MapOp {
    match op(o.into()) {
        op::OP_MUNMAP => MapOp::Munmap,
        op::OP_MREMAP => MapOp::Mremap,
        _ => MapOp::Mmap,
    }
}

impl KernelDecoder {
    /// An mmap, munmap or mremap, or a summary of anonymous ones.
    pub(super) fn map(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_map = read(data);
        let anon = h.flags & MAPF_ANON_SUMMARY != 0;
        if self.lib_watch && !anon && e.file != 0 {
            self.lib_mapped(e.file);
        }
        if !anon && e.file != 0 && !self.keeps(e.file) {
            return;
        }
        let (path, kind) = self.file(e.file, enc);
        enc.push(&Mapping {
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: if anon { MapOp::Anonymous } else { map_op(h.op) },
            fd: e.fd,
            path,
            kind,
            dev: e.dev,
            ino: e.ino,
            file_flags: if MEMORY_FS_MAGICS.contains(&e.magic) { mapf::MEMORY_FS } else { 0 },
            offset: e.offset,
            addr: e.addr,
            len: e.len,
            new_len: e.new_len,
            prot: e.prot,
            flags: e.flags,
            ret: e.ret,
        });
    }

    /// A major fault; with its start, the file and page the kernel said.
    fn fault(&mut self, h: &ev_hdr, e: &ev_fault, enc: &mut FrameEncoder) -> MajorFault {
        let mut r = MajorFault { ts: h.ts, pid: h.pid, tid: h.tid, addr: e.addr, ..Default::default() };
        if e.start != 0 && e.start <= h.ts {
            r.flags = fault::FILE;
            r.dur = h.ts - e.start;
            r.ts = e.start;
            r.dev = e.dev;
            r.ino = e.ino;
            r.offset = e.index.wrapping_mul(self.page_size);
        }
        let path = if r.ino == 0 { None } else { self.inodes.lookup(r.dev, r.ino, h.pid) };
        r.path = enc.intern(path.unwrap_or(b""));
        r
    }

    /// A major fault (`--path`: only one on a file under it).
    pub(super) fn major_fault(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_fault = read(data);
        if self.path_filter.is_some() {
            // Only the kernel's own file says where a fault was.
            let p = (e.start != 0 && e.ino != 0)
                .then(|| self.inodes.lookup(e.dev, e.ino, h.pid).map(<[u8]>::to_vec))
                .flatten();
            if !self.keeps_path(p.as_deref()) {
                return;
            }
        }
        let rec = self.fault(h, &e, enc);
        enc.push(&rec);
    }

    /// Pages inserted in the page cache.
    pub(super) fn pcache(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_pcache = read(data);
        if self.path_filter.is_some() {
            let p = self.inodes.lookup(e.dev, e.ino, h.pid).map(<[u8]>::to_vec);
            if !self.keeps_path(p.as_deref()) {
                return;
            }
        }
        let path = match self.last_pcache {
            Some((d, i, g, id)) if d == e.dev && i == e.ino && g == enc.generation() => id,
            _ => {
                let id = match self.inodes.lookup(e.dev, e.ino, h.pid) {
                    Some(p) => enc.intern(p),
                    None => enc.intern(b""),
                };
                self.last_pcache = Some((e.dev, e.ino, enc.generation(), id));
                id
            }
        };
        enc.push(&PageCache {
            ts: h.ts,
            pid: h.pid,
            tid: h.tid,
            dev: e.dev,
            ino: e.ino,
            path,
            offset: e.index.wrapping_mul(self.page_size),
            bytes: u64::from(e.pages) * self.page_size,
            during: cache_during(h.op),
        });
    }
}

/// The anonymous mmaps counted for processes that have not exited:
/// (pid, calls, bytes).
fn anon_counts(skel: &MltraceSkel<'_>) -> Vec<(u32, u64, u64)> {
    let word = |b: &[u8], i: usize| b.get(i..i + 8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()));
    let map = &skel.maps.anon_maps;
    map.keys()
        .filter_map(|k| {
            let pid = u32::from_ne_bytes(k.get(..4)?.try_into().ok()?);
            let v = map.lookup(&k, MapFlags::ANY).ok().flatten()?;
            Some((pid, word(&v, 0)?, word(&v, 8)?))
        })
        .collect()
}

/// The anonymous mmaps of processes still alive (the kernel side sends
/// the others' at their exit).
pub(crate) fn anon_summaries(skel: &MltraceSkel<'_>, enc: &mut FrameEncoder) {
    let ts = crate::system::boottime_ns();
    for (pid, calls, bytes) in anon_counts(skel) {
        let path = enc.intern(b"");
        enc.push(&Mapping {
            ts,
            pid,
            tid: pid,
            op: MapOp::Anonymous,
            fd: -1,
            path,
            len: bytes,
            ret: calls as i64,
            ..Default::default()
        });
    }
}
