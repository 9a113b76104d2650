//! Metadata calls (ev_meta): their paths as passed and made absolute.

use std::borrow::Cow;
use std::mem::offset_of;

use mltrace_log::*;

use super::{is_normal, tail, KernelDecoder, TR_ARG, TR_UNREADABLE};
use crate::files::join_normalize;
use crate::skel::types::{ev_hdr, ev_meta};

/// The decoder's reused buffer of a metadata call's record (its paths
/// make it large).
pub(super) type Buf = super::Reused<ev_meta, { offset_of!(ev_meta, path) }>;

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[super::Event {
    kind: MetaCall::CODE,
    min: offset_of!(ev_meta, path),
    commands_io: true,
    decode: |d, h, b, e| d.meta(h, b, e),
}];

impl KernelDecoder {
    /// A path made absolute: as passed when it is, else lexically joined
    /// to the path of `base`, the directory it is relative to (`/?` when
    /// that was never named). Symlinks are not followed: the kernel's
    /// walk is not repeated.
    fn absolute<'a>(&mut self, passed: &'a [u8], base: u64) -> Cow<'a, [u8]> {
        if is_normal(passed) {
            return Cow::Borrowed(passed);
        }
        if passed.first() == Some(&b'/') {
            return Cow::Owned(join_normalize(b"/", passed));
        }
        match self.files.path(base) {
            Some(dir) => Cow::Owned(join_normalize(dir, passed)),
            None => {
                self.stats.unknown_file += 1;
                Cow::Owned(join_normalize(b"?", passed))
            }
        }
    }

    /// Whether a directory's name was cut (see `name`).
    fn cut(&self, base: u64) -> bool {
        base != 0 && self.files.path(base).is_some_and(|p| p.starts_with(b"..."))
    }

    pub(super) fn meta(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e = self.meta_buf.read(data);
        let at = offset_of!(ev_meta, path);
        let passed = tail(data, at, e.path_len as usize);
        let passed2 = tail(data, at + e.path_len as usize, e.path2_len as usize);
        let op = crate::syscalls::meta_op(h.op.into()).unwrap_or(MetaOp::Other);
        let mut trunc = 0u8;
        if e.trunc & TR_ARG != 0 {
            trunc |= trunc::ARG;
        }
        if e.trunc & TR_UNREADABLE != 0 {
            trunc |= trunc::UNREADABLE;
        }
        if self.cut(e.base) || self.cut(e.base2) {
            trunc |= trunc::ABS;
        }
        let (abs, abs2) = if op.lists() {
            // The directory is its fd's file; nothing was passed.
            let dir = match self.files.path(e.base) {
                Some(p) => p.to_vec(),
                None => {
                    self.stats.unknown_file += 1;
                    b"?".to_vec()
                }
            };
            (Cow::Owned(dir), Cow::Borrowed(&b""[..]))
        } else {
            let abs2 = if e.path2_len > 0 { self.absolute(passed2, e.base2) } else { Cow::Borrowed(&b""[..]) };
            (self.absolute(passed, e.base), abs2)
        };
        // `--path`: a rename is kept when either name is under the prefix.
        let keep = self.path_filter.as_ref().is_none_or(|prefix| {
            crate::attach::under(&abs, prefix) || (!abs2.is_empty() && crate::attach::under(&abs2, prefix))
        });
        self.stats.filtered += u64::from(!keep);
        if keep {
            let path = enc.intern(passed);
            // An absolute passed path is its own: one id.
            let abs_path = if *abs == *passed { path } else { enc.intern(&abs) };
            let new_path = enc.intern(passed2);
            let new_abs_path = if *abs2 == *passed2 { new_path } else { enc.intern(&abs2) };
            enc.push(&MetaCall {
                stack: h.stack,
                ts: h.ts,
                dur: e.dur,
                pid: h.pid,
                tid: h.tid,
                op,
                dirfd: e.dirfd,
                path,
                abs_path,
                new_dirfd: e.dirfd2,
                new_path,
                new_abs_path,
                flags: e.flags,
                ret: e.ret,
                trunc,
                block_reqs: e.nblk,
            });
        }
        self.meta_buf.give_back(e);
    }
}
