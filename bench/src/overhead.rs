//! Sections 1 and 1b: each workload under each tool, round after round
//! (medians, and the targets they are held to); then, for (a), (b) and (p),
//! where the cost goes per stage.

use std::io::Write;

use super::{median, secs, stages, verdict, Bench, Run, Tool, Workload};

/// The section's table, and every run by workload and tool (for section 3).
pub fn overhead(
    bench: &Bench,
    workloads: &[Workload],
    run_w: &dyn Fn(&str) -> bool,
    quick: bool,
) -> (String, Vec<Vec<Vec<Run>>>) {
    // 1. Overhead, alternating tools round by round.
    let mut results: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); bench.tools.len()]; workloads.len()];
    for round in 0..bench.reps {
        for (wi, w) in workloads.iter().enumerate() {
            if !run_w(w.key) {
                continue;
            }
            // Whatever runs first after another workload finds colder
            // caches (dentries, the host's disk cache): an untimed warm-up
            // run, and the order of the tools turns each round.
            eprint!("\rbench: round {}/{} {} {:<16}", round + 1, bench.reps, w.key, "warm-up");
            let _ = bench.run(Tool::Untraced, w);
            let n = bench.tools.len();
            for ti in (0..n).map(|j| (j + round) % n) {
                let t = bench.tools[ti];
                // The slow tools run at most 3 rounds: a median of 3 is enough
                // to show a 10x difference.
                if matches!(t, Tool::Bpftrace | Tool::Strace) && round >= 3 {
                    continue;
                }
                let repeat = if matches!(t, Tool::Bpftrace | Tool::Strace) { 1 } else { w.repeat };
                for _ in 0..repeat {
                    eprint!("\rbench: round {}/{} {} {:<16}", round + 1, bench.reps, w.key, t.name());
                    let _ = std::io::stderr().flush();
                    match bench.run(t, w) {
                        Ok(r) => results[wi][ti].push(r),
                        Err(e) => eprintln!("\nbench: {} on {}: {e:#}", t.name(), w.key),
                    }
                }
            }
        }
    }
    eprintln!();
    let med = |wi: usize, t: Tool| -> Option<u64> {
        let ti = bench.tools.iter().position(|&x| x == t)?;
        let mut v: Vec<u64> = results[wi][ti].iter().map(|r| r.loop_ns).collect();
        (!v.is_empty()).then(|| median(&mut v))
    };
    let mut table = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        table,
        "\n== 1. Capture overhead (median loop time of {} rounds, 5 runs a round on (b), 3 on (p); x = traced / \
         untraced) ==",
        bench.reps
    );
    let _ = write!(table, "{:<48}", "workload");
    // A column as wide as its tool's name and a space, at least 22.
    let widths: Vec<usize> = bench.tools.iter().map(|t| (t.name().len() + 2).max(22)).collect();
    for (t, w) in bench.tools.iter().zip(&widths) {
        let _ = write!(table, "{:>w$}", t.name());
    }
    let _ = writeln!(table);
    for (wi, w) in workloads.iter().enumerate() {
        let _ = write!(table, "{:<48}", w.title);
        let base = med(wi, Tool::Untraced).unwrap_or(1).max(1);
        for (&t, width) in bench.tools.iter().zip(&widths) {
            let cell =
                med(wi, t).map(|m| format!("{} (x{:.2})", secs(m), m as f64 / base as f64)).unwrap_or("-".into());
            let _ = write!(table, "{cell:>width$}");
        }
        let _ = writeln!(table);
    }
    for s in &bench.skipped {
        let _ = writeln!(table, "skipped: {s}");
    }
    let _ = writeln!(table, "\ntargets:");
    let added = |wi: usize, t: Tool| med(wi, t).map(|m| m as f64 - med(wi, Tool::Untraced).unwrap_or(0) as f64);
    if let (Some(m), Some(f)) = (added(0, Tool::Mltrace), added(0, Tool::Floor)) {
        let r = m / f.max(1.0);
        let _ = writeln!(table, "  (a) mltrace's added time <= 1.3x the floor's: {r:.2}x  {}", verdict(r <= 1.3));
    }
    if let (Some(m), Some(f)) = (added(0, Tool::Mltrace), added(0, Tool::LatencyFloor)) {
        let _ = writeln!(
            table,
            "      (for reference: {:.2}x the latency floor's, the least a tracer that times every syscall does)",
            m / f.max(1.0)
        );
    }
    match (added(0, Tool::Bpftrace), added(0, Tool::Mltrace)) {
        (Some(b), Some(m)) => {
            let r = b / m.max(1.0);
            let _ = writeln!(table, "  (a) >= 8x less added time than bpftrace: {r:.1}x  {}", verdict(r >= 8.0));
        }
        _ => {
            let _ = writeln!(table, "  (a) vs bpftrace: not measured (bpftrace missing)");
        }
    }
    if let (Some(m), Some(f)) = (added(1, Tool::Mltrace), added(1, Tool::LatencyFloor)) {
        if m <= 0.0 || f <= 0.0 {
            // An untraced run slower than a traced one: the machine was busy.
            let _ = writeln!(table, "  (b) mltrace vs the latency floor: not measurable (an added time <= 0: noise)");
        } else {
            let r = m / f;
            let _ =
                writeln!(table, "  (b) mltrace's added time <= 2x the latency floor's: {r:.2}x  {}", verdict(r <= 2.0));
        }
    }
    // (p) is there when it runs (it needs python3).
    let p = workloads.iter().position(|w| w.key == "p").map(|wi| (wi, "p"));
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        if let (Some(on), Some(off)) = (med(wi, Tool::Mltrace), med(wi, Tool::MltraceNoSched)) {
            let cost = (on as f64 / off.max(1) as f64 - 1.0) * 100.0;
            let _ = writeln!(
                table,
                "  ({key}) scheduling on vs --sched off: {cost:+.1}% (for reference: noise is a few %)"
            );
        }
    }
    // What the Python stacks cost: the walk's points of the untraced time
    // on the Python loaders, --py-stacks on side by side with the default.
    let q = workloads.iter().position(|w| w.key == "q").map(|wi| (wi, "q"));
    for (wi, key) in p.into_iter().chain(q) {
        if let (Some(on), Some(off), Some(u)) =
            (med(wi, Tool::MltraceStacks), med(wi, Tool::Mltrace), med(wi, Tool::Untraced))
        {
            let points = (on as f64 - off as f64) / u.max(1) as f64 * 100.0;
            let target = if key == "p" { format!("  {}", verdict(points <= 3.0)) } else { String::new() };
            let _ = writeln!(
                table,
                "  ({key}) --py-stacks on vs off (the default): {points:+.1} points of the untraced time{}{target}",
                if key == "p" { " (target: at most 3)" } else { "" }
            );
        }
    }
    // What the per-call route saves: its floor and itself beside the
    // route that runs on every syscall.
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        let u = med(wi, Tool::Untraced).unwrap_or(0) as f64;
        let pct = |t: Tool| med(wi, t).map(|m| (m as f64 / u.max(1.0) - 1.0) * 100.0);
        if let (Some(every), Some(calls)) = (pct(Tool::Floor), pct(Tool::CallsFloor)) {
            let _ = writeln!(
                table,
                "  ({key}) count-only floor: {every:+.1}% on every syscall (raw_tp), {calls:+.1}% on the recorded \
                 calls' own tracepoints"
            );
        }
        if let (Some(fast), Some(calls)) = (pct(Tool::Mltrace), pct(Tool::MltracePerCall)) {
            let _ = writeln!(table, "  ({key}) mltrace: fast route (default) {fast:+.1}%, per-call route {calls:+.1}%");
        }
    }
    for (wi, key) in [(0, "a"), (1, "b"), (2, "c"), (3, "d")].into_iter().chain(p) {
        if let (Some(m), Some(b), Some(u)) =
            (med(wi, Tool::Mltrace), med(wi, Tool::MltraceBaseline), med(wi, Tool::Untraced))
        {
            let (added, base) = (m as f64 - u as f64, b as f64 - u as f64);
            let _ = writeln!(
                table,
                "  ({key}) this mltrace vs the baseline build: {:+.1}% time, added time {:.2}x the baseline's",
                (m as f64 / b.max(1) as f64 - 1.0) * 100.0,
                if base > 0.0 { added / base } else { f64::NAN }
            );
        }
    }
    for (wi, key) in [(1, "b"), (2, "c"), (3, "d")] {
        if let (Some(m), Some(u)) = (med(wi, Tool::Mltrace), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(table, "  ({key}) slowdown < 10%: {slow:+.1}%  {}", verdict(slow < 10.0));
        }
    }
    if let Some((wi, _)) = p {
        if let (Some(m), Some(u)) = (med(wi, Tool::Mltrace), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(
                table,
                "  (p) python small-file loader: mltrace slowdown < 15%: {slow:+.1}%  {}",
                verdict(slow < 15.0)
            );
        }
        if let (Some(m), Some(f)) = (added(wi, Tool::Mltrace), added(wi, Tool::LatencyFloor)) {
            if m <= 0.0 || f <= 0.0 {
                let _ = writeln!(table, "      vs the latency floor: not measurable (an added time <= 0: noise)");
            } else {
                let _ = writeln!(
                    table,
                    "      added time {:.0} ms, {:.2}x the latency floor's ({:.0} ms)",
                    m / 1e6,
                    m / f,
                    f / 1e6
                );
            }
        }
    }
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        if let (Some(m), Some(b), Some(u)) =
            (med(wi, Tool::MltraceSummary), med(wi, Tool::MltraceBaselineSummary), med(wi, Tool::Untraced))
        {
            let (added, base) = (m as f64 - u as f64, b as f64 - u as f64);
            let _ = writeln!(
                table,
                "  ({key}) this summary vs the baseline build's: {:+.1}% time, added time {:.2}x the baseline's",
                (m as f64 / b.max(1) as f64 - 1.0) * 100.0,
                if base > 0.0 { added / base } else { f64::NAN }
            );
        }
    }
    // The live metrics: what they add to the same mode, side by side.
    for (wi, key) in [(0, "a"), (1, "b")].into_iter().chain(p) {
        for (with, without, mode) in
            [(Tool::MltraceLive, Tool::Mltrace, "full"), (Tool::MltraceSummaryLive, Tool::MltraceSummary, "summary")]
        {
            if let (Some(l), Some(m), Some(u)) = (med(wi, with), med(wi, without), med(wi, Tool::Untraced)) {
                let _ = writeln!(
                    table,
                    "  ({key}) live metrics on {mode}: {:+.1}% time against {mode} without ({:+.1}% and {:+.1}% over untraced)",
                    (l as f64 / m.max(1) as f64 - 1.0) * 100.0,
                    (l as f64 / u.max(1) as f64 - 1.0) * 100.0,
                    (m as f64 / u.max(1) as f64 - 1.0) * 100.0,
                );
            }
        }
    }
    // The mode meant to be left on every job.
    for (wi, key) in [(1, "b")].into_iter().chain(p) {
        if let (Some(m), Some(u)) = (med(wi, Tool::MltraceSummary), med(wi, Tool::Untraced)) {
            let slow = (m as f64 / u as f64 - 1.0) * 100.0;
            let _ = writeln!(table, "  ({key}) summary slowdown < 5%: {slow:+.1}%  {}", verdict(slow < 5.0));
        }
    }
    // 1b. Per stage, for (a), (b) and (p): with BENCH_STAGES=1, and in
    // quick runs (BENCH_ONLY) of any of them unless BENCH_STAGES=0. (a)
    // is one recorded call with everything warm, beside (b)'s cold ones.
    let want_stages = match std::env::var("BENCH_STAGES").ok().as_deref() {
        Some("0") => false,
        Some(_) => true,
        None => quick,
    };
    let staged: Vec<usize> = (0..workloads.len())
        .filter(|&wi| matches!(workloads[wi].key, "a" | "b" | "p") && run_w(workloads[wi].key))
        .collect();
    if want_stages && !staged.is_empty() {
        let _ = writeln!(
            table,
            "\n== 1b. Where the cost goes, per stage (the median of BENCH_STAGE_REPS recordings of each, 3 by default; BPF: kernel.bpf_stats_enabled, with the \
             calls of other processes the programs filter out; the recorder: its threads' CPU from the first run to \
             the last; ns/event: per record in the log) =="
        );
        for wi in staged {
            eprint!("\rbench: per stage, {}{:<20}", workloads[wi].key, "");
            let _ = std::io::stderr().flush();
            // Full detail, and the summary where section 1 ran it.
            let mut modes: Vec<(&[&str], Tool)> = vec![(&[], Tool::Mltrace)];
            if bench.tools.contains(&Tool::MltraceSummary) {
                modes.push((&["--detail", "summary", "--slow", "1ms"], Tool::MltraceSummary));
            }
            for (mode, tool) in modes {
                match stages::stages(bench, &workloads[wi], mode, added(wi, tool)) {
                    Ok(rows) => table.push_str(&rows),
                    Err(e) => {
                        let _ = writeln!(table, "  {} {}: failed: {e:#}", workloads[wi].title, mode.join(" "));
                    }
                }
            }
            if bench.tools.contains(&Tool::Floor) {
                match stages::count_floor_stages(&workloads[wi]) {
                    Ok(rows) => table.push_str(&rows),
                    Err(e) => {
                        let _ = writeln!(table, "  {}, count-only floor: failed: {e:#}", workloads[wi].title);
                    }
                }
            }
            // What any tracer that times each call pays here, for scale.
            use super::FloorRings::*;
            for rings in [Shared, PerCpu, Batched].into_iter().filter(|_| bench.tools.contains(&Tool::LatencyFloor)) {
                match stages::floor_stages(&workloads[wi], rings) {
                    Ok(rows) => table.push_str(&rows),
                    Err(e) => {
                        let _ = writeln!(table, "  {}, latency floor: failed: {e:#}", workloads[wi].title);
                    }
                }
            }
        }
        eprintln!();
    }
    (table, results)
}
