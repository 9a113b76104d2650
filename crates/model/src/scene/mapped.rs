//! Mappings and major faults on the threads' tracks. Only data files are
//! drawn (see [`MapClass`]): a library, shared memory or anonymous memory
//! is not I/O, and a fault outside a data mapping says nothing about one.

use std::io;

use mltrace_log::labels;
use mltrace_log::*;

use super::Scene;
use crate::encoder::{Encoder, Name};
use crate::event::{self, FaultArgs, MapArgs};
use crate::maps::{Applied, MapClass, PAGE};
use crate::procs::ProcIdx;

impl Scene<'_> {
    /// An mmap, munmap or mremap (already applied to the table: `a`) as a
    /// slice on its thread's track, when it was about a data file.
    pub(super) fn mapping<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        m: &Mapping,
        a: &Applied,
    ) -> io::Result<()> {
        if a.class != Some(MapClass::Data) {
            return Ok(());
        }
        // munmap and mremap name no file: the table knew which.
        let path: &[u8] = match &a.file {
            Some(file) => &file.path,
            None => f.str(m.path),
        };
        let track = self.thread_lane(enc, idx, m.tid, m.ts, m.ts.saturating_add(m.dur))?;
        let (op, ret) = (m.op, m.ret);
        let make = move || labels::mapping(op, path, ret);
        self.stats.mappings += 1;
        let name = Name::Keyed(event::path_key(Mapping::CODE, op as u8, ret, path), &make);
        self.slice(enc, track, m.ts, m.dur, name, &MapArgs { r: m, path, offset: a.offset })
    }

    /// A major fault on a data mapping: a slice from when the kernel began
    /// reading that page in (when it said so), else an instant at its end.
    pub(super) fn major_fault<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, r: &MajorFault) -> io::Result<()> {
        let Some(region) = self.maps.find(r.pid, r.addr) else { return Ok(()) };
        let (file, offset) = (region.file.clone(), region.offset_of(r.addr));
        let same_page = r.dev == file.dev && r.ino == file.ino && r.offset / PAGE == offset / PAGE;
        let (ts, dur) = if r.flags & fault::FILE != 0 && same_page { (r.ts, r.dur) } else { (r.ts + r.dur, 0) };
        let track = self.thread_lane(enc, idx, r.tid, ts, ts.saturating_add(dur))?;
        let path: &[u8] = &file.path;
        let make = move || labels::major_fault(path);
        self.stats.major_faults += 1;
        let name = Name::Keyed(event::path_key(MajorFault::CODE, 0, 0, path), &make);
        self.slice(enc, track, ts, dur, name, &FaultArgs { r, path, offset })
    }
}
