//! The second pass: each record as a row of its table.

use std::collections::HashMap;
use std::io::{Read, Seek};

use mltrace_log::labels::{self, Outcome};
use mltrace_log::show;
use mltrace_log::*;
use mltrace_model::procs::{ProcIdx, ProcTracker, Role};
use mltrace_model::Survey;

use crate::schema;
use crate::table::{i, Table};
use crate::{Error, Layout, Options, TableStats};

/// The tables written by hand, each a field named as its table and its
/// schema's function; after them, the tables made from kinds'
/// declarations (a kind whose declared table is none of these).
macro_rules! tables {
    ($($t:ident),+ $(,)?) => {
        /// The tables, in the order they are listed.
        struct Tables {
            $($t: Table,)+
            /// [`declared`]'s, in that order.
            by_kind: Vec<Table>,
        }

        /// Whether the exporter writes table `name` by hand.
        fn hand_written(name: &str) -> bool {
            [$(stringify!($t)),+].contains(&name)
        }

        impl Tables {
            fn create(at: &Layout, n: usize) -> Result<Tables, Error> {
                Ok(Tables {
                    $($t: Table::create(at, stringify!($t), &schema::$t(), n)?,)+
                    by_kind: declared()
                        .map(|(code, name)| Table::create(at, name, &schema::of_kind(code), n))
                        .collect::<Result<_, _>>()?,
                })
            }

            fn close(self) -> Result<Vec<TableStats>, Error> {
                [$(self.$t),+].into_iter().chain(self.by_kind).map(Table::close).collect()
            }
        }
    };
}

tables!(
    syscalls,
    block,
    counters,
    processes,
    phases,
    page_cache,
    mappings,
    faults,
    net_calls,
    sched,
    wakeups,
    marks,
    gpu_events,
    io_accounting,
    lost,
    checkpoints,
);

/// The kinds whose table is made from their declaration (see
/// [`schema::of_kind`]): (code, table), in declaration order.
fn declared() -> impl Iterator<Item = (u8, &'static str)> {
    Record::TABLES.iter().copied().filter(|&(_, t)| !hand_written(t))
}

/// Each kind's place among [`declared`]'s tables + 1 (0: none), by code,
/// so a row finds its table without a search.
static DECLARED_AT: std::sync::LazyLock<[u8; 256]> = std::sync::LazyLock::new(|| {
    let mut at = [0u8; 256];
    for (k, (code, _)) in declared().enumerate() {
        at[usize::from(code)] = k as u8 + 1;
    }
    at
});

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Main => "main",
        Role::Worker { .. } => "worker",
        Role::Helper => "helper",
        Role::Other => "other",
    }
}

/// What the rows need from the survey.
struct Ctx<'a> {
    survey: &'a Survey,
    /// (start, end, number) of each epoch, by start.
    epochs: Vec<(u64, u64, i64)>,
}

impl Ctx<'_> {
    fn wall(&self, ts: u64) -> Option<i64> {
        let a = self.survey.header.start;
        if a.realtime_ns == 0 {
            return None;
        }
        let ns = a.realtime_ns as i128 + ts as i128 - a.boottime_ns as i128;
        i64::try_from(ns).ok()
    }

    /// The epoch `ts` falls in (the latest started, if they overlap).
    fn epoch(&self, ts: u64) -> Option<i64> {
        let k = self.epochs.partition_point(|e| e.0 <= ts);
        self.epochs[..k].iter().rev().find(|e| ts < e.1).map(|e| e.2)
    }

    /// process, role, worker of an incarnation.
    fn who(&self, idx: Option<ProcIdx>) -> (Option<&str>, Option<&'static str>, Option<i64>) {
        match idx.and_then(|i| self.survey.procs.list.get(i as usize)) {
            Some(p) => {
                let worker = match p.role {
                    Role::Worker { slot, .. } => Some(i64::from(slot)),
                    _ => None,
                };
                (Some(&p.name), Some(role_name(p.role)), worker)
            }
            None => (None, None, None),
        }
    }

    fn who_cols(&self, t: &mut Table, pid: u32, tid: u32, idx: Option<ProcIdx>) -> Result<(), Error> {
        let (name, role, worker) = self.who(idx);
        t.i64(pid.into())?.i64(tid.into())?.opt_str(name)?.opt_str(role)?.opt_i64(worker)?;
        Ok(())
    }
}

