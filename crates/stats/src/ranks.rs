//! Ranks side by side: every process with data loaders of its own (the
//! trainer; each rank under torchrun, mpirun or Slurm; each host's
//! trainer in a merged log), with its split of time and its loaders'
//! reads, and the one that waited for data clearly more than the others.

use std::collections::HashSet;

use mltrace_log::{env, host_of, local_pid};
use serde_json::{json, Value};

use crate::hist::Histogram;
use crate::verdict::Breakdown;
use crate::{ProcStats, Stats};

/// A straggler waits for data at least this much more than the median
/// (a share of its time) ...
const STRAGGLER_MARGIN: f64 = 0.10;
/// ... and at least this many times the median.
const STRAGGLER_RATIO: f64 = 1.5;
/// With fewer ranks there is no median to stand out from.
const STRAGGLER_MIN_RANKS: usize = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct Rank {
    /// The log's pid (a merged log's host rides in it).
    pub pid: u32,
    /// Its rank: from its environment (`rank_from`), or (when some rank
    /// has none, or two say the same) its place by host, then start.
    pub rank: usize,
    /// The variable the rank came from (`RANK`, ...), `None` for its place.
    pub rank_from: Option<&'static str>,
    pub data_wait_fraction: Option<f64>,
    pub breakdown: Option<Breakdown>,
    /// Its loaders: worker processes, or (none forked) its loader threads.
    pub loaders: usize,
    /// What its loaders read, by calls.
    pub read_bytes: u64,
    pub read_p50_ns: Option<u64>,
    pub read_p99_ns: Option<u64>,
    /// Those bytes per second of its main thread's time.
    pub read_mb_per_s: Option<f64>,
}

/// The rank that waited for data clearly more than the median.
#[derive(Clone, Debug, PartialEq)]
pub struct Straggler {
    pub rank: Rank,
    pub median_data_wait_fraction: f64,
    /// The other ranks' median read p99.
    pub median_read_p99_ns: Option<u64>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

impl Stats {
    /// Where process `p`'s main thread's time went (see [`Breakdown`]).
    pub fn split(&self, p: &ProcStats) -> Option<Breakdown> {
        let main = self.sched.main_thread.get(&p.pid).filter(|m| m.total() > 0)?;
        let pids: Vec<u32> = self.workers_of(p).iter().map(|w| w.pid).collect();
        let has_loaders = !pids.is_empty() || !p.loader_threads.is_empty();
        let dw_ns = if has_loaders { self.sched.data_wait(p.pid, &pids) } else { 0 };
        let ic = self.sched.in_calls.get(&p.pid).copied().unwrap_or_default();
        Breakdown::of(
            main.total() as f64,
            dw_ns.saturating_sub(ic.data_wait) as f64,
            ic.gpu as f64,
            ic.own_io as f64,
            main.cpu.saturating_sub(ic.states.cpu) as f64,
            main.runnable.saturating_sub(ic.states.runnable) as f64,
        )
    }

