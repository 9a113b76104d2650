//! `mltrace dump`: every record as one line of text.

use std::io::Write;
use std::path::Path;

use mltrace_log::{Record, RET_UNKNOWN};

/// A syscall's `ret`, or `?` where the source did not record it.
fn ret(r: i64) -> String {
    if r == RET_UNKNOWN {
        "?".into()
    } else {
        r.to_string()
    }
}

pub fn run(path: &Path) -> anyhow::Result<()> {
    let mut r = crate::open_log(path)?;
    let header = r.header().clone();
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    writeln!(out, "# header: {}", serde_json::to_string(&header)?)?;
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            let s = |id| f.str_lossy(id).into_owned();
            match rec {
                Record::Io(x) => writeln!(out, "{} io {} pid={} tid={} fd={} path={:?} kind={} off={} ({}) req={} ret={} dur={}", x.ts, x.op.name(), x.pid, x.tid, x.fd, s(x.path), x.kind.name(), x.offset, x.offset_src.name(), x.requested, ret(x.ret), x.dur)?,
                Record::Open(x) => writeln!(out, "{} open {} pid={} tid={} dirfd={} path={:?} abs={:?} flags={:#o} mode={:#o} ret={} kind={} trunc={} dur={}", x.ts, x.op.name(), x.pid, x.tid, x.dirfd, s(x.path), s(x.abs_path), x.flags, x.mode, ret(x.ret), x.kind.name(), x.trunc, x.dur)?,
                Record::Close(x) => writeln!(out, "{} close pid={} tid={} fd={} path={:?} ret={}", x.ts, x.pid, x.tid, x.fd, s(x.path), ret(x.ret))?,
                Record::Transfer(x) => writeln!(out, "{} xfer {} pid={} in={}:{:?} out={}:{:?} req={} ret={}", x.ts, x.op.name(), x.pid, x.in_fd, s(x.in_path), x.out_fd, s(x.out_path), x.requested, ret(x.ret))?,
                Record::IoUring(x) => writeln!(out, "{} io_uring {} pid={} tid={} fd={} path={:?} kind={} off={} ({}) req={} ret={} dur={} user_data={:#x} completed_tid={} flags={:?}", x.ts, x.op.name(), x.pid, x.tid, x.fd, s(x.path), x.kind.name(), x.offset, x.offset_src.name(), x.requested, ret(x.ret), x.dur, x.user_data, x.complete_tid, mltrace_log::labels::uring_flags(x.flags))?,
                Record::Aio(x) => writeln!(out, "{} aio {} pid={} tid={} ctx={:#x} fd={} path={:?} cmd={} off={} nr={} min_nr={} ret={} read={} written={} counted={} errors={} partial={} dur={}", x.ts, x.op.name(), x.pid, x.tid, x.ctx, x.fd, s(x.path), x.cmd.name(), x.offset, x.nr, x.min_nr, ret(x.ret), x.read_bytes, x.write_bytes, x.counted, x.errors, x.flags & mltrace_log::aio::PARTIAL != 0, x.dur)?,
                Record::Fork(x) => writeln!(out, "{} fork pid={} tid={} parent={}/{} thread={}", x.ts, x.pid, x.tid, x.parent_pid, x.parent_tid, x.thread)?,
                Record::Exec(x) => writeln!(out, "{} exec pid={} tid={} file={:?} argv={:?}", x.ts, x.pid, x.tid, s(x.filename), s(x.argv).replace('\0', " "))?,
                Record::Comm(x) => writeln!(out, "{} comm pid={} tid={} {:?}", x.ts, x.pid, x.tid, s(x.comm))?,
                Record::Exit(x) => writeln!(out, "{} exit pid={} tid={} status={} process={}", x.ts, x.pid, x.tid, x.status, x.process_exit)?,
                Record::Lost(x) => writeln!(out, "{} lost {} {}", x.ts, x.kind.name(), x.count)?,
                Record::Counter(x) => {
                    writeln!(out, "{} counter {:?} {:?} pid={} {} {}", x.ts, s(x.group), s(x.name), x.pid, x.value, x.unit.name())?
                }
                Record::Phase(x) => writeln!(
                    out,
                    "{} phase {} {:?} dur={} rank={} pid={} flags={}",
                    x.ts,
                    x.kind.name(),
                    s(x.name),
                    x.dur,
                    x.rank,
                    x.pid,
                    x.flags
                )?,
                Record::Mark(x) => writeln!(out, "{} mark {:?} = {} rank={} pid={}", x.ts, s(x.name), s(x.value), x.rank, x.pid)?,
                Record::GpuEvent(x) => {
                    writeln!(out, "{} gpu_event {:?} {} code={:#x}", x.ts, s(x.group), x.kind.name(), x.code)?
                }
                Record::PageCache(x) => writeln!(
                    out,
                    "{} pagecache pid={} tid={} dev={}:{} ino={} path={:?} off={} bytes={} during={}",
                    x.ts,
                    x.pid,
                    x.tid,
                    x.dev >> 20,
                    x.dev & 0xfffff,
                    x.ino,
                    s(x.path),
                    x.offset,
                    x.bytes,
                    x.during.name()
                )?,
                Record::SchedSwitch(x) => writeln!(
                    out,
                    "{} switch cpu={} {}/{} {:?} prio={} state={} -> {}/{} {:?} prio={} traced={}",
                    x.ts,
                    x.cpu,
                    x.prev_pid,
                    x.prev_tid,
                    s(x.prev_comm),
                    x.prev_prio,
                    x.prev_state.name(),
                    x.next_pid,
                    x.next_tid,
                    s(x.next_comm),
                    x.next_prio,
                    x.traced
                )?,
                Record::SchedWake(x) => writeln!(
                    out,
                    "{} {} {}/{} {:?} prio={} cpu={} -> cpu={} by {}/{} traced={}",
                    x.ts,
                    x.op.name(),
                    x.pid,
                    x.tid,
                    s(x.comm),
                    x.prio,
                    x.cpu,
                    x.target_cpu,
                    x.waker_pid,
                    x.waker_tid,
                    x.traced
                )?,
                Record::Mapping(x) => writeln!(
                    out,
                    "{} map {} pid={} tid={} fd={} path={:?} kind={} dev={}:{} ino={} file_flags={} off={} addr={:#x} len={} new_len={} prot={:#x} flags={:#x} ret={} dur={}",
                    x.ts,
                    x.op.name(),
                    x.pid,
                    x.tid,
                    x.fd,
                    s(x.path),
                    x.kind.name(),
                    x.dev >> 20,
                    x.dev & 0xfffff,
                    x.ino,
                    x.file_flags,
                    x.offset,
                    x.addr,
                    x.len,
                    x.new_len,
                    x.prot,
                    x.flags,
                    if x.op == mltrace_log::MapOp::Mmap || x.op == mltrace_log::MapOp::Mremap {
                        if x.ret >= 0 { format!("{:#x}", x.ret) } else { x.ret.to_string() }
                    } else {
                        x.ret.to_string()
                    },
                    x.dur
                )?,
                Record::MajorFault(x) => writeln!(
                    out,
                    "{} majfault pid={} tid={} addr={:#x} flags={} dev={}:{} ino={} path={:?} off={} dur={}",
                    x.ts,
                    x.pid,
                    x.tid,
                    x.addr,
                    x.flags,
                    x.dev >> 20,
                    x.dev & 0xfffff,
                    x.ino,
                    s(x.path),
                    x.offset,
                    x.dur
                )?,
                Record::IoAccounting(x) => writeln!(
                    out,
                    "{} ioac at {} pid={} tid={} have={} rchar={} wchar={} syscr={} syscw={} read_bytes={} write_bytes={} cancelled_write_bytes={}",
                    x.ts,
                    x.at.name(),
                    x.pid,
                    x.tid,
                    x.have,
                    x.rchar,
                    x.wchar,
                    x.syscr,
                    x.syscw,
                    x.read_bytes,
                    x.write_bytes,
                    x.cancelled_write_bytes
                )?,
                Record::Block(x) => writeln!(
                    out,
                    "{} block {} {} dev={}:{} sector={} bytes={} queue={} device={} pid={} tid={} comm={:?} flags={:#x} error={} cause={}#{}",
                    x.ts,
                    s(x.disk),
                    x.op.name(),
                    x.dev >> 20,
                    x.dev & 0xfffff,
                    x.sector,
                    x.bytes,
                    x.queue,
                    x.device,
                    x.pid,
                    x.tid,
                    s(x.comm),
                    x.flags,
                    x.error,
                    x.cause_ts,
                    x.cause_idx
                )?,
            }
        }
    }
    for d in r.take_diagnostics() {
        eprintln!("mltrace: {}: {}", path.display(), d.describe(&header));
    }
    if let Some(t) = r.trailer() {
        writeln!(out, "# trailer: {}", serde_json::to_string(t)?)?;
    }
    Ok(())
}