/// A syscall-table row in the making.
struct Call<'a> {
    ts: u64,
    dur: u64,
    pid: u32,
    tid: u32,
    kind: &'static str,
    syscall: &'static str,
    name: String,
    fd: Option<i32>,
    path: &'a [u8],
    file_kind: Option<FileKind>,
    offset: Option<u64>,
    requested: Option<u64>,
    bytes: Option<u64>,
    ret: i64,
    out: Option<(i32, &'a [u8])>,
    block_reqs: u32,
    /// The Python stack (0: none).
    stack: u32,
}

fn outcome(ret: i64) -> (Option<i64>, Option<String>) {
    match labels::outcome(ret) {
        Outcome::Ok(n) => (Some(i(n)), None),
        Outcome::Err(e) => (None, Some(show::errno(e))),
        Outcome::Unknown => (None, None),
    }
}

/// Bytes moved by a call that returns them.
fn moved(ret: i64) -> Option<u64> {
    match labels::outcome(ret) {
        Outcome::Ok(n) => Some(n),
        _ => None,
    }
}

fn offset(src: OffsetSrc, off: u64) -> Option<u64> {
    (src != OffsetSrc::None).then_some(off)
}

fn major(dev: u32) -> i64 {
    i64::from(dev >> 20)
}

fn minor(dev: u32) -> i64 {
    i64::from(dev & 0xf_ffff)
}

fn block_flags(flags: u16) -> String {
    let mut out = String::new();
    labels::block_flags(&mut out, flags);
    for (bit, name) in
        [(blk::START_UNKNOWN, "start unknown"), (blk::ISSUE_UNKNOWN, "issue unknown"), (blk::PARTIAL, "partial")]
    {
        if flags & bit != 0 {
            if !out.is_empty() {
                out.push('|');
            }
            out.push_str(name);
        }
    }
    out
}

fn call(t: &mut Table, cx: &Ctx<'_>, c: Call<'_>, idx: Option<ProcIdx>) -> Result<(), Error> {
    let (result, errno) = outcome(c.ret);
    t.i64(i(c.ts))?.i64(i(c.dur))?.wall(cx.wall(c.ts))?.opt_i64(cx.epoch(c.ts))?;
    cx.who_cols(t, c.pid, c.tid, idx)?;
    t.str(c.kind)?
        .str(c.syscall)?
        .str(&c.name)?
        .opt_i64(c.fd.map(i64::from))?
        .path(c.path)?
        .opt_str(c.file_kind.map(|k| k.name()))?
        .opt_i64(c.offset.map(i))?
        .opt_i64(c.requested.map(i))?
        .opt_i64(c.bytes.map(i))?
        .opt_i64(result)?
        .opt_str(errno.as_deref())?
        .opt_i64(c.out.map(|o| i64::from(o.0)))?;
    match c.out {
        Some((_, p)) => t.path(p)?,
        None => t.opt_str(None)?,
    };
    t.i64(c.block_reqs.into())?;
    t.opt_i64((c.stack != 0).then(|| c.stack.into()))?;
    t.end_row()
}

