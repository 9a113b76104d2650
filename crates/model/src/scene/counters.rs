//! Counters: the machine's, each core's, the GPUs' and the processes' counter tracks.

use super::*;

impl Scene<'_> {
    /// A counter track under `parent`, by key, declared on first use.
    pub(crate) fn counter_track<E: Encoder>(
        &mut self,
        enc: &mut E,
        key: &str,
        parent: TrackId,
        name: &str,
        unit: Unit,
    ) -> io::Result<TrackId> {
        self.counter_track_ranked(enc, key, parent, name, unit, 10)
    }

    pub(crate) fn counter_track_ranked<E: Encoder>(
        &mut self,
        enc: &mut E,
        key: &str,
        parent: TrackId,
        name: &str,
        unit: Unit,
        rank: i32,
    ) -> io::Result<TrackId> {
        if let Some(&t) = self.out.counters.get(key) {
            return Ok(t);
        }
        let id = self.out.id();
        enc.track(&Track { id, parent: Some(parent), name, rank, kind: TrackKind::Counter(unit) })?;
        self.out.counters.insert(key.to_string(), id);
        Ok(id)
    }

    /// Core `core`'s busy track, in the `per core` group under `CPU`.
    pub(crate) fn core_track<E: Encoder>(&mut self, enc: &mut E, core: u32) -> io::Result<TrackId> {
        // Every sample of every core comes here: the key's buffer is reused.
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = write!(key, "CPU\0per core\0{core}\0{}", self.host);
        let found = self.out.counters.get(&key).copied();
        self.key = key;
        if let Some(t) = found {
            return Ok(t);
        }
        let key = self.key.clone();
        let sub = self.sub_group(enc, "CPU", CPU_DETAILS, 100)?;
        let width = self.run.header.cpu_count.max(1).saturating_sub(1).to_string().len();
        let name = format!("CPU {core:0width$} busy");
        self.counter_track_ranked(enc, &key, sub, &name, Unit::Named("%"), 100 + core.min(1 << 20) as i32)
    }

    /// Per-core counters (group `CPU n`) become one "busy" track per core,
    /// 100 - idle - iowait, in `CPU details` under `CPU`: ten tracks
    /// per core would bury everything else on a many-core machine. The log
    /// keeps every column (`dump`, `stats`).
    pub(super) fn core_counter<E: Encoder>(
        &mut self,
        enc: &mut E,
        c: &Counter,
        core: u32,
        name: &str,
    ) -> io::Result<()> {
        match name {
            "iowait" => {
                self.core_iowait.insert(core, (c.ts, c.value));
                Ok(())
            }
            "idle" => {
                let iowait = match self.core_iowait.get(&core) {
                    Some(&(ts, v)) if ts == c.ts => v,
                    _ => 0.0,
                };
                let busy = (100.0 - c.value - iowait).max(0.0);
                let key = (self.host, core);
                match self.out.busy_zero.get(&key) {
                    Some(None) => {}
                    Some(Some(_)) | None if busy == 0.0 => {
                        self.out.busy_zero.entry(key).or_insert(Some(c.ts));
                        return Ok(());
                    }
                    pending => {
                        let first_zero = pending.copied().flatten();
                        self.out.busy_zero.insert(key, None);
                        let t = self.core_track(enc, core)?;
                        if let Some(z) = first_zero {
                            self.stats.counters += 1;
                            enc.counter(t, z, 0.0)?;
                        }
                    }
                }
                let t = self.core_track(enc, core)?;
                self.stats.counters += 1;
                enc.counter(t, c.ts, busy)
            }
            _ => Ok(()),
        }
    }

    /// A GPU's event (throttling, XID, ECC) as an instant on an `events`
    /// track first in its GPU's group: a throttled GPU explains a slow step.
    pub(super) fn gpu_event<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, r: &GpuEvent) -> io::Result<()> {
        self.gpu_instant(enc, r.pid, &f.str_lossy(r.group), r.ts, r.kind, r.code)
    }

    /// A GPU event of `group` (a GPU's counter group) at `ts`.
    pub(crate) fn gpu_instant<E: Encoder>(
        &mut self,
        enc: &mut E,
        pid: u32,
        group: &str,
        ts: u64,
        kind: GpuEventKind,
        code: u64,
    ) -> io::Result<()> {
        // The GPU's host, as for its counters (pid 0 but for merged logs).
        self.host = host_of(pid);
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = write!(key, "{}\0{group}\0events", self.host);
        let t = match self.out.counters.get(&key) {
            Some(&t) => t,
            None => {
                let parent = self.group(enc, group)?;
                let id = self.out.id();
                enc.track(&Track { id, parent: Some(parent), name: "events", rank: -1, kind: TrackKind::Slices })?;
                self.out.counters.insert(key.clone(), id);
                id
            }
        };
        self.key = key;
        let label = labels::gpu_event(kind, code);
        let args = FnArgs(|a: &mut dyn crate::ArgSink| {
            a.str(ArgKey::GpuEvent, kind.name().as_bytes());
            a.uint(ArgKey::GpuEventCode, code);
        });
        enc.instant(t, ts, Name::Str(&label), &args)?;
        self.stats.instants += 1;
        self.stats.saw(ts);
        Ok(())
    }

    /// Calls counted in the kernel: a rate per process and call, from the
    /// start of the period they were counted in (a period of none says 0).
    pub(super) fn gpu_count<E: Encoder>(&mut self, enc: &mut E, idx: ProcIdx, c: &GpuCount) -> io::Result<()> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let _ = write!(key, "gpu_count\0{}\0{}", c.call.name(), c.pid);
        let t = match self.out.counters.get(&key) {
            Some(&t) => t,
            None => {
                let g = self.proc_group(enc, idx)?;
                let name = format!("{} calls/s", c.call.name());
                self.counter_track_ranked(enc, &key, g, &name, Unit::Named("calls/s"), 41)?
            }
        };
        self.key = key;
        self.period_value(enc, t, c.ts, c.dur, c.count as f64, c.count > 0)
    }

    /// Keeps the last sample of a machine counter (see `last_machine`).
    pub(super) fn remember(&mut self, f: &Frame<'_>, c: &Counter) {
        if local_pid(c.pid) != 0 || !c.value.is_finite() {
            return;
        }
        let (group, name) = (f.str(c.group), f.str(c.name));
        let key = &mut self.machine_key;
        key.clear();
        key.extend_from_slice(group);
        key.push(0);
        key.extend_from_slice(name);
        key.extend_from_slice(&c.pid.to_le_bytes());
        match self.last_machine_at.get(&key[..]) {
            Some(&i) => self.last_machine[i].2 = *c,
            None => {
                self.last_machine_at.insert(key.clone(), self.last_machine.len());
                self.last_machine.push((group.to_vec(), name.to_vec(), *c));
            }
        }
    }

    /// Draws the machine counters' last samples from before this file's
    /// first instant at that instant, so that CPU, memory and disk lines
    /// start at its left edge, not at its first sample.
    pub(super) fn carry<E: Encoder>(&mut self, enc: &mut E) -> io::Result<()> {
        let at = self.range.0.max(self.filter.from.unwrap_or(0));
        let carried: Vec<(Vec<u8>, Vec<u8>, Counter)> =
            self.last_machine.iter().filter(|(_, _, c)| c.ts < at).cloned().collect();
        for (group, name, mut c) in carried {
            c.ts = at;
            self.counter_named(enc, &group, &name, None, &c)?;
        }
        // Requests in flight on each disk at a part's start: the part
        // before ended by applying every change before it. (A window's
        // start is drawn from its last change before, once known: see
        // `Disk::edge`.)
        if self.filter.from.is_none_or(|f| at > f) {
            for d in 0..self.disks.len() {
                let value = self.disks[d].counters.in_flight();
                self.samples.push(Sample::InFlight { ts: at, value });
                self.emit_samples(enc, d)?;
            }
        }
        Ok(())
    }

    pub(super) fn counter<E: Encoder>(
        &mut self,
        enc: &mut E,
        f: &Frame<'_>,
        idx: Option<ProcIdx>,
        c: &Counter,
    ) -> io::Result<()> {
        self.counter_named(enc, f.str(c.group), f.str(c.name), idx, c)
    }

    /// A counter sample, its group and name given as bytes.
    pub(super) fn counter_named<E: Encoder>(
        &mut self,
        enc: &mut E,
        group_bytes: &[u8],
        name_bytes: &[u8],
        idx: Option<ProcIdx>,
        c: &Counter,
    ) -> io::Result<()> {
        let (group, name) = (String::from_utf8_lossy(group_bytes), String::from_utf8_lossy(name_bytes));
        if local_pid(c.pid) == 0 {
            self.host = host_of(c.pid);
            if let Some(core) = group.strip_prefix("CPU ").and_then(|n| n.parse::<u32>().ok()) {
                return self.core_counter(enc, c, core, &name);
            }
            if group == "CPU" {
                match name.as_ref() {
                    "iowait" => self.cpu_iowait = (c.ts, c.value),
                    "idle" => {
                        let iowait = if self.cpu_iowait.0 == c.ts { self.cpu_iowait.1 } else { 0.0 };
                        let g = self.group(enc, "CPU")?;
                        self.stats.counters += 1;
                        enc.counter(g, c.ts, (100.0 - c.value - iowait).max(0.0))?;
                    }
                    _ => {}
                }
            }
        }
        let t = match idx {
            None => self.machine_track(enc, &group, &name, Unit::from_log(c.unit))?,
            Some(i) => {
                // A counter that stays 0 for the whole run says nothing.
                if !self.run.counter_nonzero(group_bytes, name_bytes, c.pid) {
                    return Ok(());
                }
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                let _ = write!(key, "{group}\0{name}\0{}", c.pid);
                let t = match self.out.counters.get(&key) {
                    Some(&t) => t,
                    None => {
                        let n = if group.is_empty() { name.to_string() } else { format!("{group} {name}") };
                        let g = self.proc_group(enc, i)?;
                        self.counter_track_ranked(enc, &key, g, &n, Unit::from_log(c.unit), 40)?
                    }
                };
                self.key = key;
                Some(t)
            }
        };
        if let Some(t) = t {
            self.stats.counters += 1;
            enc.counter(t, c.ts, c.value)?;
        }
        Ok(())
    }

    /// The track of machine counter `group`/`name`: the group's own row
    /// when it is the one the group shows, CPU's rarely useful columns in
    /// "CPU details", `None` for a counter 0 for the whole run (listed in
    /// the file's metadata instead).
    pub(crate) fn machine_track<E: Encoder>(
        &mut self,
        enc: &mut E,
        group: &str,
        name: &str,
        unit: Unit,
    ) -> io::Result<Option<TrackId>> {
        if header(group).is_some_and(|(what, _)| what == name) || is_old_gpu_header(group, name) {
            return self.group(enc, group).map(Some);
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        let machine_pid = global_pid(self.host, 0);
        let _ = write!(key, "{group}\0{name}\0{machine_pid}");
        let t = match self.out.counters.get(&key) {
            Some(&t) => Some(t),
            None if !self.run.counter_nonzero(group.as_bytes(), name.as_bytes(), machine_pid) => None,
            None => {
                let (parent, rank) = if group == "CPU" && !matches!(name, "usr" | "sys" | "iowait") {
                    (self.sub_group(enc, "CPU", CPU_DETAILS, 100)?, 10)
                } else {
                    (self.group(enc, group)?, child_rank(group, name))
                };
                Some(self.counter_track_ranked(enc, &key, parent, name, unit, rank)?)
            }
        };
        self.key = key;
        Ok(t)
    }
}
