//! (e) A cold-cache loader of big files (an MLPerf-style epoch: 4 forked
//! workers reading 32 MiB files in 1 MiB reads, a main process with 64
//! idle threads), untraced and under mltrace with each probe group
//! switched off in turn, the page cache dropped before every run. What
//! each group costs is the all-on time less the time without it.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use mltrace_log::{LogReader, Record};

use super::{cc, first_number, median, secs, verdict, write_file};

const FILES: usize = 96;
const FILE_BYTES: usize = 32 << 20;
const WORKERS: &str = "4";
const IDLE_THREADS: &str = "64";

/// A configuration: its name, and `record`'s options (None: untraced).
struct Config {
    name: &'static str,
    args: Option<&'static [&'static str]>,
    /// Another build (BENCH_BASELINE) with everything on.
    baseline: bool,
}

const CONFIGS: [Config; 6] = [
    Config { name: "untraced", args: None, baseline: false },
    Config { name: "mltrace, all on", args: Some(&[]), baseline: false },
    Config { name: "--sched off", args: Some(&["--sched", "off"]), baseline: false },
    Config { name: "--page-cache off", args: Some(&["--page-cache", "off"]), baseline: false },
    Config { name: "--mappings off (and faults)", args: Some(&["--mappings", "off"]), baseline: false },
    Config { name: "--block-probes off", args: Some(&["--block-probes", "off"]), baseline: false },
];

/// What one traced run left in its log.
#[derive(Clone, Copy, Default)]
struct LogShape {
    records: u64,
    page_cache: u64,
    page_cache_bytes: u64,
    lost: u64,
}

fn shape(p: &Path) -> Result<LogShape> {
    let mut r = LogReader::open(p)?;
    let mut s = LogShape::default();
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            s.records += 1;
            match rec {
                Record::PageCache(c) => {
                    s.page_cache += 1;
                    s.page_cache_bytes += c.bytes;
                }
                Record::Lost(l) => s.lost += l.count,
                _ => {}
            }
        }
    }
    Ok(s)
}

/// Runs `cmd`; returns its stdout and the CPU time (user + system) of it
/// and every descendant it reaped: the workload and its workers, and the
/// recorder too when it is the command. Unlike the wall time, this does
/// not move with the disk's mood: it is what tracing adds in work.
fn run_cpu(cmd: &mut Command) -> Result<(String, u64)> {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().context("spawning")?;
    let pid = child.id() as i32;
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.unwrap(), &mut stdout)?;
    let mut status = 0;
    // SAFETY: rusage is plain data; we reap our own child (Linux fills it
    // with the child's usage and its reaped descendants').
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        ru
    };
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        anyhow::bail!("{cmd:?} failed ({status:#x})");
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    Ok((stdout, ns(ru.ru_utime) + ns(ru.ru_stime)))
}

/// `name runs ns` lines, as `record` writes them with MLTRACE_BPF_STATS.
pub(crate) fn prog_stats(p: &Path) -> Vec<(String, u64, u64)> {
    let text = fs::read_to_string(p).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect()
}

/// Turns the kernel's per-program run-time counting on for as long as it
/// lives (as it was before, after).
pub(crate) struct BpfStats(Option<String>);

impl BpfStats {
    const PATH: &'static str = "/proc/sys/kernel/bpf_stats_enabled";
    pub(crate) fn on() -> Self {
        let was = fs::read_to_string(Self::PATH).ok();
        let _ = fs::write(Self::PATH, "1");
        BpfStats(was)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(w) = &self.0 {
            let _ = fs::write(Self::PATH, w.trim());
        }
    }
}

/// Drops the page cache, then lets the machine settle. On a VM whose
/// hypervisor takes freed memory back (virtio-balloon free page
/// reporting, 2 s after it is freed), a run started at once finds the
/// dropped cache's pages still in the guest, and one started later must
/// fault them back from the host: 1.4 s and 0.5 s of CPU against 2.0 s and
/// 1.8 s for the same untraced job here. The recorder's start-up would put
/// traced runs on the slow side; waiting puts every run there.
fn drop_caches() -> Result<()> {
    let _ = Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", "3").context("dropping the page cache (needs root)")?;
    std::thread::sleep(std::time::Duration::from_secs(3));
    Ok(())
}

