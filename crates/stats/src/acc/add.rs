//! Taking in records: each kind's share of the tables (`Stats::add`).

use crate::*;

impl Stats {
    /// Whether `pid` is a data-loader worker, as far as the log has said
    /// so far (the model's reading:
    /// [`mltrace_model::procs::Procs::is_worker`]).
    pub(crate) fn is_worker(&self, pid: u32) -> bool {
        self.tracker.known(pid).is_some_and(|i| self.roles.is_worker(i))
    }

    /// The process `pid` is a data-loader worker of, as far as the log has
    /// said so far, if any.
    pub(crate) fn loader_parent(&self, pid: u32) -> Option<u32> {
        // The command itself is nobody's worker, even between its fork
        // by the recorder and its exec.
        if pid == self.header.root_pid {
            return None;
        }
        let i = self.tracker.known(pid)?;
        let parent = self.roles.get(i).parent?;
        self.roles.is_worker(i).then(|| self.tracker.pids[parent as usize])
    }

    pub(crate) fn proc(&mut self, pid: u32) -> &mut ProcStats {
        let i = match self.current.get(&pid) {
            Some(&i) => i,
            None => {
                self.processes.push(ProcStats { pid, name: labels::pid_name(pid), ..Default::default() });
                self.current.insert(pid, self.processes.len() - 1);
                self.processes.len() - 1
            }
        };
        &mut self.processes[i]
    }

    /// Whether `pid` is, as far as the log has said so far, a data-loader
    /// worker of the trainer (see [`Stats::loader_parent`]).
    pub fn is_worker_now(&self, pid: u32) -> bool {
        self.trainer != 0 && self.loader_parent(pid) == Some(self.trainer)
    }

    /// Whether thread `tid` of `pid` is one of its loader threads, as far
    /// as the log has said so far (the model's reading).
    pub(crate) fn is_loader_thread(&self, pid: u32, tid: u32) -> bool {
        if self.summed_loaders.contains(&(pid, tid)) {
            return true;
        }
        let Some(i) = self.tracker.known(pid) else { return false };
        self.roles.list.get(i as usize).is_some_and(|p| p.is_loader_thread(tid))
    }

    /// What thread `tid` of `pid` is to the threads of its process it
    /// wakes, as far as the log has said so far (the model's reading, one
    /// look-up a wake-up): a collective library's, a loader, or neither.
    pub(crate) fn thread_feeder(&self, pid: u32, tid: u32) -> sched::Feeder {
        if self.summed_loaders.contains(&(pid, tid)) {
            return sched::Feeder::Thread;
        }
        let Some(p) = self.tracker.known(pid).and_then(|i| self.roles.list.get(i as usize)) else {
            return sched::Feeder::No;
        };
        if p.is_collective_thread(tid) {
            sched::Feeder::Collective
        } else if p.is_loader_thread(tid) {
            sched::Feeder::Thread
        } else {
            sched::Feeder::No
        }
    }

    /// What waker `waker_tid` of `waker_pid` is to thread `tid` of `pid`
    /// it woke: one of the woken process's own workers (each rank's under
    /// torchrun, the trainer's among them) or loader threads, or neither.
    pub(crate) fn feeder(&self, pid: u32, tid: u32, waker_pid: u32, waker_tid: u32) -> sched::Feeder {
        if self.loader_parent(waker_pid) == Some(pid) {
            sched::Feeder::Worker
        } else if waker_pid == pid && waker_tid != tid {
            self.thread_feeder(pid, waker_tid)
        } else {
            sched::Feeder::No
        }
    }

    /// A step began in `pid` (0: the job's, not a process's).
    pub(crate) fn step_mark(&mut self, pid: u32, ts: u64) {
        let marks = self.step_marks.entry(pid).or_default();
        if marks.len() < collectives::MAX_ARRIVALS {
            marks.push(ts);
        }
    }

