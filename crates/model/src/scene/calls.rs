//! The calls drawn as slices on their threads: syscalls (metadata calls
//! too), io_uring and libaio requests, CUDA and NCCL calls.

use super::*;

impl Scene<'_> {
    pub(super) fn syscall_flows(&mut self, tid: u32, ts: u64, n: u32) {
        self.flow_out.extend((0..n).map(|k| flow_from_syscall(tid, ts, k)));
    }

    pub(super) fn io<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, idx: ProcIdx, r: &Io) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::syscall(op.name(), ret);
        let path = f.str(r.path);
        self.syscall_flows(r.tid, r.ts, r.block_reqs);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::io_key(op, ret), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::IoArgs { r, path })?;
        // A summed call's bytes are in its summary's counters.
        if !op.is_write() && ret > 0 && !r.summed {
            self.rates.add(idx, Rate::Read, r.ts.saturating_add(r.dur), ret as u64, &mut self.rate_samples);
            self.emit_rates(enc)?;
        }
        self.syscall_written(enc, r.tid, r.ts, r.block_reqs, true)
    }

    pub(super) fn open<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, idx: ProcIdx, r: &Open) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let (passed, abs) = (f.str(r.path), f.str(r.abs_path));
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::open(op, abs, ret);
        self.syscall_flows(r.tid, r.ts, r.block_reqs);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::path_key(op as u8, ret, abs), &make);
        let totals = self.run.file_totals(abs);
        self.slice(enc, track, r.ts, r.dur, name, &event::OpenArgs { r, passed, abs, totals })?;
        self.syscall_written(enc, r.tid, r.ts, r.block_reqs, true)
    }

    pub(super) fn close<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, idx: ProcIdx, r: &Close) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let path = f.str(r.path);
        let ret = r.ret;
        let make = move || labels::close(path, ret);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::path_key(u8::MAX, ret, path), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::CloseArgs { r, path })
    }

    pub(super) fn transfer<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        r: &Transfer,
    ) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::syscall(op.name(), ret);
        let (inp, outp) = (f.str(r.in_path), f.str(r.out_path));
        self.syscall_flows(r.tid, r.ts, r.block_reqs);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::transfer_key(op, ret), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::TransferArgs { r, inp, outp })?;
        self.syscall_written(enc, r.tid, r.ts, r.block_reqs, true)
    }

    /// An io_uring request, from submission to completion, on the
    /// submitting thread's track; the many a thread has in flight at once
    /// go on its "overlapping calls" lanes beside it.
    pub(super) fn uring<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        r: &IoUring,
    ) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::uring(op, ret);
        let path = f.str(r.path);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::uring_key(op, ret), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::UringArgs { r, path })?;
        if op.is_read() && ret > 0 {
            self.rates.add(idx, Rate::Read, r.ts.saturating_add(r.dur), ret as u64, &mut self.rate_samples);
            self.emit_rates(enc)?;
        }
        Ok(())
    }

    pub(super) fn aio<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, idx: ProcIdx, r: &Aio) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let (op, ret) = (r.op, r.ret);
        let make = move || labels::aio(op, ret);
        let path = f.str(r.path);
        self.syscall_flows(r.tid, r.ts, r.block_reqs);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::aio_key(op, ret), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::AioArgs { r, path })?;
        self.syscall_written(enc, r.tid, r.ts, r.block_reqs, true)
    }

    /// A send or receive on a socket, on its thread's track.
    pub(super) fn net<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, idx: ProcIdx, r: &NetCall) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let make = move || event::net_name(r);
        let (path, peer) = (f.str(r.path), f.str(r.peer));
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::net_key(r.op, r.ret, r.bytes), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::NetArgs { r, path, peer })
    }

    /// A metadata call (stat, getdents64, rename...), on its thread's
    /// track, with arrows to the block requests it started.
    pub(super) fn meta<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        r: &MetaCall,
    ) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let abs = f.str(r.abs_path);
        let make = move || event::meta_name(r, abs);
        self.syscall_flows(r.tid, r.ts, r.block_reqs);
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::meta_key(r, abs), &make);
        let (path, new_path, new_abs) = (f.str(r.path), f.str(r.new_path), f.str(r.new_abs_path));
        self.slice(enc, track, r.ts, r.dur, name, &event::MetaArgs { r, path, abs, new_path, new_abs })?;
        self.syscall_written(enc, r.tid, r.ts, r.block_reqs, true)
    }

    pub(super) fn gpu_call<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, r: &GpuCall) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let make = move || event::gpu_name(r);
        // A call like the syscalls: the survey counts it among them.
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::gpu_key(r), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::GpuArgs { r })
    }

    pub(super) fn collective<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, r: &Collective) -> io::Result<()> {
        let track = self.thread_lane(enc, idx, r.tid, r.ts, r.ts.saturating_add(r.dur))?;
        let make = move || event::nccl_name(r);
        // A call like the syscalls: the survey counts it among them.
        self.stats.syscalls += 1;
        let name = Name::Keyed(event::nccl_key(r), &make);
        self.slice(enc, track, r.ts, r.dur, name, &event::NcclArgs { r })
    }
}