    /// Every process with loaders of its own that the trainer rule would
    /// pick (the trainer, and the others fed by workers), by host and start.
    pub fn ranks(&self) -> Vec<Rank> {
        let mut procs: Vec<&ProcStats> = self
            .processes
            .iter()
            .filter(|p| p.pid == self.trainer || self.fed.contains(&p.pid))
            .filter(|p| !self.workers_of(p).is_empty() || !p.loader_threads.is_empty())
            .collect();
        procs.sort_by_key(|p| (host_of(p.pid), p.started.unwrap_or(0), local_pid(p.pid)));
        let from_env: Vec<Option<(u32, &'static str)>> =
            procs.iter().map(|p| env::rank(p.env.iter().map(|(n, v)| (*n, v.as_str())))).collect();
        let distinct: HashSet<u32> = from_env.iter().flatten().map(|r| r.0).collect();
        let use_env = from_env.iter().all(Option::is_some) && distinct.len() == procs.len();
        let mut ranks: Vec<Rank> = procs
            .into_iter()
            .zip(from_env)
            .enumerate()
            .map(|(place, (p, env_rank))| {
                let (rank, rank_from) = match env_rank {
                    Some((r, var)) if use_env => (r as usize, Some(var)),
                    _ => (place, None),
                };
                let workers = self.workers_of(p);
                // Loader threads read in the rank's own process.
                let (loaders, hist, bytes) = if workers.is_empty() {
                    (p.loader_threads.len(), p.reads.latency.clone(), p.reads.bytes)
                } else {
                    let mut h = Histogram::default();
                    for w in &workers {
                        h.merge(&w.reads.latency);
                    }
                    (workers.len(), h, workers.iter().map(|w| w.reads.bytes).sum())
                };
                let secs = self.sched.main_thread.get(&p.pid).map_or(0.0, |m| m.total() as f64 / 1e9);
                Rank {
                    pid: p.pid,
                    rank,
                    rank_from,
                    data_wait_fraction: self.data_wait_fraction(p),
                    breakdown: self.split(p),
                    loaders,
                    read_bytes: bytes,
                    read_p50_ns: hist.quantile(0.5),
                    read_p99_ns: hist.quantile(0.99),
                    read_mb_per_s: (secs > 0.0).then(|| bytes as f64 / secs / 1e6),
                }
            })
            .collect();
        ranks.sort_by_key(|r| r.rank);
        ranks
    }

    /// The rank whose data wait is at least [`STRAGGLER_MARGIN`] over the
    /// median and [`STRAGGLER_RATIO`] times it, among at least
    /// [`STRAGGLER_MIN_RANKS`] ranks; `None` when none stands out.
    pub fn straggler(&self, ranks: &[Rank]) -> Option<Straggler> {
        let waits: Vec<(usize, f64)> =
            ranks.iter().enumerate().filter_map(|(i, r)| r.data_wait_fraction.map(|f| (i, f))).collect();
        if waits.len() < STRAGGLER_MIN_RANKS {
            return None;
        }
        let m = median(waits.iter().map(|w| w.1).collect())?;
        let &(i, worst) = waits.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        if worst - m < STRAGGLER_MARGIN || worst < STRAGGLER_RATIO * m {
            return None;
        }
        let others: Vec<f64> = ranks
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(_, r)| r.read_p99_ns)
            .map(|n| n as f64)
            .collect();
        Some(Straggler {
            rank: ranks[i].clone(),
            median_data_wait_fraction: m,
            median_read_p99_ns: median(others).map(|n| n as u64),
        })
    }

    /// A rank's host's name, where the log has several.
    pub fn host_name(&self, pid: u32) -> Option<&str> {
        self.header.hosts.get(host_of(pid)).map(|h| h.name.as_str())
    }

    pub fn rank_json(&self, r: &Rank) -> Value {
        let b = r.breakdown;
        let f = |x: fn(&Breakdown) -> f64| b.as_ref().map(x);
        json!({
            "host": self.host_name(r.pid).map_or_else(|| self.header.host.clone(), str::to_string),
            "pid": local_pid(r.pid),
            "rank": r.rank,
            "rank_from": r.rank_from.unwrap_or("order"),
            "data_wait_fraction": r.data_wait_fraction,
            "gpu_wait_fraction": f(|b| b.gpu_wait),
            "own_io_fraction": f(|b| b.own_io),
            "on_cpu_fraction": f(|b| b.on_cpu),
            "runnable_fraction": f(|b| b.runnable),
            "other_fraction": f(|b| b.other),
            "loaders": r.loaders,
            "read_bytes": r.read_bytes,
            "read_mb_per_s": r.read_mb_per_s,
            "read_p50_us": r.read_p50_ns.map(|n| n as f64 / 1e3),
            "read_p99_us": r.read_p99_ns.map(|n| n as f64 / 1e3),
        })
    }

    pub fn straggler_json(&self, s: &Straggler) -> Value {
        json!({
            "host": self.host_name(s.rank.pid).map_or_else(|| self.header.host.clone(), str::to_string),
            "pid": local_pid(s.rank.pid),
            "rank": s.rank.rank,
            "data_wait_fraction": s.rank.data_wait_fraction,
            "median_data_wait_fraction": s.median_data_wait_fraction,
            "read_p99_us": s.rank.read_p99_ns.map(|n| n as f64 / 1e3),
            "median_read_p99_us": s.median_read_p99_ns.map(|n| n as f64 / 1e3),
        })
    }