fn row(tb: &mut Tables, cx: &Ctx<'_>, f: &Frame<'_>, rec: &Record, idx: Option<ProcIdx>) -> Result<(), Error> {
    match *rec {
        Record::Io(r) => call(
            &mut tb.syscalls,
            cx,
            Call {
                ts: r.ts,
                dur: r.dur,
                pid: r.pid,
                tid: r.tid,
                kind: "syscall",
                syscall: r.op.name(),
                name: labels::syscall(r.op.name(), r.ret),
                fd: Some(r.fd),
                path: f.str(r.path),
                file_kind: Some(r.kind),
                offset: offset(r.offset_src, r.offset),
                requested: Some(r.requested),
                bytes: moved(r.ret),
                ret: r.ret,
                out: None,
                block_reqs: r.block_reqs,
                stack: r.stack,
            },
            idx,
        ),
        Record::Open(r) => call(
            &mut tb.syscalls,
            cx,
            Call {
                ts: r.ts,
                dur: r.dur,
                pid: r.pid,
                tid: r.tid,
                kind: "syscall",
                syscall: r.op.name(),
                name: labels::open(r.op, f.str(r.abs_path), r.ret),
                fd: None,
                path: if f.str(r.abs_path).is_empty() { f.str(r.path) } else { f.str(r.abs_path) },
                file_kind: Some(r.kind),
                offset: None,
                requested: None,
                bytes: None,
                ret: r.ret,
                out: None,
                block_reqs: r.block_reqs,
                stack: r.stack,
            },
            idx,
        ),
        Record::Close(r) => call(
            &mut tb.syscalls,
            cx,
            Call {
                ts: r.ts,
                dur: r.dur,
                pid: r.pid,
                tid: r.tid,
                kind: "syscall",
                syscall: "close",
                name: labels::close(f.str(r.path), r.ret),
                fd: Some(r.fd),
                path: f.str(r.path),
                file_kind: Some(r.kind),
                offset: None,
                requested: None,
                bytes: None,
                ret: r.ret,
                out: None,
                block_reqs: 0,
                stack: r.stack,
            },
            idx,
        ),
        Record::Transfer(r) => call(
            &mut tb.syscalls,
            cx,
            Call {
                ts: r.ts,
                dur: r.dur,
                pid: r.pid,
                tid: r.tid,
                kind: "syscall",
                syscall: r.op.name(),
                name: labels::syscall(r.op.name(), r.ret),
                fd: Some(r.in_fd),
                path: f.str(r.in_path),
                file_kind: None,
                offset: None,
                requested: Some(r.requested),
                bytes: moved(r.ret),
                ret: r.ret,
                out: Some((r.out_fd, f.str(r.out_path))),
                block_reqs: r.block_reqs,
                stack: r.stack,
            },
            idx,
        ),
        Record::IoUring(r) => call(
            &mut tb.syscalls,
            cx,
            Call {
                ts: r.ts,
                dur: r.dur,
                pid: r.pid,
                tid: r.tid,
                kind: "io_uring",
                syscall: r.op.name(),
                name: labels::uring(r.op, r.ret),
                fd: (r.fd >= 0).then_some(r.fd),
                path: f.str(r.path),
                file_kind: Some(r.kind),
                offset: offset(r.offset_src, r.offset),
                requested: Some(r.requested),
                bytes: moved(r.ret),
                ret: r.ret,
                out: None,
                block_reqs: 0,
                stack: 0,
            },
            idx,
        ),
        Record::Aio(r) => {
            let submit = r.op == AioOp::Submit;
            let sum = r.read_bytes + r.write_bytes;
            call(
                &mut tb.syscalls,
                cx,
                Call {
                    ts: r.ts,
                    dur: r.dur,
                    pid: r.pid,
                    tid: r.tid,
                    kind: "aio",
                    syscall: r.op.name(),
                    name: labels::aio(r.op, r.ret),
                    fd: (r.fd >= 0).then_some(r.fd),
                    path: f.str(r.path),
                    file_kind: (r.fd >= 0).then_some(r.kind),
                    offset: (r.fd >= 0 && submit).then_some(r.offset),
                    requested: submit.then_some(sum),
                    bytes: (!submit && r.ret >= 0).then_some(sum),
                    ret: r.ret,
                    out: None,
                    block_reqs: r.block_reqs,
                    stack: 0,
                },
                idx,
            )
        }
        Record::Block(b) => {
            let t = &mut tb.block;
            let traced = b.flags & blk::TRACED != 0;
            t.i64(i(b.ts))?.wall(cx.wall(b.ts))?.i64(i(b.queue))?.i64(i(b.device))?;
            cx.who_cols(t, b.pid, b.tid, idx)?;
            let caused = b.cause_ts != 0;
            t.path(f.str(b.comm))?
                .bool(traced)?
                .bool(b.flags & blk::KTHREAD != 0)?
                .path(f.str(b.disk))?
                .i64(major(b.dev))?
                .i64(minor(b.dev))?
                .i64(i(b.sector))?
                .i64(i(b.bytes))?
                .str(b.op.name())?
                .str(&block_flags(b.flags))?
                .i64(b.error.into())?
                .opt_i64(caused.then_some(i64::from(b.tid)))?
                .opt_i64(caused.then_some(i(b.cause_ts)))?
                .opt_i64(caused.then_some(i64::from(b.cause_idx)))?;
            t.end_row()
        }
        Record::Counter(c) => {
            let t = &mut tb.counters;
            let (name, _, _) = cx.who(idx);
            t.i64(i(c.ts))?
                .wall(cx.wall(c.ts))?
                .bytes(f.str(c.group))?
                .bytes(f.str(c.name))?
                .i64(c.pid.into())?
                .opt_str(name)?
                .f64(c.value)?
                .str(c.unit.name())?;
            t.end_row()
        }
        Record::Phase(p) => {
            let t = &mut tb.phases;
            let epoch = if p.kind == PhaseKind::Epoch {
                cx.epochs.iter().find(|e| e.0 == p.ts && e.1 == p.ts + p.dur).map(|e| e.2)
            } else {
                None
            };
            t.i64(i(p.ts))?
                .i64(i(p.dur))?
                .wall(cx.wall(p.ts))?
                .str(p.kind.name())?
                .bytes(f.str(p.name))?
                .opt_i64(epoch)?
                .opt_i64((p.rank >= 0).then_some(i64::from(p.rank)))?
                .i64(p.pid.into())?
                .bool(p.flags & phase::UNFINISHED != 0)?;
            t.end_row()
        }
        Record::PageCache(c) => {
            let t = &mut tb.page_cache;
            t.i64(i(c.ts))?.wall(cx.wall(c.ts))?;
            cx.who_cols(t, c.pid, c.tid, idx)?;
            t.i64(major(c.dev))?
                .i64(minor(c.dev))?
                .i64(i(c.ino))?
                .path(f.str(c.path))?
                .i64(i(c.offset))?
                .i64(i(c.bytes))?
                .str(c.during.name())?;
            t.end_row()
        }
        Record::Mapping(m) => {
            let t = &mut tb.mappings;
            let mmap = m.op == MapOp::Mmap;
            let file = mmap && m.fd >= 0;
            let (result, errno) = if m.op == MapOp::Anonymous { (Some(m.ret), None) } else { outcome(m.ret) };
            t.i64(i(m.ts))?.i64(i(m.dur))?.wall(cx.wall(m.ts))?;
            cx.who_cols(t, m.pid, m.tid, idx)?;
            t.str(m.op.name())?
                .opt_i64(mmap.then_some(i64::from(m.fd)))?
                .path(f.str(m.path))?
                .opt_str(file.then_some(m.kind.name()))?
                .opt_i64(file.then_some(major(m.dev)))?
                .opt_i64(file.then_some(minor(m.dev)))?
                .opt_i64(file.then_some(i(m.ino)))?
                .bool(m.file_flags & mapf::MEMORY_FS != 0)?
                .opt_i64(file.then_some(i(m.offset)))?
                .i64(i(m.addr))?
                .i64(i(m.len))?
                .opt_i64((m.op == MapOp::Mremap).then_some(i(m.new_len)))?
                .opt_i64(mmap.then_some(i64::from(m.prot)))?
                .opt_i64(matches!(m.op, MapOp::Mmap | MapOp::Mremap).then_some(i64::from(m.flags)))?
                .opt_i64(result)?
                .opt_str(errno.as_deref())?;
            t.end_row()
        }
        Record::MajorFault(x) => {
            let t = &mut tb.faults;
            let file = x.flags & fault::FILE != 0;
            t.i64(i(x.ts))?.i64(i(x.dur))?.wall(cx.wall(x.ts))?;
            cx.who_cols(t, x.pid, x.tid, idx)?;
            t.i64(i(x.addr))?
                .bool(file)?
                .opt_i64(file.then_some(major(x.dev)))?
                .opt_i64(file.then_some(minor(x.dev)))?
                .opt_i64(file.then_some(i(x.ino)))?
                .path(f.str(x.path))?
                .opt_i64(file.then_some(i(x.offset)))?;
            t.end_row()
        }
        Record::NetCall(x) => {
            let t = &mut tb.net_calls;
            let mmsg = matches!(x.op, NetOp::Sendmmsg | NetOp::Recvmmsg);
            let (result, errno) = outcome(x.ret);
            t.i64(i(x.ts))?.i64(i(x.dur))?.wall(cx.wall(x.ts))?.opt_i64(cx.epoch(x.ts))?;
            cx.who_cols(t, x.pid, x.tid, idx)?;
            let peer = f.str(x.peer);
            t.str(x.op.name())?
                .str(if x.op.is_send() { "send" } else { "recv" })?
                .i64(x.fd.into())?
                .path(f.str(x.path))?
                .opt_str((!peer.is_empty()).then(|| String::from_utf8_lossy(peer)).as_deref())?
                .i64(i(x.requested))?
                .opt_i64(result.map(|_| i(x.bytes)))?
                .opt_i64(if mmsg { result } else { None })?
                .opt_str(errno.as_deref())?
                .bool(x.flags & net::PARTIAL != 0)?;
            t.end_row()
        }
        Record::SchedSwitch(s) => {
            let t = &mut tb.sched;
            let (name, _, _) = cx.who(idx);
            t.i64(i(s.ts))?
                .wall(cx.wall(s.ts))?
                .i64(s.cpu.into())?
                .i64(s.prev_pid.into())?
                .i64(s.prev_tid.into())?
                .path(f.str(s.prev_comm))?
                .i64(s.prev_prio.into())?
                .str(s.prev_state.name())?
                .bool(s.traced & sched::PREV != 0)?
                .i64(s.next_pid.into())?
                .i64(s.next_tid.into())?
                .path(f.str(s.next_comm))?
                .i64(s.next_prio.into())?
                .bool(s.traced & sched::NEXT != 0)?
                .opt_str(name)?
                .opt_str((s.prev_call != SleepCall::None).then(|| s.prev_call.name()))?
                .opt_i64((s.prev_ran_us > 0).then(|| s.prev_ran_us.into()))?;
            t.end_row()
        }
        Record::SchedWake(w) => {
            let t = &mut tb.wakeups;
            t.i64(i(w.ts))?.wall(cx.wall(w.ts))?;
            cx.who_cols(t, w.pid, w.tid, idx)?;
            t.str(w.op.name())?
                .path(f.str(w.comm))?
                .i64(w.prio.into())?
                .i64(w.cpu.into())?
                .i64(w.target_cpu.into())?
                .i64(w.waker_pid.into())?
                .i64(w.waker_tid.into())?
                .bool(w.traced & sched::WAKER != 0)?
                .str(w.by.name())?;
            t.end_row()
        }
        Record::Mark(m) => {
            let t = &mut tb.marks;
            t.i64(i(m.ts))?
                .wall(cx.wall(m.ts))?
                .bytes(f.str(m.name))?
                .bytes(f.str(m.value))?
                .opt_i64((m.rank >= 0).then_some(i64::from(m.rank)))?
                .i64(m.pid.into())?;
            t.end_row()
        }
        Record::GpuEvent(e) => {
            let t = &mut tb.gpu_events;
            t.i64(i(e.ts))?
                .wall(cx.wall(e.ts))?
                .bytes(f.str(e.group))?
                .str(e.kind.name())?
                .i64(i(e.code))?
                .str(&mltrace_log::labels::gpu_event(e.kind, e.code))?;
            t.end_row()
        }
        Record::IoAccounting(a) => {
            let t = &mut tb.io_accounting;
            let chars = a.have & acct::CHARS != 0;
            let bytes = a.have & acct::BYTES != 0;
            t.i64(i(a.ts))?.wall(cx.wall(a.ts))?;
            cx.who_cols(t, a.pid, a.tid, idx)?;
            t.str(a.at.name())?
                .opt_i64(chars.then_some(i(a.rchar)))?
                .opt_i64(chars.then_some(i(a.wchar)))?
                .opt_i64(chars.then_some(i(a.syscr)))?
                .opt_i64(chars.then_some(i(a.syscw)))?
                .opt_i64(bytes.then_some(i(a.read_bytes)))?
                .opt_i64(bytes.then_some(i(a.write_bytes)))?
                .opt_i64(bytes.then_some(i(a.cancelled_write_bytes)))?;
            t.end_row()
        }
        Record::Lost(l) => {
            let t = &mut tb.lost;
            t.i64(i(l.ts))?.wall(cx.wall(l.ts))?.str(l.kind.name())?.i64(i(l.count))?;
            t.end_row()
        }
        // In `processes`, from the survey.
        Record::Fork(_) | Record::Exec(_) | Record::Comm(_) | Record::Exit(_) => Ok(()),
        // Every other kind: a row of the table its declaration names,
        // made from its fields.
        _ => kind_row(&mut tb.by_kind, cx, f, rec, idx),
    }
}

