//! Each traced process's CPU use, resident memory and threads, from
//! /proc/PID/stat and /proc/PID/statm.

use std::collections::HashMap;
use std::sync::Arc;

use mltrace_log::CounterUnit;

use crate::{Sample, SampleSink};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// Clock ticks in user and kernel mode.
    pub utime: u64,
    pub stime: u64,
    pub threads: u64,
}

/// Fields after the `(comm)`, which may itself hold spaces and parentheses.
/// `None` for a process that has exited and not been reaped yet (state Z
/// or X): its memory is gone (statm reads zeros), so it is not sampled.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    if matches!(f.first(), Some(&("Z" | "X"))) {
        return None;
    }
    // rest starts at field 3 (state): utime is field 14, stime 15, num_threads 20.
    let n = |field: usize| f.get(field - 3).and_then(|v| v.parse().ok());
    Some(ProcStat { utime: n(14)?, stime: n(15)?, threads: n(20)? })
}

/// Resident set size in pages (second field of statm). `None` once the
/// process has let go of its memory (a size of 0: it is exiting, its
/// memory released before the kernel side hears of the exit).
pub fn parse_statm(text: &str) -> Option<u64> {
    let mut f = text.split_whitespace();
    let size: u64 = f.next()?.parse().ok()?;
    if size == 0 {
        return None;
    }
    f.next()?.parse().ok()
}

pub const NAMES: [&str; 4] = ["CPU user", "CPU system", "RSS", "threads"];

pub struct ProcSampler {
    prev: HashMap<u32, (u64, ProcStat)>,
    names: [Arc<str>; 4],
    group: Arc<str>,
    ticks: f64,
    page: f64,
}

impl ProcSampler {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        ProcSampler {
            prev: HashMap::new(),
            names: NAMES.map(Arc::from),
            group: Arc::from(""),
            ticks: ticks.max(1) as f64,
            page: page.max(1) as f64,
        }
    }

    pub fn sample(&mut self, ts: u64, pids: &[u32], out: &mut SampleSink) {
        self.prev.retain(|p, _| pids.contains(p));
        for &pid in pids {
            let Some(st) = crate::read_text(format!("/proc/{pid}/stat")).ok().and_then(|t| parse_stat(&t)) else {
                continue;
            };
            let rss = crate::read_text(format!("/proc/{pid}/statm")).ok().and_then(|t| parse_statm(&t));
            let mut push = |i: usize, unit, value| {
                out.push(Sample { ts, group: self.group.clone(), name: self.names[i].clone(), unit, pid, value })
            };
            // % of one CPU, like top: a busy process with four threads can show 400.
            if let Some((t0, was)) = self.prev.get(&pid) {
                let dt = ts.saturating_sub(*t0) as f64 / 1e9;
                if dt > 0.0 {
                    push(0, CounterUnit::Percent, st.utime.saturating_sub(was.utime) as f64 / self.ticks / dt * 100.0);
                    push(1, CounterUnit::Percent, st.stime.saturating_sub(was.stime) as f64 / self.ticks / dt * 100.0);
                }
            }
            if let Some(pages) = rss {
                push(2, CounterUnit::Bytes, pages as f64 * self.page);
            }
            push(3, CounterUnit::Count, st.threads as f64);
            self.prev.insert(pid, (ts, st));
        }
    }
}

impl Default for ProcSampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_comm() {
        let t = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 12345 1000 200 18446744073709551615";
        assert_eq!(parse_stat(t), Some(ProcStat { utime: 250, stime: 75, threads: 7 }));
        assert_eq!(parse_statm("5000 1234 300 10 0 2000 0"), Some(1234));
        let zombie =
            "1234 (sh) Z 1 1234 1234 0 -1 4227084 100 0 0 0 250 75 0 0 20 0 1 0 12345 0 0 18446744073709551615";
        assert_eq!(parse_stat(zombie), None, "an exited process is not sampled");
        assert_eq!(parse_statm("0 0 0 0 0 0 0"), None, "an exiting process's memory is gone, not 0");
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse_stat(&me).unwrap().threads >= 1);
    }
}