pub(crate) fn cold_bench(dir: &Path, mltrace: &Path, baseline: Option<&Path>, reps: usize) -> Result<String> {
    let wl = dir.join("bigfiles");
    cc(&Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/bigfiles.c"), &wl)?;
    let data = dir.join("big");
    fs::create_dir_all(&data)?;
    for i in 0..FILES {
        let p = data.join(i.to_string());
        if fs::metadata(&p).map(|m| m.len()).unwrap_or(0) != FILE_BYTES as u64 {
            write_file(&p, FILE_BYTES, 100 + i as u64)?;
        }
    }
    let mut configs: Vec<&Config> = CONFIGS.iter().collect();
    let base_cfg = Config { name: "baseline build, all on", args: Some(&[]), baseline: true };
    if baseline.is_some() {
        configs.push(&base_cfg);
    }
    let reps = reps.max(5);
    let log = dir.join("out-e.bin");
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    let mut cpu: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    let mut shapes: Vec<Option<LogShape>> = vec![None; configs.len()];
    let args = [data.display().to_string(), FILES.to_string(), WORKERS.into(), IDLE_THREADS.into()];
    // Per program, over the all-on runs: (runs, ns) summed.
    let stats_file = dir.join("out-e.bpf-stats");
    let _stats_on = BpfStats::on();
    let mut progs: Vec<(String, u64, u64)> = Vec::new();
    let mut progs_runs = 0u64;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..reps {
        // A new order each round (shuffled, not turned: turning keeps each
        // configuration right after the same other one, and on this VM a
        // run leaves the disk in a state the next one feels).
        let mut order: Vec<usize> = (0..configs.len()).collect();
        for i in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(i, (seed % (i as u64 + 1)) as usize);
        }
        for ci in order {
            let c = configs[ci];
            eprint!("\rbench: cold loader round {}/{reps} {:<28}", round + 1, c.name);
            let _ = std::io::stderr().flush();
            drop_caches()?;
            let out = match c.args {
                None => run_cpu(Command::new(&wl).args(&args)),
                Some(opts) => {
                    let bin = match (c.baseline, baseline) {
                        (true, Some(b)) => b,
                        _ => mltrace,
                    };
                    // The dataset is cold; the recorder's own binary is read
                    // back (a job reads it once, at its start, not while it
                    // loads data).
                    let _ = fs::read(bin);
                    let mut cmd = Command::new(bin);
                    cmd.args(["record", "-q", "-f", "--gpu", "off", "-o"]).arg(&log).args(opts).arg("--").arg(&wl);
                    let _ = fs::remove_file(&stats_file);
                    if ci == 1 {
                        cmd.env("MLTRACE_BPF_STATS", &stats_file);
                    }
                    run_cpu(cmd.args(&args))
                }
            };
            match out.and_then(|(o, c)| Ok((first_number(&o)?, c))) {
                Ok((ns, c)) => {
                    times[ci].push(ns);
                    cpu[ci].push(c);
                }
                Err(e) => eprintln!("\nbench: cold loader, {}: {e:#}", c.name),
            }
            if c.args.is_some() {
                shapes[ci] = shape(&log).ok();
            }
            if ci == 1 {
                progs_runs += 1;
                for (name, runs, ns) in prog_stats(&stats_file) {
                    match progs.iter_mut().find(|p| p.0 == name) {
                        Some(p) => (p.1, p.2) = (p.1 + runs, p.2 + ns),
                        None => progs.push((name, runs, ns)),
                    }
                }
            }
        }
    }
    eprintln!();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n== 7. (e) Cold-cache loader: {WORKERS} workers reading {FILES} files of {} MiB, {IDLE_THREADS} idle threads \
         in the main process, page cache dropped before each run ({reps} rounds, order shuffled) ==",
        FILE_BYTES >> 20
    );
    let _ = writeln!(
        t,
        "{:<30}{:>10}{:>22}{:>9}{:>11}{:>11}{:>10}{:>12}{:>6}",
        "", "median", "spread", "x", "CPU", "added", "records", "page cache", "lost"
    );
    let med: Vec<u64> = times.iter().map(|v| median(&mut v.clone())).collect();
    let cpu_med: Vec<u64> = cpu.iter().map(|v| median(&mut v.clone())).collect();
    let base = med[0].max(1);
    let ms = |ns: f64| format!("{:+.0} ms", ns / 1e6);
    for (ci, c) in configs.iter().enumerate() {
        let (lo, hi) = (times[ci].iter().min().copied().unwrap_or(0), times[ci].iter().max().copied().unwrap_or(0));
        let s = shapes[ci];
        let _ = writeln!(
            t,
            "{:<30}{:>10}{:>22}{:>9}{:>11}{:>11}{:>10}{:>12}{:>6}",
            c.name,
            secs(med[ci]),
            format!("{} - {}", secs(lo), secs(hi)),
            format!("x{:.3}", med[ci] as f64 / base as f64),
            secs(cpu_med[ci]),
            if ci == 0 { "-".into() } else { ms(cpu_med[ci] as f64 - cpu_med[0] as f64) },
            s.map_or("-".into(), |s| s.records.to_string()),
            s.map_or("-".into(), |s| s.page_cache.to_string()),
            s.map_or("-".into(), |s| s.lost.to_string()),
        );
    }
    if let Some(s) = shapes[1] {
        let _ = writeln!(
            t,
            "  page-cache records, all on: {} for {} MiB from storage ({:.0} KiB per record)",
            s.page_cache,
            s.page_cache_bytes >> 20,
            s.page_cache_bytes as f64 / 1024.0 / s.page_cache.max(1) as f64
        );
    }
    if let (Some(new), Some(Some(old))) = (shapes[1], shapes.get(configs.len() - 1).filter(|_| baseline.is_some())) {
        let _ = writeln!(
            t,
            "  against the baseline build: {:.0}x fewer page-cache records ({} -> {}), bytes {} -> {} MiB  {}",
            old.page_cache as f64 / new.page_cache.max(1) as f64,
            old.page_cache,
            new.page_cache,
            old.page_cache_bytes >> 20,
            new.page_cache_bytes >> 20,
            verdict(
                old.page_cache >= 5 * new.page_cache && old.page_cache_bytes.abs_diff(new.page_cache_bytes) < 1 << 20
            )
        );
    }
    if !progs.is_empty() {
        progs.sort_by_key(|p| std::cmp::Reverse(p.2));
        let total: u64 = progs.iter().filter(|p| !p.0.starts_with('(')).map(|p| p.2).sum();
        let n = progs_runs.max(1);
        let _ = writeln!(
            t,
            "  BPF programs, all on (kernel.bpf_stats_enabled; per run of the job): {} in all; then the \
             recorder's own CPU before the command ran and while it ran",
            ms(total as f64 / n as f64).trim_start_matches('+')
        );
        for (name, runs, ns) in &progs {
            if name.starts_with('(') {
                let _ = writeln!(t, "    {name:<32}{:>10}", ms(*ns as f64 / n as f64).trim_start_matches('+'));
                continue;
            }
            let _ = writeln!(
                t,
                "    {name:<22}{:>10} runs{:>10}{:>9.0} ns/run",
                runs / n,
                ms(*ns as f64 / n as f64).trim_start_matches('+'),
                *ns as f64 / (*runs).max(1) as f64
            );
        }
    }
    let pct = |ci: usize| (med[ci] as f64 / base as f64 - 1.0) * 100.0;
    let all = pct(1);
    let _ = writeln!(t, "targets:\n  (e) all on within 2% of untraced: {all:+.1}%  {}", verdict(all <= 2.0));
    let _ = writeln!(
        t,
        "      CPU tracing adds (workers' BPF time + the recorder), all on: {} over {} untraced",
        ms(cpu_med[1] as f64 - cpu_med[0] as f64),
        secs(cpu_med[0])
    );
    for (ci, c) in configs.iter().enumerate().skip(2).filter(|(_, c)| !c.baseline) {
        let _ = writeln!(
            t,
            "      what {} saves: {:+.1} points of time, {} of CPU",
            c.name,
            all - pct(ci),
            ms(cpu_med[1] as f64 - cpu_med[ci] as f64)
        );
    }
    Ok(t)
}