    /// Counts `n` bytes read from `path` by a worker or a loader thread,
    /// in calls that ended in `[ended.0, ended.1]`: one call's end, or a
    /// summary's second (see [`crate::acc::summed_reads`]).
    pub(crate) fn worker_read(&mut self, pid: u32, tid: u32, path: &[u8], kind: FileKind, n: i64, ended: (u64, u64)) {
        if n <= 0 || !matches!(kind, FileKind::Regular | FileKind::BlockDev) {
            return;
        }
        let parent = match self.loader_parent(pid) {
            Some(parent) => parent,
            None if tid != pid && self.is_loader_thread(pid, tid) => pid,
            None => return,
        };
        self.fed.insert(parent);
        if !self.trainer_fed {
            // The first process whose workers read is the trainer, the
            // command's own if they are its.
            if parent != self.trainer {
                self.trainer = parent;
                self.sched.trainer = parent;
                // Its main thread's times over the run start here.
                if let Some(t) = self.sched.timeline.as_mut() {
                    t.clear();
                }
            }
            self.trainer_fed = true;
        }
        // A worker of the trainer (see `is_worker_now`).
        if self.trainer != 0 && parent == self.trainer {
            if let Some(t) = self.sched.timeline.as_mut() {
                match ended.1 > ended.0 {
                    true => self.summed_reads.add(tid, ended.0, ended.1, n as f64, t),
                    false => t.add_at(timeline::Field::ReadBytes, ended.0, n as f64),
                }
            }
            let key = String::from_utf8_lossy(path);
            match self.worker_files.get_mut(key.as_ref()) {
                Some(b) => *b += n as u64,
                None => {
                    self.worker_files.insert(key.into_owned(), n as u64);
                }
            }
        }
    }

    /// Calls summed in the kernel (`record --detail summary`): counted as
    /// the calls they sum are in full; only their times are not known (a
    /// thread's own I/O counts the slow calls, recorded on their own).
    pub(crate) fn io_summary(&mut self, f: &Frame<'_>, r: &IoSummary) {
        self.python.call(r.pid, r.stack, r.calls);
        let Some(op) = r.op.io() else {
            self.calls.add_summary(r.op.name(), r, false);
            self.proc(r.pid).closes += r.calls;
            if is_file(r.kind) && is_data_path(f.str(r.path)) {
                self.meta(r.pid, r.tid, r.time, 0);
            }
            return;
        };
        let path = f.str(r.path);
        if !op.is_write()
            && self.python.seen
            && matches!(r.kind, FileKind::Regular | FileKind::BlockDev)
            && is_data_path(path)
        {
            // The failed calls' time is in `time` too: they are few, and
            // recorded one by one as well.
            let reads =
                python_lines::Reads { calls: r.calls.saturating_sub(r.failed), bytes: r.bytes, time_ns: r.time };
            self.python.read(r.pid, r.tid, r.stack, || hash_path(path), reads);
        }
        if !op.is_write() {
            self.worker_read(r.pid, r.tid, path, r.kind, r.bytes as i64, (r.ts, r.ts.saturating_add(r.dur)));
        }
        let data = !matches!(op, IoOp::Fsync | IoOp::Fdatasync | IoOp::SyncFileRange);
        self.calls.add_summary(op.name(), r, data);
        let worker = self.is_worker(r.pid);
        let p = self.proc(r.pid);
        if p.exec_ts.is_none_or(|t| r.ts.saturating_add(r.dur) > t) {
            p.traced_io.summary(op, r.calls, r.failed, r.bytes);
        }
        p.sockets.summary(r.kind, op.is_write(), r.bytes);
        if op.is_write() {
            p.writes.add_summary(r);
        } else {
            p.reads.add_summary(r);
            if matches!(r.kind, FileKind::Regular | FileKind::BlockDev) {
                p.read_ns += r.time;
                if (worker || r.tid != r.pid) && is_data_path(path) {
                    let h = p.loader_read_latency.get_or_insert_with(Histogram::default);
                    for (slot, n) in r.hist().into_iter().enumerate() {
                        h.add_n(summary::slot_value(slot), u64::from(n));
                    }
                }
                self.thread_reads.add(r.tid, |t| t.read_ns += r.time);
            }
        }
        if let Some(fs) = self.file(r.pid, path, r.kind) {
            if op.is_write() {
                fs.writes += r.calls;
                fs.write_bytes += r.bytes;
                fs.write_ns += r.time;
            } else {
                fs.reads += r.calls;
                fs.read_bytes += r.bytes;
                fs.read_ns += r.time;
            }
        }
    }

