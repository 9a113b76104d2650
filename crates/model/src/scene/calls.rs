//! The calls drawn as slices on their threads: syscalls (metadata calls
//! too), io_uring and libaio requests, CUDA and NCCL calls.

use super::*;
use crate::ArgSink;

impl Scene<'_> {
    pub(super) fn syscall_flows(&mut self, tid: u32, ts: u64, n: u32) {
        self.flow_out.extend((0..n).map(|k| flow_from_syscall(tid, ts, k)));
    }

    /// A call, as one slice on its thread's track (the many an io_uring
    /// thread has in flight at once go on its "overlapping calls" lanes
    /// beside it), with arrows to the block requests it started; what the
    /// slice says comes from [`Call::shown`].
    pub(super) fn call<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: ProcIdx,
        call: Call<'_>,
    ) -> io::Result<()> {
        let (tid, ts, dur, _) = call.timing();
        let end = ts.saturating_add(dur);
        let track = self.thread_lane(enc, idx, tid, ts, end)?;
        let run = self.run;
        let shown = call.shown(f, |abs| run.file_totals(abs));
        let reqs = call.block_reqs();
        if let Some(n) = reqs {
            self.syscall_flows(tid, ts, n);
        }
        // CUDA and NCCL calls too: the survey counts them among the syscalls.
        self.stats.syscalls += 1;
        let make = || shown.name();
        let pid = self.run.procs.get(idx).pid;
        match run.py_stacks.text(pid, call.stack().unwrap_or(0)) {
            Some(stack) => {
                let args = WithStack(&shown, stack.as_bytes());
                self.slice(enc, track, ts, dur, Name::Keyed(shown.key(), &make), &args)?;
            }
            None => self.slice(enc, track, ts, dur, Name::Keyed(shown.key(), &make), &shown)?,
        }
        if let Some((_, bytes)) = call.data_read() {
            self.rates.add(idx, Rate::Read, end, bytes, &mut self.rate_samples);
            self.emit_rates(enc)?;
        }
        match reqs {
            Some(n) => self.syscall_written(enc, tid, ts, n, true),
            None => Ok(()),
        }
    }
}

/// A call's args, then the Python stack it was made from.
struct WithStack<'a, A>(&'a A, &'a [u8]);

impl<A: Args> Args for WithStack<'_, A> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        self.0.write(s);
        s.str(ArgKey::PythonStack, self.1);
    }
}