/// A row of a table made from the kind's declaration ([`schema::of_kind`]).
fn kind_row(
    tables: &mut [Table],
    cx: &Ctx<'_>,
    f: &Frame<'_>,
    rec: &Record,
    idx: Option<ProcIdx>,
) -> Result<(), Error> {
    let Some(k) = DECLARED_AT.get(usize::from(rec.code())).and_then(|&k| usize::from(k).checked_sub(1)) else {
        return Err(Error::NoRow(rec.kind_name(), rec.table()));
    };
    let t = &mut tables[k];
    let (mut dur, mut pid, mut tid) = (None, None, None);
    rec.visit(&mut |name, v| match (name, v) {
        ("dur", Value::U(x)) => dur = Some(x),
        ("pid", Value::U(x)) => pid = Some(x as u32),
        ("tid", Value::U(x)) => tid = Some(x as u32),
        _ => {}
    });
    let ts = rec.ts();
    t.i64(i(ts))?;
    if let Some(d) = dur {
        t.i64(i(d))?;
    }
    t.wall(cx.wall(ts))?.opt_i64(cx.epoch(ts))?;
    match (pid, tid) {
        (Some(pid), Some(tid)) => cx.who_cols(t, pid, tid, idx)?,
        (Some(pid), None) => drop(t.i64(pid.into())?),
        _ => {}
    }
    let mut res = Ok(());
    rec.visit(&mut |name, v| {
        if res.is_err() || matches!(name, "ts" | "dur" | "pid" | "tid") {
            return;
        }
        res = match v {
            Value::U(x) | Value::Time(x) => t.i64(i(x)).map(drop),
            Value::I(x) => t.i64(x).map(drop),
            Value::Bool(x) => t.bool(x).map(drop),
            Value::F64(x) => t.f64(x).map(drop),
            Value::Str(s) => t.path(f.str(s)).map(drop),
            Value::Code(c) => t.str(c).map(drop),
        };
    });
    res?;
    t.end_row()
}

