//! Which files an export writes: one, when the log fits the budget; else
//! an overview at the output path and detail parts beside it, cut at
//! training-phase boundaries (one epoch or a group of epochs per part)
//! where the log has epochs, else at time windows of about equal weight.

use std::path::{Path, PathBuf};

use crate::grid::Grid;
use crate::survey::{PhaseInfo, Survey};
use crate::window::{self, Window};
use mltrace_log::PhaseKind;

/// Output events (slices, instants, counter values) per file that the
/// viewer opens quickly; docs/big-runs.md says how it was chosen.
pub const PERFETTO_BUDGET: u64 = 2_000_000;
/// Chrome JSON is about ten times larger per event and slower to import.
pub const CHROME_BUDGET: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// One file when it fits, else overview + parts.
    Auto,
    /// One file whatever its size (`--no-split`).
    Never,
    /// Only the overview (`--overview`).
    OverviewOnly,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRole {
    /// Everything (or everything in a window) in one file.
    Whole,
    Overview,
    /// Part `index` (1-based) of `count`.
    Part {
        index: usize,
        count: usize,
    },
}

#[derive(Clone, Debug)]
pub struct PlannedFile {
    pub role: FileRole,
    pub path: PathBuf,
    /// `[from, to)` on the log's clock.
    pub from: u64,
    pub to: u64,
    /// What it holds: `EPOCH 12-13`, `0h20m-0h40m`, `overview`.
    pub label: String,
    /// Output events expected (from the survey).
    pub weight: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub files: Vec<PlannedFile>,
    pub warnings: Vec<String>,
}

/// `run.perfetto-trace` -> (`run`, `.perfetto-trace`), given the extension.
fn split_name(out: &Path, ext: &str) -> (String, String) {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
    match name.strip_suffix(ext) {
        Some(stem) if !stem.is_empty() => (stem.to_string(), ext.to_string()),
        _ => match name.rsplit_once('.') {
            Some((stem, e)) if !stem.is_empty() => (stem.to_string(), format!(".{e}")),
            _ => (name, String::new()),
        },
    }
}

/// A label as a file-name part: letters, digits, `.`, `_`, `-`
/// (`EPOCH 3 (1/2)` -> `EPOCH-3.1-of-2`).
fn file_label(label: &str) -> String {
    let label = match label.rsplit_once(" (") {
        Some((head, tail)) => match tail.strip_suffix(')').and_then(|t| t.split_once('/')) {
            Some((k, m)) if k.parse::<u32>().is_ok() && m.parse::<u32>().is_ok() => format!("{head}.{k}-of-{m}"),
            _ => label.to_string(),
        },
        None => label.to_string(),
    };
    let mut s: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    s.trim_matches('-').chars().take(40).collect()
}

/// `0h20m05s` from the run's start.
fn rel(run: &Survey, ts: u64) -> String {
    let s = ts.saturating_sub(run.start()) / 1_000_000_000;
    format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
}

/// `EPOCH 12-13` for two names of one word, else `A to B`.
fn range_label(a: &str, b: &str) -> String {
    if a == b {
        return a.to_string();
    }
    match (a.rsplit_once(' '), b.rsplit_once(' ')) {
        (Some((wa, na)), Some((wb, nb))) if wa == wb && na.parse::<u64>().is_ok() && nb.parse::<u64>().is_ok() => {
            format!("{wa} {na}-{nb}")
        }
        _ => format!("{a} to {b}"),
    }
}

/// A stretch of the run to put in parts: `[from, to)`, its name and weight.
struct Segment {
    from: u64,
    to: u64,
    name: String,
    weight: u64,
}

/// The phases parts are cut at: epochs, else blocks (groups of epochs).
fn cut_phases(run: &Survey) -> Vec<&PhaseInfo> {
    for kind in [PhaseKind::Epoch, PhaseKind::Block] {
        let v: Vec<&PhaseInfo> = run.phases.iter().filter(|p| p.kind == kind).collect();
        if v.len() >= 2 {
            return v;
        }
    }
    Vec::new()
}