    /// `ns` in an open, close or metadata call on a data file by thread
    /// `tid` of `pid` (`opens`: 1 for an open).
    pub(crate) fn meta(&mut self, pid: u32, tid: u32, ns: u64, opens: u64) {
        let p = self.proc(pid);
        p.meta_ns += ns;
        p.data_opens += opens;
        self.thread_reads.add(tid, |t| {
            t.meta_ns += ns;
            t.opens += opens;
        });
    }

    /// A read of a data file (not the program's code, nor the system's):
    /// of a Python process, and from a stack when it has one.
    pub(crate) fn python_read(&mut self, f: &Frame<'_>, r: &Io) {
        if !self.python.seen
            || r.op.is_write()
            || r.ret < 0
            || !matches!(r.kind, FileKind::Regular | FileKind::BlockDev)
        {
            return;
        }
        let path = f.str(r.path);
        if !is_data_path(path) {
            return;
        }
        let reads = python_lines::Reads { calls: 1, bytes: r.ret as u64, time_ns: r.dur };
        self.python.read(r.pid, r.tid, r.stack, || hash_path(path), reads);
    }

    /// An open, close or metadata call on a data file made from a Python stack.
    pub(crate) fn python_meta(&mut self, pid: u32, tid: u32, stack: u32, ns: u64) {
        if stack != 0 {
            self.python.meta(pid, tid, stack, ns);
        }
    }

    /// A call of `pid`'s thread `tid` on a file of `kind`: its own I/O when
    /// the file is one (a pipe or socket is how data comes, not I/O).
    pub(crate) fn own_io(&mut self, pid: u32, tid: u32, ts: u64, dur: u64, kind: FileKind) {
        if matches!(kind, FileKind::Regular | FileKind::BlockDev) {
            self.proc(pid).own_io_ns += dur;
            self.sched.call(pid, tid, ts, ts.saturating_add(dur), sched::CallKind::OwnIo);
        }
    }

    pub(crate) fn file(&mut self, pid: u32, path: &[u8], kind: FileKind) -> Option<&mut FileStats> {
        if !is_file(kind) || path.is_empty() {
            return None;
        }
        self.proc(pid).files.insert(hash_path(path));
        let key = String::from_utf8_lossy(path);
        if !self.files.contains_key(key.as_ref()) {
            self.files.insert(key.clone().into_owned(), FileStats::default());
        }
        self.files.get_mut(key.as_ref())
    }

    pub fn add(&mut self, f: &Frame<'_>, rec: &Record) {
        self.records += 1;
        if let Some(i) = self.tracker.observe(rec) {
            self.roles.note(f, rec, i, &self.tracker);
        }
        // A summed call is counted in its IoSummary.
        let call = mltrace_model::event::split(rec).ok().filter(|c| !c.summed());
        if let Some(stack) = call.and_then(|c| c.stack()) {
            self.python.call(rec.owner().unwrap_or(0), stack, 1);
        }
        // For the kinds' Accept impls (Exec, Mapping).
        self.mapped = self.maps.apply(f, rec);
        let ts = rec.ts();
        self.first_ts = Some(self.first_ts.map_or(ts, |t| t.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(rec.end_ts(), |t| t.max(rec.end_ts())));
        rec.send_to(f, self);
    }
}

// What each kind of record adds (the kinds whose own module holds no
// table of theirs).

impl Accept<Fork> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: Fork) {
        if self.header.is_summary() {
            self.summed_reads.fork(r.tid, r.ts);
        }
        if r.thread {
            self.proc(r.pid).threads += 1;
        } else {
            self.python.fork(r.parent_pid, r.pid);
            let parent = self.current.get(&r.parent_pid).map(|&i| &self.processes[i]);
            let parent = parent.map(|p| (p.name.clone(), p.has_cmdline));
            let root = r.pid == self.header.root_pid;
            let cmd = mltrace_log::show::command_name(&self.header.command, NAME_MAX);
            let has_cmd = !self.header.command.is_empty();
            // A new process unless its records came before its fork
            // (one process, one row).
            if self.exited.remove(&r.pid) {
                self.current.remove(&r.pid);
            }
            let inherited = self.mapped.inherited;
            let p = self.proc(r.pid);
            p.parent = r.parent_pid;
            p.started = Some(r.ts);
            p.maps.inherited_bytes = inherited;
            if let Some((n, has_cmdline)) = parent {
                p.name = n;
                p.has_cmdline = has_cmdline;
            } else if root {
                p.name = cmd;
                p.has_cmdline = has_cmd;
            }
        }
    }
}

