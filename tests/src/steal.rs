//! What the hypervisor took from the CPUs over a run (/proc/stat's steal).
//! A thread's CPU clock leaves it out (the kernel's PARAVIRT_TIME_ACCOUNTING
//! charges a task only the time it really ran), while the trace counts it
//! as on CPU: a check against a CPU clock allows for it, measured in the
//! same run, never as a constant.

use mltrace_sample::cpu;

/// Each CPU's times at the start of a run.
pub struct Steal(Vec<(Option<u32>, cpu::CpuTimes)>);

fn now() -> Vec<(Option<u32>, cpu::CpuTimes)> {
    cpu::parse_stat(&std::fs::read_to_string("/proc/stat").expect("/proc/stat"))
}

impl Steal {
    pub fn start() -> Steal {
        Steal(now())
    }

    /// The most of one CPU's time stolen since the start (0-1): a thread
    /// may have run on that CPU all along.
    pub fn most(&self) -> f64 {
        now()
            .iter()
            .zip(&self.0)
            .filter(|((n, _), _)| n.is_some())
            .filter_map(|((_, a), (_, b))| cpu::percentages(b, a))
            .map(|p| p[6] / 100.0)
            .fold(0.0, f64::max)
    }
}

/// The time the trace counts on CPU beyond a CPU clock's `clock` (a time
/// or a share) when `steal` of that CPU's time was stolen while it ran.
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