fn processes(t: &mut Table, cx: &Ctx<'_>) -> Result<(), Error> {
    let list = &cx.survey.procs.list;
    for p in list.iter().filter(|p| p.seen) {
        let (worker, generation) = match p.role {
            Role::Worker { slot, generation } => (Some(i64::from(slot)), Some(i64::from(generation))),
            _ => (None, None),
        };
        let parent = p.parent.and_then(|q| list.get(q as usize)).map(|q| i64::from(q.pid));
        let status = p.exit.map(|e| e.1);
        let command = (!p.cmdline.is_empty()).then(|| p.cmdline.join(" "));
        t.i64(p.pid.into())?
            .opt_i64(parent)?
            .str(&p.name)?
            .str(role_name(p.role))?
            .opt_i64(worker)?
            .opt_i64(generation)?
            .opt_str(p.comm.as_deref())?
            .opt_str(command.as_deref())?
            .bool(p.forked)?
            .i64(i(p.first_ts))?
            .i64(i(p.last_ts))?
            .wall(cx.wall(p.first_ts))?
            .opt_i64(p.exit.map(|e| i(e.0)))?
            .opt_i64(status.map(i64::from))?
            .opt_i64(status.filter(|s| s & 0x7f == 0).map(|s| i64::from((s >> 8) & 0xff)))?
            .opt_i64(status.filter(|s| s & 0x7f != 0).map(|s| i64::from(s & 0x7f)))?
            .opt_str(status.map(labels::describe_status).as_deref())?
            .i64(p.threads.len() as i64)?
            .i64(i(p.syscalls))?
            .i64(i(p.bytes))?;
        t.end_row()?;
    }
    Ok(())
}