impl Accept<Exec> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Exec) {
        let name = mltrace_log::show::command_line(f.str(r.argv), NAME_MAX);
        self.sched.exec(r.pid, r.ts);
        self.python.gone(r.pid);
        let p = self.proc(r.pid);
        p.name = name;
        p.has_cmdline = true;
        p.exec_ts = Some(r.ts);
        // Its time in calls is the new program's from here (as its states are).
        (p.gpu_wait_ns, p.own_io_ns) = (0, 0);
        p.env.clear();
    }
}

impl Accept<Env> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Env) {
        let name = f.str_lossy(r.name);
        if let Some(&n) = env::NAMES.iter().find(|n| **n == name) {
            let v = f.str_lossy(r.value).into_owned();
            self.proc(r.pid).env.push((n, v));
        }
    }
}

impl Accept<Exit> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, rec: &Record, r: Exit) {
        self.sched.add(rec, sched::Feeder::No);
        if self.header.is_summary() {
            self.summed_reads.exit(r.tid, r.ts, self.sched.timeline.as_mut());
        }
        if r.process_exit {
            self.python.gone(r.pid);
            let p = self.proc(r.pid);
            p.exit_status = Some(r.status);
            p.ended = Some(r.ts);
            if let Some(k) = p.kernel.as_mut() {
                k.exited = true;
            }
            // Late records (a block request completing, a last
            // sample) still belong to it, until the pid is forked anew.
            self.exited.insert(r.pid);
        }
    }
}

impl Accept<IoAccounting> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, a: IoAccounting) {
        let p = self.proc(a.pid);
        if p.kernel.get_or_insert_with(KernelIo::default).take(&a) {
            p.traced_io = TracedIo::default();
        }
    }
}

impl Accept<Comm> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Comm) {
        // Named by its comm when nothing better names it: a process
        // started before the recording, or an imported one.
        if r.tid == r.pid {
            let p = self.proc(r.pid);
            if !p.has_cmdline {
                p.name = f.str_lossy(r.comm).into_owned();
            }
        }
    }
}

impl Accept<Io> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Io) {
        // Counted in its summary: only its thread's time is its own.
        if r.summed {
            self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind)
        } else {
            self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
            self.python_read(f, &r);
            if !r.op.is_write() {
                let end = r.ts.saturating_add(r.dur);
                self.worker_read(r.pid, r.tid, f.str(r.path), r.kind, r.ret, (end, end));
            }
            let data = !matches!(r.op, IoOp::Fsync | IoOp::Fdatasync | IoOp::SyncFileRange);
            self.calls.add("", r.op.name(), data.then_some(r.requested), r.dur);
            let worker = self.is_worker(r.pid);
            let p = self.proc(r.pid);
            p.traced_io.io(r.op, r.ret);
            p.sockets.io(&r);
            if r.op.is_write() {
                p.writes.add(r.ret, r.dur)
            } else {
                p.reads.add(r.ret, r.dur);
                // Data reads, not waits on a pipe or socket.
                if matches!(r.kind, FileKind::Regular | FileKind::BlockDev) {
                    p.read_ns += r.dur;
                    if (worker || r.tid != r.pid) && is_data_path(f.str(r.path)) {
                        p.loader_read_latency.get_or_insert_with(Histogram::default).add(r.dur);
                    }
                    self.thread_reads.add(r.tid, |t| t.read_ns += r.dur);
                }
            }
            if let Some(fs) = self.file(r.pid, f.str(r.path), r.kind) {
                let moved = r.ret.max(0) as u64;
                if r.op.is_write() {
                    fs.writes += 1;
                    fs.write_bytes += moved;
                    fs.write_ns += r.dur;
                } else {
                    fs.reads += 1;
                    fs.read_bytes += moved;
                    fs.read_ns += r.dur;
                }
            }
        }
    }
}

impl Accept<Close> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Close) {
        if r.summed {
            self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind)
        } else {
            self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
            self.proc(r.pid).closes += 1;
            if is_file(r.kind) && is_data_path(f.str(r.path)) {
                self.meta(r.pid, r.tid, r.dur, 0);
                self.python_meta(r.pid, r.tid, r.stack, r.dur);
            }
        }
    }
}

