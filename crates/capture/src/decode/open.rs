//! Opens, and what each file identity is (ev_open, ev_file).

use std::mem::offset_of;

use mltrace_log::*;

use super::{is_normal, tail, KernelDecoder, F_DISCONNECTED, F_PASSED, TR_ABS, TR_UNREADABLE};
use crate::files::{classify, inode_ident, join_normalize, FileFacts};
use crate::name::Name;
use crate::skel::types::{ev_file, ev_hdr, ev_open, op};

/// Opens seen ahead of their decoding (see [`crate::cache`]): each
/// inode's slot is asked for first, its name (behind a pointer in the
/// slot) [`Ahead::LAG`] records later, when the slot has come.
#[derive(Default)]
pub(super) struct Ahead {
    /// Records looked at ahead so far.
    pub looked: u64,
    /// Opens whose names are still to ask for: when each was looked at,
    /// its inode, and its file identity.
    opens: std::collections::VecDeque<(u64, u32, u64, u64)>,
}

impl Ahead {
    /// Half of [`crate::ring`]'s look ahead: the name comes that many
    /// records before the open is decoded.
    const LAG: u64 = 8;
}

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: Open::CODE,
        min: offset_of!(ev_open, path),
        commands_io: true,
        decode: |d, h, b, e| d.open(h, b, e),
    },
    super::Event {
        kind: super::RING_FILE,
        min: offset_of!(ev_file, path),
        commands_io: false,
        decode: |d, _, b, _| d.file_named(b),
    },
];

pub(super) fn open_op(o: u8) -> OpenOp {
    match op(o.into()) {
        op::OP_OPEN => OpenOp::Open,
        op::OP_OPENAT2 => OpenOp::Openat2,
        op::OP_CREAT => OpenOp::Creat,
        _ => OpenOp::Openat,
    }
}

impl KernelDecoder {
    /// An open a few records before it is decoded: its inode's slot is
    /// asked for now, the name the slot holds a few records later, when
    /// the slot is there (see [`Ahead`]).
    pub(super) fn open_ahead(&mut self, data: &[u8]) {
        let word = |at: usize| super::word(data, at);
        if data.get(offset_of!(ev_open, named)).is_none_or(|&n| n == 0) {
            return;
        }
        let (dev, ino) = (word(offset_of!(ev_open, dev)) as u32, word(offset_of!(ev_open, ino)));
        self.inodes.prefetch(dev, ino);
        let at = self.ahead.looked;
        self.ahead.opens.push_back((at, dev, ino, word(offset_of!(ev_open, file))));
    }

    /// The second step of [`Self::open_ahead`] for opens looked at
    /// [`Ahead::LAG`] records ago or more.
    pub(super) fn opens_ahead(&mut self) {
        while let Some(&(at, dev, ino, key)) = self.ahead.opens.front() {
            if at + Ahead::LAG > self.ahead.looked {
                return;
            }
            self.ahead.opens.pop_front();
            self.inodes.prefetch_name(dev, ino);
            self.files.prefetch(key);
        }
    }

    /// Remembers what file identity `key` is (from an ev_file, or an open
    /// that names its file), unless an open's passed path named it already.
    fn name(&mut self, key: u64, facts: &FileFacts<'_>, flags: u8, dev: u32) {
        let ident = inode_ident(dev, facts.ino);
        if flags & F_PASSED == 0 && self.files.passed_name(key, ident) {
            return;
        }
        let (kind, path) = classify(facts);
        let name = if flags & TR_ABS != 0 {
            // Only the end of the path fit: say so in the name itself.
            Name::new(&[&b"..."[..], &path].concat())
        } else if kind == FileKind::Regular {
            self.inodes.named(dev, facts.ino, &path)
        } else {
            Name::new(&path)
        };
        if flags & F_PASSED != 0 {
            self.files.insert_passed(key, kind, name, ident);
        } else {
            self.files.insert_ino(key, kind, name, ident);
        }
    }

    /// What a file identity is: its path and facts.
    pub(super) fn file_named(&mut self, data: &[u8]) {
        let e = self.file_buf.read(data);
        let raw = tail(data, offset_of!(ev_file, path), e.path_len as usize);
        let facts = FileFacts {
            mode: e.mode,
            magic: e.magic,
            rdev: e.rdev,
            ino: e.ino,
            path: raw,
            disconnected: e.flags & F_DISCONNECTED != 0,
        };
        self.name(e.key, &facts, e.flags, e.dev);
        self.file_buf.give_back(e);
    }

    /// An open; a file it opened is named by it.
    pub(super) fn open(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e = self.open_buf.read(data);
        let passed = tail(data, offset_of!(ev_open, path), e.path_len as usize);
        if e.named != 0 {
            let at = offset_of!(ev_open, path) + e.path_len as usize;
            // An absolute passed path names the file itself (the
            // kernel side did not walk the dentries).
            let normalized;
            let path = if e.fflags & F_PASSED != 0 && is_normal(passed) {
                passed
            } else if e.fflags & F_PASSED != 0 {
                normalized = join_normalize(b"/", passed);
                &normalized[..]
            } else {
                tail(data, at, e.abs_len as usize)
            };
            let facts = FileFacts {
                mode: e.fmode,
                magic: e.magic,
                rdev: e.rdev,
                ino: e.ino,
                path,
                disconnected: e.fflags & F_DISCONNECTED != 0,
            };
            self.name(e.file, &facts, e.fflags, e.dev);
        }
        let mut trunc = 0u8;
        if e.trunc & TR_UNREADABLE != 0 {
            trunc |= mltrace_log::trunc::UNREADABLE;
        }
        // Most often the file is named by the very path passed: one id.
        let mut same_as_passed = false;
        let (abs, kind) = if e.ret >= 0 {
            let filter = self.path_filter.as_ref();
            // The name's bytes are read only where its length is the
            // passed path's, or a filter asks.
            let facts =
                |n: &Name| (n.elided(), n.path() == passed, filter.is_some_and(|p| !crate::attach::under(n.path(), p)));
            match self.files.resolve(e.file, enc, facts) {
                Some((id, kind, (elided, same, filtered))) => {
                    if elided {
                        trunc |= mltrace_log::trunc::ABS;
                    }
                    same_as_passed = same;
                    if filtered {
                        self.stats.filtered += 1;
                        self.open_buf.give_back(e);
                        return;
                    }
                    (id, kind)
                }
                None => {
                    self.stats.unknown_file += 1;
                    if self.path_filter.is_some() && !self.keeps(e.file) {
                        self.open_buf.give_back(e);
                        return;
                    }
                    (enc.intern(&join_normalize(b"/", passed)), FileKind::Unknown)
                }
            }
        } else {
            let base: &[u8] = if passed.first() == Some(&b'/') {
                b"/"
            } else {
                match self.files.path(e.base) {
                    Some(p) => p,
                    None => {
                        self.stats.unknown_file += 1;
                        b"?"
                    }
                }
            };
            let joined = join_normalize(base, passed);
            if !self.keeps_path(Some(&joined)) {
                self.open_buf.give_back(e);
                return;
            }
            (enc.intern(&joined), FileKind::Unknown)
        };
        let path = if same_as_passed { abs } else { enc.intern(passed) };
        enc.push(&Open {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: open_op(h.op),
            dirfd: e.dirfd,
            path,
            abs_path: abs,
            flags: e.flags as u32,
            mode: e.mode,
            ret: e.ret,
            kind,
            trunc,
            block_reqs: e.nblk,
        });
        self.open_buf.give_back(e);
    }
}