/// Writes every table of the log where `at` says (directories created
/// if missing), given its survey; the reader is rewound afterwards.
pub fn export<R: Read + Seek>(
    reader: &mut LogReader<R>,
    survey: &Survey,
    at: &Layout,
    opts: &Options,
) -> Result<Vec<TableStats>, Error> {
    let mut epochs: Vec<(u64, u64, i64)> = survey
        .epochs()
        .into_iter()
        .map(|(a, b, label)| {
            let n = label.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
            (a, b, n)
        })
        .collect();
    epochs.sort_by_key(|e| e.0);
    let cx = Ctx { survey, epochs };
    let mut tb = Tables::create(at, opts.row_group)?;
    processes(&mut tb.processes, &cx)?;
    for c in &survey.checkpoints {
        let t = &mut tb.checkpoints;
        t.i64(i(c.start))?
            .i64(i(c.end.saturating_sub(c.start)))?
            .wall(cx.wall(c.start))?
            .str(&c.path)?
            .i64(c.pid.into())?
            .i64(i(c.bytes))?
            .i64(c.files.into())?
            .i64(c.writers.into())?
            .f64(c.mb_per_s())?;
        t.end_row()?;
    }
    reader.rewind();
    let mut tracker = ProcTracker::default();
    // The incarnation each pid had last, for records the tracker does not
    // attribute (I/O accounting): never a new one, which would put the
    // tracker out of step with the survey's.
    let mut last: HashMap<u32, ProcIdx> = HashMap::default();
    let mut rec = Record::Lost(Default::default());
    while let Some(mut frame) = reader.next_frame()? {
        while frame.next_into(&mut rec) {
            let idx = match (tracker.observe(&rec), &rec) {
                (None, Record::IoAccounting(a)) => last.get(&a.pid).copied(),
                (Some(i), r) => {
                    if let Some(pid) = r.owner() {
                        last.insert(pid, i);
                    }
                    Some(i)
                }
                (None, _) => None,
            };
            row(&mut tb, &cx, &frame, &rec, idx)?;
        }
    }
    reader.rewind();
    tb.close()
}
