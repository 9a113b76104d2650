//! Python stacks and code objects (ev_pyprobe, ev_pystack, ev_pycode),
//! handed to [`crate::python::PyStacks`].

use std::mem::offset_of;

use mltrace_log::FrameEncoder;

use super::{read, tail, KernelDecoder};
use crate::python::linetable::decode_str;
use crate::skel::types::{self, ev_hdr, ev_pycode, ev_pyprobe, ev_pystack, py_frame};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: super::RING_PYPROBE,
        min: size_of::<ev_pyprobe>(),
        commands_io: false,
        decode: |d, h, b, e| d.py_probe(h, b, e),
    },
    super::Event {
        kind: mltrace_log::PyFrame::CODE,
        min: offset_of!(ev_pystack, frames),
        commands_io: false,
        decode: |d, h, b, e| d.py_stack(h, b, e),
    },
    super::Event {
        kind: super::RING_PYCODE,
        min: offset_of!(ev_pycode, data),
        commands_io: false,
        decode: |d, h, b, e| d.py_code(h, b, e),
    },
];

const PY_STR: usize = 256;
const TRUNCATED: u16 = types::py_bits::PYB_TRUNCATED.0 as u16;
const CUT: u8 = types::py_bits::PYB_QUAL_CUT.0 as u8;

// python::DEPTH is events.h's PY_DEPTH.
const _: () = assert!(
    std::mem::size_of::<ev_pystack>() - offset_of!(ev_pystack, frames)
        == crate::python::DEPTH * std::mem::size_of::<py_frame>()
);
// The file name and line table sit at fixed places (events.h's PY_STR).
const _: () = assert!(std::mem::size_of::<ev_pycode>() - offset_of!(ev_pycode, data) >= 2 * PY_STR + 8192);

impl KernelDecoder {
    pub(super) fn py_probe(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        if h.op == types::py_probe_op::PYP_ADOPTED.0 as u8 {
            let e: ev_pyprobe = read(data);
            self.py.adopted(h.pid, (e.dev, e.ino), enc);
            return;
        }
        self.py.ask(h.pid, h.stack);
    }

    pub(super) fn py_stack(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_pystack = read(data);
        let n = usize::from(e.depth).min(e.frames.len());
        let sent = (data.len() - offset_of!(ev_pystack, frames)) / std::mem::size_of::<py_frame>();
        if n > sent {
            self.stats.malformed += 1;
            return;
        }
        let frames: Vec<_> = e.frames[..n].iter().map(|f| (f.code, f.instr, f.owner)).collect();
        self.py.stack(h.pid, h.ts, h.stack, e.bits & TRUNCATED != 0, &frames, enc);
    }

    pub(super) fn py_code(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_pycode = read(data);
        let at = offset_of!(ev_pycode, data);
        let name = decode_str(e.name_kind, tail(data, at, usize::from(e.name_len)));
        let file = decode_str(e.file_kind, tail(data, at + PY_STR, usize::from(e.file_len)));
        let lines = tail(data, at + 2 * PY_STR, usize::from(e.lines_len));
        self.py.code(h.pid, e.code, name, file, e.first_line, lines, e.bits & CUT != 0, enc);
    }
}