impl Accept<IoSummary> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: IoSummary) {
        self.learn_summed_loader(f, &r);
        self.io_summary(f, &r)
    }
}

impl Accept<Transfer> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Transfer) {
        self.own_io(r.pid, r.tid, r.ts, r.dur, FileKind::Regular);
        self.calls.add("", r.op.name(), Some(r.requested), r.dur);
        let p = self.proc(r.pid);
        p.traced_io.transfer(r.ret);
        p.reads.add(r.ret, r.dur);
        p.writes.add(r.ret, 0);
        let moved = r.ret.max(0) as u64;
        if let Some(fs) = self.file(r.pid, f.str(r.in_path), FileKind::Regular) {
            fs.reads += 1;
            fs.read_bytes += moved;
        }
        if let Some(fs) = self.file(r.pid, f.str(r.out_path), FileKind::Regular) {
            fs.writes += 1;
            fs.write_bytes += moved;
        }
    }
}

impl Accept<Open> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Open) {
        self.own_io(r.pid, r.tid, r.ts, r.dur, r.kind);
        self.calls.add("", r.op.name(), None, r.dur);
        // A failed open (a loader looking for its sample) is
        // metadata time too; a pipe's or a socket's is not.
        if (r.ret < 0 || is_file(r.kind)) && is_data_path(f.str(r.abs_path)) {
            self.meta(r.pid, r.tid, r.dur, 1);
            self.python_meta(r.pid, r.tid, r.stack, r.dur);
        }
        self.proc(r.pid).opens.add(if r.ret < 0 { r.ret } else { 0 }, r.dur);
        // A result an import did not have still counts for the file
        // when the importer saw it found (`file` skips kind Unknown).
        if r.ret >= 0 || r.ret == RET_UNKNOWN {
            if let Some(fs) = self.file(r.pid, f.str(r.abs_path), r.kind) {
                fs.opens += 1;
            }
        }
    }
}

impl Accept<IoUring> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: IoUring) {
        if r.op.is_read() {
            let end = r.ts.saturating_add(r.dur);
            self.worker_read(r.pid, r.tid, f.str(r.path), r.kind, r.ret, (end, end));
        }
        self.calls.add("io_uring", r.op.name(), Some(r.requested), r.dur);
        self.proc(r.pid).uring.add(&r);
        if let Some(fs) = self.file(r.pid, f.str(r.path), r.kind) {
            let moved = r.ret.max(0) as u64;
            if r.op.is_write() {
                fs.uring_writes += 1;
                fs.uring_write_bytes += moved;
            } else {
                fs.uring_reads += 1;
                fs.uring_read_bytes += moved;
            }
        }
    }
}

impl Accept<Aio> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: Aio) {
        self.proc(r.pid).aio.add(&r);
        // Only the first iocb's file is known: it counts as touched.
        self.file(r.pid, f.str(r.path), r.kind);
    }
}

impl Accept<Lost> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: Lost) {
        match self.lost.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, n)) => *n += r.count,
            None => self.lost.push((r.kind, r.count)),
        }
    }
}

impl Accept<Counter> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, c: Counter) {
        // A value that is not a number (an older recorder kept GPM's
        // NaN) says nothing: left out of every figure.
        if c.value.is_finite() {
            let (group, name) = (f.str_lossy(c.group), f.str_lossy(c.name));
            let machine = local_pid(c.pid) == 0;
            if c.pid == 0 && group.starts_with("GPU ") && is_gpu_utilisation(&name) {
                self.sched.gpu_sample(&group, c.ts, c.value);
            }
            if machine {
                network::add(&mut self.network, host_of(c.pid), &group, &name, c.ts, c.value);
            }
            if machine && summarised(&group, &name) {
                // A merged log's hosts each have their CPU, memory, GPUs.
                let group = self.on_host(host_of(c.pid), group).into_owned();
                let key = (group, name.into_owned(), c.unit);
                match self.utilisation.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, (sum, n, max))) => {
                        *sum += c.value;
                        *n += 1;
                        *max = max.max(c.value);
                    }
                    None => self.utilisation.push((key, (c.value, 1, c.value))),
                }
            }
        }
    }
}

impl Accept<Phase> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, p: Phase) {
        if p.kind == PhaseKind::Epoch {
            let name = labels::phase(&f.str_lossy(p.name), p.flags);
            self.epochs.push((p.ts, p.ts.saturating_add(p.dur), name));
        } else if p.kind == PhaseKind::Other && f.str(p.name).eq_ignore_ascii_case(b"step") {
            self.step_mark(p.pid, p.ts)
        }
    }
}

