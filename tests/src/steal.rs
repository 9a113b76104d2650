//! What the hypervisor took from the CPUs over a run (/proc/stat's steal).
//! A thread's CPU clock leaves it out (the kernel's PARAVIRT_TIME_ACCOUNTING
//! charges a task only the time it really ran), while the trace counts it
//! as on CPU: a check against a CPU clock allows for it, measured in the
//! same run, never as a constant.
//!
//! Only a CPU that wants to run can be stolen from (an idle one halts and
//! leaves the host alone), so the share that matters is of the CPUs' busy
//! time: over a run mostly asleep, steal over all of the time read half
//! of what the trace counted beyond the clock (breakdown_e2e, 2026-12-07).

use mltrace_sample::cpu;

/// The machine's CPU times at the start of a run.
pub struct Steal(cpu::CpuTimes);

fn now() -> cpu::CpuTimes {
    let all = cpu::parse_stat(&std::fs::read_to_string("/proc/stat").expect("/proc/stat"));
    all.into_iter().find(|(n, _)| n.is_none()).expect("/proc/stat's cpu line").1
}

impl Steal {
    pub fn start() -> Steal {
        Steal(now())
    }

    /// The share of the CPUs' busy time (stolen included) stolen since
    /// the start (0-1).
    pub fn share(&self) -> f64 {
        let p = cpu::percentages(&self.0, &now()).unwrap_or_default();
        // mpstat's order: steal at 6, iowait 3, idle 9.
        let busy = 100.0 - p[3] - p[9];
        if busy <= 0.0 {
            return 0.0;
        }
        p[6] / busy
    }
}

/// The time the trace counts on CPU beyond a CPU clock's `clock` (a time
/// or a share) when `steal` of the CPUs' busy time was stolen.
pub fn stolen(clock: f64, steal: f64) -> f64 {
    if steal >= 1.0 {
        return f64::INFINITY;
    }
    clock * steal / (1.0 - steal)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clock_of_what_was_left() {
        // A thread that held a CPU 1 s while a fifth of it was stolen ran 0.8 s.
        assert!((super::stolen(0.8, 0.2) - 0.2).abs() < 1e-12);
        assert_eq!(super::stolen(0.5, 0.0), 0.0);
    }
}
