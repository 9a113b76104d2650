//! A file's name as the consumer keeps it: stored once, shared by every
//! file identity that names it and by its inode, interned once a frame.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use mltrace_log::{FrameEncoder, StrId};

/// A name's string id in the encoder's frame of `generation`.
#[derive(Clone, Copy)]
pub(crate) struct Cached {
    pub generation: u64,
    pub id: StrId,
}

impl Cached {
    pub const NONE: Cached = Cached { generation: u64::MAX, id: StrId(0) };
}

pub struct Name {
    path: Box<[u8]>,
    /// Its id in the frame: the frame's generation (low 32 bits) over the
    /// id. Atomic only so that the consumer can move to its thread; one
    /// thread uses it.
    cached: AtomicU64,
    /// Begins with "...": the kernel side cut a path too deep. Kept here
    /// so that an open asks it without reading the path's (cold) bytes.
    elided: bool,
}

/// Shared by the file table's identities and the inode names.
pub type Shared = Arc<Name>;

impl Name {
    pub fn new(path: &[u8]) -> Shared {
        Arc::new(Name { path: path.into(), cached: AtomicU64::new(u64::MAX), elided: path.starts_with(b"...") })
    }

    pub fn path(&self) -> &[u8] {
        &self.path
    }

    /// Whether the path was cut at its start ("..." then its last parts).
    #[inline]
    pub fn elided(&self) -> bool {
        self.elided
    }

    /// Its id in `enc`'s current frame, interned at most once a frame.
    #[inline]
    pub fn id_in(&self, enc: &mut FrameEncoder) -> StrId {
        let generation = enc.generation() as u32;
        let c = self.cached.load(Relaxed);
        if (c >> 32) as u32 == generation {
            return StrId(c as u32);
        }
        let id = enc.intern(&self.path);
        self.cached.store(((generation as u64) << 32) | id.0 as u64, Relaxed);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_once_a_frame() {
        let mut enc = FrameEncoder::new();
        let n = Name::new(b"/data/a");
        let other = enc.intern(b"/data/b");
        let a = n.id_in(&mut enc);
        assert_ne!(a, other);
        assert_eq!(n.id_in(&mut enc), a);
        assert_eq!(enc.intern(b"/data/a"), a, "the frame's own id");
        // The next frame has its own strings: interned there anew.
        enc.finish_into(&mut mltrace_log::EncodedFrame::default());
        let b = enc.intern(b"/data/b");
        let a = n.id_in(&mut enc);
        assert_ne!(a, b);
        assert_eq!(enc.intern(b"/data/a"), a);
    }
}
