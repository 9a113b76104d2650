//! Processes and threads: forks, execs, exits, names, and those no
//! longer traced (ev_fork, ev_exec, ev_exit, ev_comm, ev_untraced).

use std::mem::offset_of;

use mltrace_log::*;

use super::{cstr, read, tail, KernelDecoder, TR_ARG, TR_UNREADABLE};
use crate::skel::types::{self, ev_comm, ev_exec, ev_exit, ev_fork, ev_hdr, ev_ioac, ev_untraced};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: super::RING_UNTRACED,
        min: size_of::<ev_untraced>(),
        commands_io: false,
        decode: |d, h, b, e| d.untraced(h, b, e),
    },
    super::Event {
        kind: Fork::CODE,
        min: size_of::<ev_fork>(),
        commands_io: false,
        decode: |d, h, b, e| d.fork(h, b, e),
    },
    super::Event {
        kind: Exec::CODE,
        min: offset_of!(ev_exec, data),
        commands_io: false,
        decode: |d, h, b, e| d.exec(h, b, e),
    },
    super::Event {
        kind: Exit::CODE,
        min: size_of::<ev_exit>(),
        commands_io: false,
        decode: |d, h, b, e| d.exit(h, b, e),
    },
    super::Event {
        kind: Comm::CODE,
        min: size_of::<ev_comm>(),
        commands_io: false,
        decode: |d, h, b, e| d.comm(h, b, e),
    },
];

// events.h states the ioac bits in the log's own codes.
const _: () = {
    assert!(types::ioac_bits::IOAC_CHARS.0 == acct::CHARS as u32);
    assert!(types::ioac_bits::IOAC_BYTES.0 == acct::BYTES as u32);
};

/// A thread's counters from the kernel (ev_ioac.have uses the log's [`acct`] bits).
fn accounting(h: &ev_hdr, at: AcctPoint, a: &ev_ioac) -> Record {
    Record::IoAccounting(IoAccounting {
        ts: h.ts,
        pid: h.pid,
        tid: h.tid,
        at,
        have: a.have & (acct::CHARS | acct::BYTES),
        rchar: a.rchar,
        wchar: a.wchar,
        syscr: a.syscr,
        syscw: a.syscw,
        read_bytes: a.read_bytes,
        write_bytes: a.write_bytes,
        cancelled_write_bytes: a.cancelled_write_bytes,
    })
}

impl KernelDecoder {
    /// A fork or a new thread.
    pub(super) fn fork(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_fork = read(data);
        if e.thread == 0 {
            self.py.fork(e.parent_pid, h.pid);
        }
        enc.push(&Fork {
            ts: h.ts,
            pid: h.pid,
            tid: h.tid,
            parent_pid: e.parent_pid,
            parent_tid: e.parent_tid,
            thread: e.thread != 0,
        });
    }

    /// An exec, with the counters of what came before it.
    pub(super) fn exec(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_exec = read(data);
        if self.execs.len() >= 65536 {
            // Only the last second's execs matter to summaries.
            self.execs.clear();
        }
        self.execs.insert(h.pid, (h.flags, h.ts));
        self.py.forget(h.pid, enc);
        let d = tail(data, offset_of!(ev_exec, data), e.filename_len as usize + e.argv_len as usize);
        let (fname, mut argv) = d.split_at((e.filename_len as usize).min(d.len()));
        if argv.last() == Some(&0) {
            argv = &argv[..argv.len() - 1];
        }
        let mut trunc = 0;
        if e.trunc & TR_ARG != 0 {
            trunc |= mltrace_log::trunc::ARG;
        }
        if e.trunc & TR_UNREADABLE != 0 {
            trunc |= mltrace_log::trunc::UNREADABLE;
        }
        let filename = enc.intern(fname);
        let argv = enc.intern(argv);
        enc.push(&Exec { ts: h.ts, pid: h.pid, tid: h.tid, filename, argv, trunc });
        enc.push(&accounting(h, AcctPoint::Exec, &e.ioac));
        crate::environ::push(h.pid, h.ts, enc);
    }

    /// A thread's exit, with its counters.
    pub(super) fn exit(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_exit = read(data);
        if e.group_dead != 0 {
            self.py.forget(h.pid, enc);
        }
        // Before the exit: a reader drops a process at its exit.
        enc.push(&accounting(h, AcctPoint::Exit, &e.ioac));
        enc.push(&Exit { ts: h.ts, pid: h.pid, tid: h.tid, status: e.status, process_exit: e.group_dead != 0 });
    }

    /// A thread's new name.
    pub(super) fn comm(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_comm = read(data);
        let comm = enc.intern(&cstr(&e.comm));
        enc.push(&Comm { ts: h.ts, pid: h.pid, tid: h.tid, comm });
    }

    /// A process that became another user or group: a mark.
    pub(super) fn untraced(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_untraced = read(data);
        let text = untraced_text(h, &e);
        let name = enc.intern(mltrace_log::labels::UNTRACED_MARK.as_bytes());
        let value = enc.intern(json_string(&text).as_bytes());
        enc.push(&Mark { ts: h.ts, name, value, rank: -1, pid: h.pid });
        if self.untraced.len() < 64 {
            self.untraced.push(text);
        }
    }
}

/// `passwd [4242] became uid 0 (setuid exec of /usr/bin/passwd): not
/// recorded from here`: what it became, against the recording user's ids.
fn untraced_text(h: &ev_hdr, e: &ev_untraced) -> String {
    let cstr = |b: &[i8]| {
        let b: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let path = cstr(&e.path[..(e.path_len as usize).min(e.path.len())]);
    let by_call = h.op == crate::skel::types::op::OP_SETID.0 as u8;
    let user = e.uid != uid || e.euid != uid;
    let became = match (user, e.euid != uid, e.egid != gid) {
        (true, true, _) => format!("uid {}", e.euid),
        (true, false, _) => format!("uid {}", e.uid),
        (false, _, true) => format!("gid {}", e.egid),
        (false, _, false) => format!("gid {}", e.gid),
    };
    let why = match (by_call, user) {
        (true, _) => format!("{}()", crate::syscalls::setid_name(e.nr)),
        (false, true) => format!("setuid exec of {path}"),
        (false, false) => format!("setgid exec of {path}"),
    };
    let name = if by_call || path.is_empty() { cstr(&e.comm) } else { mltrace_log::show::basename(&path).to_string() };
    format!("{name} [{}] became {became} ({why}): not recorded from here", h.pid)
}

/// `text` as a JSON string (a mark's value is JSON).
fn json_string(text: &str) -> String {
    let mut o = String::with_capacity(text.len() + 2);
    o.push('"');
    for c in text.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
