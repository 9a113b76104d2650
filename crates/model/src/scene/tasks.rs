//! Scheduling: tasks the traced ones switch with or are woken by, and the CPU chains between them.

use super::*;

impl Scene<'_> {
    /// An untraced task that a context switch or a wake-up names: its
    /// thread goes in one group per host, "other tasks (not traced)", last,
    /// instead of a top-level row per kernel thread and per other program.
    pub(super) fn other_task<E: Encoder>(&mut self, enc: &mut E, tid: u32, comm: &[u8]) -> io::Result<()> {
        if local_pid(tid) == 0 || !self.out.other_tids.insert(tid) {
            return Ok(());
        }
        let host = host_of(tid);
        let pid = global_pid(host, OTHER_TASKS_PID);
        let group = match self.out.other_groups.get(&host) {
            Some(&g) => g,
            None => {
                let id = self.out.id();
                let name = match self.run.host_label(host) {
                    Some(h) => format!("{h} · other tasks (not traced)"),
                    None => "other tasks (not traced)".to_string(),
                };
                let desc = ProcessDesc { pid, parent_pid: None, cmdline: &[], start_ts: None };
                let kind = TrackKind::Process(desc);
                enc.track(&Track { id, parent: None, name: &name, rank: OTHER_TASKS_RANK, kind })?;
                self.out.other_groups.insert(host, id);
                id
            }
        };
        let id = self.out.id();
        let name = String::from_utf8_lossy(comm);
        let kind = TrackKind::Thread { pid, tid };
        enc.track(&Track { id, parent: Some(group), name: &name, rank: 0, kind })
    }

    /// Only switches with a traced side are recorded, so on a CPU the task
    /// a switch takes off may not be the one the previous switch put on
    /// (untraced tasks ran between). Viewers read a CPU as one chain of
    /// switches: this closes the gap with a switch from the task last put
    /// on to the one now taken off. The switch is placed where the kernel's
    /// run time of the one taken off says it got the CPU (it also places a
    /// switch-in the kernel's trace lacked), not before the CPU's last
    /// switch; with no run time, at the same time (the untraced time is
    /// given to the first task).
    pub(super) fn join_cpu_chain<E: Encoder>(&mut self, enc: &mut E, f: &Frame<'_>, r: &SchedSwitch) -> io::Result<()> {
        let i = r.cpu as usize;
        // Both sides are on the CPU's host, the idle task (pid 0) too.
        let host = host_of(r.prev_tid);
        if self.on_cpu.len() <= host {
            self.on_cpu.resize_with(host + 1, Vec::new);
        }
        let on_cpu = &mut self.on_cpu[host];
        if on_cpu.len() <= i {
            on_cpu.resize_with(i + 1, || None);
        }
        if let Some((tid, comm, prio, last)) = &on_cpu[i] {
            if *tid != r.prev_tid {
                enc.sched_switch(&SwitchEvent {
                    ts: r.ts.saturating_sub(u64::from(r.prev_ran_us) * 1000).clamp(*last, r.ts.max(*last)),
                    cpu: r.cpu,
                    prev_tid: *tid,
                    prev_comm: comm,
                    prev_prio: *prio,
                    prev_state: SchedState::Runnable.kernel_bits(),
                    next_tid: r.prev_tid,
                    next_comm: f.str(r.prev_comm),
                    next_prio: r.prev_prio,
                    prev_call: "",
                })?;
            }
        }
        let slot = self.on_cpu[host][i].get_or_insert_with(|| (0, Vec::new(), 0, 0));
        slot.0 = r.next_tid;
        slot.1.clear();
        slot.1.extend_from_slice(f.str(r.next_comm));
        slot.2 = r.next_prio;
        slot.3 = slot.3.max(r.ts);
        Ok(())
    }
}
