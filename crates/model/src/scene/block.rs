//! Block requests: the disks' tracks and counters, the requests' flows from the calls that caused them.

use super::*;

impl Scene<'_> {
    /// The disk's index in `disks`, made on first sight.
    pub(super) fn disk_index(&mut self, f: &Frame<'_>, b: &Block) -> usize {
        let name = f.str(b.disk);
        let host = host_of(b.pid);
        // Another host's disk of the same name and number is another disk.
        let (d, new) = self.disk_ids.id_on(host, b.dev, name);
        if new {
            let counters = DiskCounters::default();
            self.disks.push(Disk { host, dev: b.dev, name: name.to_vec(), counters, edge: None });
        }
        d
    }

    /// The disk's group (the same as its sampled counters'; its own row
    /// is requests in flight) in this file.
    pub(super) fn disk_out<E: Encoder>(&mut self, enc: &mut E, d: usize) -> io::Result<TrackId> {
        if self.out.disks.len() <= d {
            self.out.disks.resize_with(d + 1, || None);
        }
        if let Some(o) = &self.out.disks[d] {
            return Ok(o.group);
        }
        let group_name = labels::disk(&self.disks[d].name, self.disks[d].dev);
        self.host = self.disks[d].host;
        let group = self.group(enc, &group_name)?;
        self.out.disks[d] =
            Some(DiskOut { group, lanes: LaneSet::default(), tracks: [None; 3], first_zero: [None; 3] });
        Ok(group)
    }

    /// Writes the per-process rates gathered so far, each under its
    /// process (declared on first use, as every process track is).
    pub(super) fn emit_rates<E: Encoder>(&mut self, enc: &mut E) -> io::Result<()> {
        if self.rate_samples.is_empty() {
            return Ok(());
        }
        let samples = std::mem::take(&mut self.rate_samples);
        for s in &samples {
            let group = self.proc_group(enc, s.idx)?;
            self.key.clear();
            let _ = write!(self.key, "rate {} {}", s.idx, s.rate.name());
            let key = std::mem::take(&mut self.key);
            let t = self.counter_track_ranked(
                enc,
                &key,
                group,
                s.rate.name(),
                Unit::from_log(CounterUnit::BytesPerSec),
                30,
            );
            self.key = key;
            let t = t?;
            self.stats.counters += 1;
            enc.counter(t, s.ts, s.bytes_per_s)?;
        }
        self.rate_samples = samples;
        self.rate_samples.clear();
        Ok(())
    }

    /// Writes the counter samples gathered for disk `d`.
    pub(super) fn emit_samples<E: Encoder>(&mut self, enc: &mut E, d: usize) -> io::Result<()> {
        if self.samples.is_empty() {
            return Ok(());
        }
        let group = self.disk_out(enc, d)?;
        let samples = std::mem::take(&mut self.samples);
        for smp in &samples {
            let (i, ts, v) = match *smp {
                Sample::InFlight { ts, value } => {
                    let from = self.filter.from.unwrap_or(0);
                    if self.filter.keeps_ts(ts) {
                        if let Some(v) = self.disks[d].edge.take().filter(|_| ts > from) {
                            enc.counter(group, from, v as f64)?;
                            self.stats.counters += 1;
                        }
                        enc.counter(group, ts, value as f64)?;
                        self.stats.counters += 1;
                    } else if ts < from {
                        self.disks[d].edge = Some(value);
                    }
                    continue;
                }
                // /proc/diskstats, when sampled, says the same.
                Sample::ReadRate { .. } | Sample::WriteRate { .. } if self.diskstats_sampled => continue,
                Sample::ReadRate { ts, bytes_per_s } => (0, ts, bytes_per_s),
                Sample::WriteRate { ts, bytes_per_s } => (1, ts, bytes_per_s),
                Sample::Latency { ts, mean_ns } => (2, ts, mean_ns),
            };
            if !self.filter.keeps_ts(ts) {
                continue;
            }
            let out = self.out.disks[d].as_mut().unwrap();
            let t = match out.tracks[i] {
                Some(t) => t,
                None if v == 0.0 => {
                    out.first_zero[i].get_or_insert(ts);
                    continue;
                }
                None => {
                    let zero = out.first_zero[i];
                    let (name, unit, rank) = [
                        ("read", Unit::Named("B/s"), 0),
                        ("write", Unit::Named("B/s"), 1),
                        ("latency", Unit::TimeNs, 5),
                    ][i];
                    let id = self.out.id();
                    enc.track(&Track { id, parent: Some(group), name, rank, kind: TrackKind::Counter(unit) })?;
                    self.out.disks[d].as_mut().unwrap().tracks[i] = Some(id);
                    if let Some(z) = zero {
                        enc.counter(id, z, 0.0)?;
                        self.stats.counters += 1;
                    }
                    id
                }
            };
            enc.counter(t, ts, v)?;
            self.stats.counters += 1;
        }
        self.samples = samples;
        self.samples.clear();
        Ok(())
    }

    pub(super) fn block<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: Option<ProcIdx>,
        b: &Block,
    ) -> io::Result<()> {
        let traced = b.flags & blk::TRACED != 0;
        let d = self.disk_index(f, b);
        let (read, write) = (b.op == BlockOp::Read, b.op == BlockOp::Write);
        self.disks[d].counters.add(b.ts, b.end_ts(), b.bytes, read, write, &mut self.samples);
        if self.filter.pids.is_some() && !(traced && self.filter.keeps_pid(b.pid)) {
            self.samples.clear();
            return Ok(());
        }
        self.stats.block_requests += 1;
        match idx {
            Some(i) if traced && b.cause_ts != 0 => {
                let key = (b.tid, b.cause_ts);
                if let Some(left) = self.started.get_mut(&key) {
                    *left -= 1;
                    if *left == 0 {
                        self.started.remove(&key);
                    }
                    self.emit_block(enc, b, f.str(b.comm), f.str(b.disk), Some(i), d, true)?;
                } else {
                    // Its call is not written yet: held until it is, so both
                    // ends of the arrow land in the same file.
                    let p = Pending { b: *b, comm: f.str(b.comm).to_vec(), disk: f.str(b.disk).to_vec(), idx: i, d };
                    self.pending_oldest = self.pending_oldest.min(b.ts);
                    self.pending_count += 1;
                    self.pending.entry(key).or_default().push(p);
                }
            }
            _ => self.emit_block(enc, b, f.str(b.comm), f.str(b.disk), idx, d, false)?,
        }
        self.emit_samples(enc, d)
    }

    /// After a syscall that started `n` block requests: writes those held
    /// for it, and notes it so later ones get their arrow too.
    pub(super) fn syscall_written<E: Encoder>(
        &mut self,
        enc: &mut E,
        tid: u32,
        ts: u64,
        n: u32,
        written: bool,
    ) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let key = (tid, ts);
        let mut done = 0;
        if let Some(list) = self.pending.remove(&key) {
            self.pending_count -= list.len();
            for p in list {
                self.emit_block(enc, &p.b, &p.comm, &p.disk, Some(p.idx), p.d, written)?;
                done += 1;
            }
        }
        if written && n > done {
            if self.started.len() >= MAX_STARTED {
                self.started.clear();
            }
            self.started.insert(key, n - done);
        }
        Ok(())
    }

    /// Writes held requests whose call has not come `PENDING_NS` after
    /// them (lost, or never logged), without the arrow; all of them when
    /// `now` is `u64::MAX` (the log's end).
    pub(super) fn flush_pending<E: Encoder>(&mut self, enc: &mut E, now: u64) -> io::Result<()> {
        if self.pending_count == 0 || now.saturating_sub(self.pending_oldest) < PENDING_NS {
            return Ok(());
        }
        let cutoff = now.saturating_sub(PENDING_NS);
        let keys: Vec<(u32, u64)> = self.pending.keys().copied().collect();
        let mut oldest = u64::MAX;
        for k in keys {
            let list = self.pending.get_mut(&k).unwrap();
            let (old, keep): (Vec<Pending>, Vec<Pending>) = list.drain(..).partition(|p| p.b.ts < cutoff);
            *list = keep;
            oldest = list.iter().map(|p| p.b.ts).fold(oldest, u64::min);
            if list.is_empty() {
                self.pending.remove(&k);
            }
            self.pending_count -= old.len();
            for p in old {
                self.emit_block(enc, &p.b, &p.comm, &p.disk, Some(p.idx), p.d, false)?;
            }
        }
        self.pending_oldest = oldest;
        Ok(())
    }

    /// A request's slices: on its process's block I/O track (when traced)
    /// with an arrow from its call (`flow_in`) and one to the disk's copy,
    /// and on the disk's requests track.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_block<E: Encoder>(
        &mut self,
        enc: &mut E,
        b: &Block,
        comm: &[u8],
        disk_name: &[u8],
        idx: Option<ProcIdx>,
        d: usize,
        flow_in: bool,
    ) -> io::Result<()> {
        let traced = b.flags & blk::TRACED != 0;
        let dur = b.queue + b.device;
        let (op, bytes, failed) = (b.op, b.bytes, b.error != 0);
        let key = event::block_key(op, bytes, failed);
        let make = move || labels::block(op, bytes, failed);
        let traced_name = match (traced, idx) {
            (true, Some(i)) => Some(self.run.procs.get(i).name.as_str()),
            _ => None,
        };
        let (mut who, mut flags) = (std::mem::take(&mut self.who), std::mem::take(&mut self.flags));
        labels::block_who(&mut who, b, comm, traced_name);
        labels::block_flags(&mut flags, b.flags);
        let end = b.ts.saturating_add(dur);
        if let (true, Some(i)) = (traced, idx) {
            let track = self.block_lane(enc, i, b.ts, end)?;
            if flow_in {
                self.flow_in.push(flow_from_syscall(b.tid, b.cause_ts, b.cause_idx));
            }
            self.flow_out.push(flow_to_disk(b));
            let args = event::BlockArgs { b, who: &who, flags: &flags, disk: disk_name };
            self.slice(enc, track, b.ts, dur, Name::Keyed(key, &make), &args)?;
            self.flow_in.push(flow_to_disk(b));
        }
        let track = self.disk_lane(enc, d, b.ts, end)?;
        let args = event::BlockArgs { b, who: &who, flags: &flags, disk: disk_name };
        self.slice(enc, track, b.ts, dur, Name::Keyed(key, &make), &args)?;
        (self.who, self.flags) = (who, flags);
        Ok(())
    }
}