/// Splits `[from, to)` into `n` windows of about equal weight.
fn equal_windows(run: &Survey, from: u64, to: u64, n: usize) -> Vec<u64> {
    let total = run.weight_between(from, to).max(1);
    let g: &Grid = &run.weights;
    let mut cuts = vec![from];
    let mut acc = 0u64;
    let mut next = 1;
    let (a, b) = (g.index(from), g.index(to.saturating_sub(1)));
    for i in a..=b {
        acc += run.weight[i];
        while next < n && acc * n as u64 >= total * next as u64 {
            let t = g.time(i + 1).clamp(from, to);
            if t > *cuts.last().unwrap() && t < to {
                cuts.push(t);
            }
            next += 1;
        }
    }
    cuts.push(to);
    cuts
}

/// Plans the files for `window` (the whole run when it has no filter).
pub fn plan(run: &Survey, win: &Window, out: &Path, ext: &str, split: Split, budget: u64) -> Plan {
    let mut plan = Plan::default();
    let whole_run = win.filter.from.is_none() && win.filter.to.is_none() && win.filter.pids.is_none();
    let mut total = run.weight_between(win.from, win.to);
    if let Some(pids) = &win.filter.pids {
        // Only these processes' share (machine counters stay).
        let all: u64 = run.procs.list.iter().map(|p| p.weight).sum::<u64>().max(1);
        let mine: u64 = run.procs.list.iter().filter(|p| pids.contains(&p.pid)).map(|p| p.weight).sum();
        let machine = run.total_weight().saturating_sub(all);
        total = (total as f64 * (mine + machine) as f64 / (all + machine).max(1) as f64) as u64;
    }
    let whole = |label: &str, weight| PlannedFile {
        role: FileRole::Whole,
        path: out.to_path_buf(),
        from: win.from,
        to: win.to,
        label: label.to_string(),
        weight,
    };
    let label = if whole_run {
        "whole run".to_string()
    } else {
        format!("{} to {}", window::describe(run, win.from), window::describe(run, win.to))
    };
    match split {
        Split::Never => {
            if total > budget {
                plan.warnings.push(format!(
                    "about {total} events in one file, over the {budget} that open quickly in the Perfetto UI; \
                     without --no-split the export would be split into an overview and parts"
                ));
            }
            plan.files.push(whole(&label, total));
            return plan;
        }
        Split::Auto if total <= budget => {
            plan.files.push(whole(&label, total));
            return plan;
        }
        _ => {}
    }
    let (stem, ext) = split_name(out, ext);
    let dir = out.parent().map(Path::to_path_buf).unwrap_or_default();
    if whole_run {
        plan.files.push(PlannedFile {
            role: FileRole::Overview,
            path: out.to_path_buf(),
            from: win.from,
            to: win.to,
            label: "overview".into(),
            weight: 0,
        });
    } else if split == Split::OverviewOnly {
        plan.warnings.push("--overview covers the whole run: --from/--to/--pid are ignored".into());
        plan.files.push(PlannedFile {
            role: FileRole::Overview,
            path: out.to_path_buf(),
            from: run.start(),
            to: run.end(),
            label: "overview".into(),
            weight: 0,
        });
    }
    if split == Split::OverviewOnly {
        return plan;
    }
    // Segments: between epoch starts, else the whole window.
    let phases = cut_phases(run);
    let mut segs: Vec<Segment> = Vec::new();
    let mut cuts: Vec<(u64, String)> =
        phases.iter().filter(|p| p.ts > win.from && p.ts < win.to).map(|p| (p.ts, p.name.clone())).collect();
    cuts.dedup_by_key(|c| c.0);
    // The first stretch is named for the cut phase it is in, else the
    // innermost phase it starts in (INIT), else "start".
    let innermost = run.phases.iter().filter(|p| p.ts <= win.from && win.from < p.ts + p.dur).min_by_key(|p| p.dur);
    let first_name = match (phases.iter().rev().find(|p| p.ts <= win.from && win.from < p.ts + p.dur), innermost) {
        (Some(p), _) => p.name.clone(),
        _ if cuts.is_empty() => String::new(),
        (None, Some(p)) => p.name.clone(),
        (None, None) => "start".into(),
    };
    let mut starts = vec![(win.from, first_name)];
    starts.extend(cuts);
    for (k, (from, name)) in starts.iter().enumerate() {
        let to = starts.get(k + 1).map_or(win.to, |s| s.0);
        let weight = run.weight_between(*from, to);
        segs.push(Segment { from: *from, to, name: name.clone(), weight });
    }
    // Greedy: whole segments while they fit; a segment too big alone is
    // cut into windows.
    let mut parts: Vec<(u64, u64, String, u64)> = Vec::new();
    let mut cur: Option<(u64, u64, String, String, u64)> = None;
    let flush = |cur: &mut Option<(u64, u64, String, String, u64)>, parts: &mut Vec<(u64, u64, String, u64)>| {
        if let Some((f, t, a, b, w)) = cur.take() {
            let label = if a.is_empty() { format!("{}-{}", rel(run, f), rel(run, t)) } else { range_label(&a, &b) };
            parts.push((f, t, label, w));
        }
    };
    for s in &segs {
        if s.weight > budget {
            // A small stretch before it (INIT) goes with its first window
            // rather than being a part of its own.
            let lead = match cur.take() {
                Some(c) if c.4 < budget / 10 => Some(c),
                c => {
                    cur = c;
                    flush(&mut cur, &mut parts);
                    None
                }
            };
            let n = s.weight.div_ceil(budget * 9 / 10).max(2) as usize;
            let mut cuts = equal_windows(run, s.from, s.to, n);
            let m = cuts.len() - 1;
            if let Some(l) = &lead {
                cuts[0] = l.0;
            }
            for k in 0..m {
                let (f, t) = (cuts[k], cuts[k + 1]);
                let mut label = if s.name.is_empty() {
                    format!("{}-{}", rel(run, f), rel(run, t))
                } else {
                    format!("{} ({}/{m})", s.name, k + 1)
                };
                if let (0, Some(l)) = (k, &lead) {
                    if !l.2.is_empty() && !s.name.is_empty() {
                        label = format!("{} to {label}", l.2);
                    }
                }
                parts.push((f, t, label, run.weight_between(f, t)));
            }
            continue;
        }
        match &mut cur {
            Some(c) if c.4 + s.weight <= budget => {
                c.1 = s.to;
                c.3 = s.name.clone();
                c.4 += s.weight;
            }
            _ => {
                flush(&mut cur, &mut parts);
                cur = Some((s.from, s.to, s.name.clone(), s.name.clone(), s.weight));
            }
        }
    }
    flush(&mut cur, &mut parts);
    let count = parts.len();
    let width = count.to_string().len().max(2);
    for (k, (from, to, label, weight)) in parts.into_iter().enumerate() {
        let name = format!("{stem}.part{:0width$}.{}{ext}", k + 1, file_label(&label));
        plan.files.push(PlannedFile {
            role: FileRole::Part { index: k + 1, count },
            path: dir.join(name),
            from,
            to,
            label,
            weight,
        });
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            split_name(Path::new("a/run.perfetto-trace"), ".perfetto-trace"),
            ("run".into(), ".perfetto-trace".into())
        );
        assert_eq!(split_name(Path::new("run.json"), ".perfetto-trace"), ("run".into(), ".json".into()));
        assert_eq!(split_name(Path::new("run"), ".json"), ("run".into(), String::new()));
        assert_eq!(file_label("EPOCH 12-13"), "EPOCH-12-13");
        assert_eq!(file_label("EPOCH 3 (1/2)"), "EPOCH-3.1-of-2");
        assert_eq!(file_label("start to EPOCH 1 (1/3)"), "start-to-EPOCH-1.1-of-3");
        assert_eq!(range_label("EPOCH 12", "EPOCH 13"), "EPOCH 12-13");
        assert_eq!(range_label("start", "EPOCH 2"), "start to EPOCH 2");
        assert_eq!(range_label("EPOCH 4", "EPOCH 4"), "EPOCH 4");
    }
}