    /// `rank 2 (node12, pid 4242) waited for data 31% against a median of
    /// 8%; its workers' reads p99 was 40 ms against 3 ms`.
    pub fn straggler_text(&self, s: &Straggler) -> String {
        let pct = |f: f64| format!("{:.0}%", f * 100.0);
        let r = &s.rank;
        let host = self.host_name(r.pid).map(|h| format!("{h}, ")).unwrap_or_default();
        let mut t = format!(
            "rank {} ({host}pid {}) waited for data {} against a median of {}",
            r.rank,
            local_pid(r.pid),
            pct(r.data_wait_fraction.unwrap_or(0.0)),
            pct(s.median_data_wait_fraction)
        );
        if let (Some(a), Some(b)) = (r.read_p99_ns, s.median_read_p99_ns) {
            t += &format!("; its loaders' reads p99 was {} against {}", crate::duration(a), crate::duration(b));
        }
        t
    }

    /// The ranks as a table (nothing for one).
    pub(crate) fn render_ranks(&self, ranks: &[Rank], o: &mut String) {
        if ranks.len() < 2 {
            return;
        }
        let pct = |f: Option<f64>| f.map_or_else(|| "-".into(), |f| format!("{:.0}%", f * 100.0));
        let _ = std::fmt::Write::write_str(o, "\nranks (processes with data loaders of their own):\n");
        let mut rows =
            vec![["rank", "host", "pid", "data wait", "GPU wait", "own I/O", "on CPU", "read", "MB/s", "p50", "p99"]
                .map(String::from)
                .to_vec()];
        for r in ranks {
            let b = r.breakdown;
            rows.push(vec![
                r.rank.to_string(),
                self.host_name(r.pid).unwrap_or(&self.header.host).to_string(),
                local_pid(r.pid).to_string(),
                pct(r.data_wait_fraction),
                pct(b.map(|b| b.gpu_wait)),
                pct(b.map(|b| b.own_io)),
                pct(b.map(|b| b.on_cpu)),
                crate::bytes(r.read_bytes),
                r.read_mb_per_s.map_or_else(|| "-".into(), |m| format!("{m:.1}")),
                r.read_p50_ns.map_or_else(|| "-".into(), crate::duration),
                r.read_p99_ns.map_or_else(|| "-".into(), crate::duration),
            ]);
        }
        o.push_str(&crate::table(&rows));
    }
}

#[cfg(test)]
mod tests {
    use super::{median, Rank};
    use crate::Stats;

    fn ranks(waits: &[f64]) -> Vec<Rank> {
        waits
            .iter()
            .enumerate()
            .map(|(i, &w)| Rank {
                pid: 100 + i as u32,
                rank: i,
                rank_from: None,
                data_wait_fraction: Some(w),
                breakdown: None,
                loaders: 4,
                read_bytes: 0,
                read_p50_ns: None,
                read_p99_ns: Some(1000 * (i as u64 + 1)),
                read_mb_per_s: None,
            })
            .collect()
    }

    /// Clearly more: 10 points over the median and 1.5 times it, among 3+.
    #[test]
    fn a_straggler_stands_out_from_the_median() {
        let s = Stats::default();
        let got = s.straggler(&ranks(&[0.08, 0.31, 0.07, 0.09])).unwrap();
        assert_eq!(got.rank.rank, 1);
        assert!((got.median_data_wait_fraction - 0.085).abs() < 1e-9);
        // The others' p99s: 1, 3 and 4 us.
        assert_eq!(got.median_read_p99_ns, Some(3000));
        assert!(s.straggler(&ranks(&[0.5, 0.62, 0.5, 0.5])).is_none(), "everyone waits");
        assert!(s.straggler(&ranks(&[0.01, 0.04, 0.01])).is_none(), "nobody waits much");
        assert!(s.straggler(&ranks(&[0.01, 0.6])).is_none(), "two ranks have no median to beat");
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![0.3, 0.1, 0.2]), Some(0.2));
        assert_eq!(median(vec![0.4, 0.1, 0.2, 0.3]), Some(0.25));
    }
}