impl Accept<Mark> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, m: Mark) {
        if f.str(m.name).eq_ignore_ascii_case(b"step") {
            self.step_mark(m.pid, m.ts)
        } else if f.str(m.name) == labels::UNTRACED_MARK.as_bytes() {
            // A JSON string: the sentence the recorder wrote.
            let text =
                serde_json::from_slice::<String>(f.str(m.value)).unwrap_or_else(|_| f.str_lossy(m.value).into_owned());
            if self.untraced.len() < MAX_UNTRACED {
                self.untraced.push((m.pid, m.ts, text));
            }
        }
    }
}

impl Accept<PageCache> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, c: PageCache) {
        // A fault on a file it has mapped: read through the mapping.
        let through = c.during == CacheDuring::Fault && self.maps.maps_file(c.pid, c.dev, c.ino);
        if c.during == CacheDuring::Read {
            self.thread_reads.add(c.tid, |t| t.from_storage += c.bytes);
            // Brought in by a read of one of the trainer's loaders.
            let loader = self.trainer != 0
                && (self.loader_parent(c.pid) == Some(self.trainer)
                    || (c.pid == self.trainer && c.tid != c.pid && self.is_loader_thread(c.pid, c.tid)));
            if let (true, Some(t)) = (loader, self.sched.timeline.as_mut()) {
                t.add_at(timeline::Field::StorageBytes, c.ts, c.bytes as f64);
            }
        }
        let p = self.proc(c.pid);
        p.cache.add(c.during, c.bytes);
        if through {
            p.maps.storage_read_bytes += c.bytes;
        }
        let path = f.str(c.path);
        let key = if path.is_empty() { dev_inode(c.dev, c.ino) } else { String::from_utf8_lossy(path).into_owned() };
        let fs = self.files.entry(key).or_default();
        fs.cache.add(c.during, c.bytes);
        if through {
            fs.maps.storage_read_bytes += c.bytes;
        }
    }
}

impl Accept<Mapping> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, m: Mapping) {
        let mapped = std::mem::take(&mut self.mapped);
        self.proc(m.pid).maps.add(&m, &mapped);
        if let (Some(MapClass::Data), Some(file), true) = (mapped.class, &mapped.file, m.ret >= 0) {
            let bytes = match m.op {
                MapOp::Mmap => m.len,
                _ => mapped.grown,
            };
            if let Some(fs) = self.file(m.pid, &file.path, FileKind::Regular) {
                fs.maps.mmaps += u64::from(m.op == MapOp::Mmap);
                fs.maps.mapped_bytes += bytes;
            }
        }
    }
}

impl Accept<MajorFault> for Stats {
    fn accept(&mut self, _f: &Frame<'_>, _rec: &Record, r: MajorFault) {
        let path = self.maps.find(r.pid, r.addr).map(|region| region.file.clone());
        let p = self.proc(r.pid);
        match path {
            Some(file) => {
                p.maps.major_faults += 1;
                if let Some(fs) = self.file(r.pid, &file.path, FileKind::Regular) {
                    fs.maps.major_faults += 1;
                }
            }
            None => p.maps.major_faults_other += 1,
        }
    }
}

impl Accept<Block> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, b: Block) {
        let host = host_of(b.pid);
        let (i, new) = self.disk_ids.id_on(host, b.dev, f.str(b.disk));
        if new {
            let name = self.on_host(host, f.str_lossy(b.disk)).into_owned();
            self.disks.push(DiskStats { dev: b.dev, name, ..Default::default() });
        }
        self.disks[i].block.add(&b);
        if b.flags & blk::TRACED != 0 {
            self.proc(b.pid).block.add(&b);
        } else {
            let who = if b.flags & blk::START_UNKNOWN != 0 {
                "(started before the recording)".to_string()
            } else {
                f.str_lossy(b.comm).into_owned()
            };
            match self.block_others.iter_mut().find(|(n, _)| *n == who) {
                Some((_, s)) => s.add(&b),
                None => {
                    let mut s = BlockStats::default();
                    s.add(&b);
                    self.block_others.push((who, s));
                }
            }
        }
    }
}
