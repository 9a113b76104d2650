//! The report's HTML: sections in reading order, tables and inline SVG.
//! Numbers come from the survey, the stats and the plan; this only picks
//! what to show and formats it.

use std::fmt::Write as _;

use mltrace_log::PhaseKind;
use mltrace_model::fmt::{bytes, bytes_pow2, duration, duration_rounded, pct, pct_or_dash};
use mltrace_model::overview_agg::{Agg, Series};
use mltrace_model::plan::FileRole;
use mltrace_model::procs::{ProcIdx, Role};
use mltrace_model::window;
use mltrace_stats::calls::pow2_low;
use mltrace_stats::diff::Diff;
use mltrace_stats::Histogram;

use crate::charts::{self, Band, ChartError, Line};
use crate::Report;

/// Columns of the line charts and of the heat maps, at most.
const LINE_COLUMNS: usize = 120;
const HEAT_COLUMNS: usize = 150;
/// Processes drawn per chart, operations per histogram row.
const TOP_PROCS: usize = 6;
const TOP_OPS: usize = 6;
const TOP_FILES: usize = 15;
const TOP_PROCS_TABLE: usize = 15;

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0 auto;
  max-width: 1100px; padding: 16px 24px; line-height: 1.4; }
h1 { font-size: 1.5em; margin: 0.2em 0; } h2 { font-size: 1.2em; margin: 1.4em 0 0.4em; border-bottom: 1px solid #ccc; }
p.note { color: #555; font-size: 0.9em; margin: 0.2em 0 0.6em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0; }
th, td { padding: 2px 8px; border-bottom: 1px solid #e4e4e4; text-align: right; vertical-align: top; }
th { background: #f3f5f8; } td:first-child, th:first-child { text-align: left; }
table.facts td:first-child { font-weight: 600; color: #444; }
table.facts td { text-align: left; white-space: normal; } table.facts code { word-break: break-all; }
td.path { font-family: ui-monospace, Menlo, monospace; word-break: break-all; max-width: 520px; }
code { font-family: ui-monospace, Menlo, monospace; background: #f3f5f8; padding: 0 3px; }
.verdict { font-size: 1.1em; padding: 8px 12px; background: #fff7e6; border-left: 4px solid #ff7f0e; }
.grid { display: flex; flex-wrap: wrap; gap: 8px; } .grid > figure { flex: 1 1 420px; max-width: 540px; }
figure { margin: 0 0 6px; } svg.chart { width: 100%; height: auto; display: block; }
.warn { color: #a33; } td { white-space: nowrap; } td.path { white-space: normal; } td.l { text-align: left; }
.legend { font-size: 0.8em; margin: -4px 0 0 80px; } .legend span { margin-right: 14px; white-space: nowrap; }
.legend i { display: inline-block; width: 14px; height: 4px; margin: 0 4px 3px 0; vertical-align: middle; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  h2 { break-after: avoid; } figure, table, .verdict { break-inside: avoid; }
  .grid > figure { flex: 0 0 48%; max-width: 48%; }
}
"#;

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Scales byte rates to one unit (`MiB/s`) so that the axis has round
/// ticks; returns the unit.
fn scale_rates(lines: &mut [Line]) -> &'static str {
    let max = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let (div, unit) = match max {
        m if m >= 1024.0 * 1024.0 * 1024.0 => (1024.0 * 1024.0 * 1024.0, "GiB/s"),
        m if m >= 1024.0 * 1024.0 => (1024.0 * 1024.0, "MiB/s"),
        m if m >= 1024.0 => (1024.0, "KiB/s"),
        _ => (1.0, "B/s"),
    };
    for l in lines.iter_mut() {
        for p in &mut l.points {
            p.1 /= div;
        }
    }
    unit
}

/// An axis value in `unit`: `250 MiB/s`, `1.5 GiB/s`.
fn in_unit(v: f64, unit: &str) -> String {
    if v == v.trunc() {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// A byte count shown rounded, with the exact count for scripts and tooltips.
fn bytes_cell(b: u64) -> String {
    format!("<td data-bytes=\"{b}\" title=\"{b} bytes\">{}</td>", bytes(b))
}

fn q(h: &Histogram, x: f64) -> String {
    h.quantile(x).map(duration).unwrap_or_else(|| "-".into())
}

/// The time axis: interval starts as seconds from the run's start, merged
/// `k` at a time into at most `max` columns.
struct Axis {
    origin: u64,
    step: u64,
    grid_start: u64,
    k: usize,
    cols: usize,
    span: f64,
}

impl Axis {
    fn new(r: &Report, max: usize) -> Axis {
        let g = r.survey.overview.grid;
        let k = g.n.div_ceil(max).max(1);
        // From the recording's start to the last record (not to when the
        // recorder stopped: nothing is drawn after the last record).
        let origin = r.survey.start().min(g.start);
        let span = r.survey.last_ts.max(origin).saturating_sub(origin) as f64 / 1e9;
        Axis { origin, step: g.step, grid_start: g.start, k, cols: g.n.div_ceil(k), span: span.max(1e-3) }
    }

    /// Seconds from the start of column `c`.
    fn x(&self, c: usize) -> f64 {
        (self.grid_start + (c * self.k) as u64 * self.step).saturating_sub(self.origin) as f64 / 1e9
    }

    fn col_secs(&self) -> f64 {
        (self.k as u64 * self.step) as f64 / 1e9
    }

    fn secs(&self, ts: u64) -> f64 {
        ts.saturating_sub(self.origin) as f64 / 1e9
    }

    /// Per-interval values summed into columns.
    fn merge(&self, per_interval: impl Iterator<Item = (usize, f64)>) -> Vec<f64> {
        let mut out = vec![0.0; self.cols];
        for (i, v) in per_interval {
            if let Some(o) = out.get_mut(i / self.k) {
                *o += v;
            }
        }
        out
    }

    /// Per-interval averages (a counter) averaged into columns.
    fn mean(&self, per_interval: impl Iterator<Item = (usize, f64)>) -> Vec<(f64, f64)> {
        let mut acc = vec![(0.0, 0u32); self.cols];
        for (i, v) in per_interval {
            if let Some(o) = acc.get_mut(i / self.k) {
                o.0 += v;
                o.1 += 1;
            }
        }
        acc.iter().enumerate().filter(|(_, a)| a.1 > 0).map(|(c, a)| (self.x(c), a.0 / f64::from(a.1))).collect()
    }

    /// Column sums of bytes as (seconds, bytes per second) points.
    fn rates(&self, cols: &[f64]) -> Vec<(f64, f64)> {
        let s = self.col_secs();
        cols.iter().enumerate().map(|(c, v)| (self.x(c), v / s)).collect()
    }
}

/// The training phases to shade: epochs (alternating tints), and the
/// evaluation, init and checkpoint phases.
fn bands(r: &Report, axis: &Axis) -> Vec<Band> {
    let mut epoch = 0;
    r.survey
        .phases
        .iter()
        .filter_map(|p| {
            let tint = match p.kind {
                PhaseKind::Epoch => {
                    epoch += 1;
                    epoch % 2
                }
                PhaseKind::Eval | PhaseKind::Init | PhaseKind::Checkpoint => 2,
                _ => return None,
            };
            Some(Band { from: axis.secs(p.ts), to: axis.secs(p.ts.saturating_add(p.dur)), label: p.name.clone(), tint })
        })
        .collect()
}

fn proc_label(r: &Report, idx: ProcIdx) -> String {
    let p = r.survey.procs.get(idx);
    let mut name = p.name.clone();
    if name.chars().count() > 30 {
        name = name.chars().take(29).collect::<String>() + "…";
    }
    // A merged log's pid carries its host: shown as host:pid.
    match r.survey.host_label(mltrace_log::host_of(p.pid)) {
        Some(h) if r.survey.header.is_merged() => format!("{name} [{h}:{}]", mltrace_log::local_pid(p.pid)),
        _ => format!("{name} [{}]", p.pid),
    }
}

/// A process's per-interval values of `f`.
fn proc_values(r: &Report, idx: usize, f: fn(&Agg) -> f64) -> impl Iterator<Item = (usize, f64)> + '_ {
    r.survey.overview.procs.get(idx).into_iter().flat_map(move |p| p.iter().map(move |(i, a)| (i, f(a))))
}

/// A line or row of the charts: one process, or the workers that held
/// one DataLoader slot of a parent over the run (respawned each epoch,
/// each a process of its own: apart, the later epochs' would not fit).
struct Group {
    label: String,
    members: Vec<usize>,
}

impl Group {
    fn values<'a>(&'a self, r: &'a Report, f: fn(&Agg) -> f64) -> impl Iterator<Item = (usize, f64)> + 'a {
        self.members.iter().flat_map(move |&m| proc_values(r, m, f))
    }
}

fn groups(r: &Report) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut slots: std::collections::HashMap<(Option<ProcIdx>, &str), usize> = Default::default();
    for (i, p) in r.survey.procs.list.iter().enumerate() {
        // The model names a slot's worker in each epoch `DataLoader worker
        // 0 (epoch 2)`: those of one parent and slot are one group.
        let respawned = match p.role {
            Role::Worker { .. } => p.name.split_once(" (epoch ").map(|(base, _)| base),
            _ => None,
        };
        if let Some(base) = respawned {
            if let Some(&g) = slots.get(&(p.parent, base)) {
                out[g].members.push(i);
                continue;
            }
            slots.insert((p.parent, base), out.len());
        }
        out.push(Group { label: proc_label(r, i as ProcIdx), members: vec![i] });
    }
    for g in out.iter_mut().filter(|g| g.members.len() > 1) {
        let first = &r.survey.procs.list[g.members[0]].name;
        let base = first.split(" (epoch ").next().unwrap_or(first);
        g.label = format!("{base} ({} processes, one per epoch)", g.members.len());
    }
    out
}

/// Groups by the total of `f`, largest first, those above 0.
fn top_groups(r: &Report, f: fn(&Agg) -> f64, n: usize) -> Vec<Group> {
    let mut v: Vec<(Group, f64)> = groups(r)
        .into_iter()
        .map(|g| {
            let total = g.values(r, f).map(|x| x.1).sum::<f64>();
            (g, total)
        })
        .filter(|x| x.1 > 0.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.members[0].cmp(&b.0.members[0])));
    v.truncate(n);
    v.into_iter().map(|x| x.0).collect()
}

fn machine_series<'a>(r: &'a Report, group: &str, name: &str) -> Option<&'a Series> {
    r.survey.overview.series.iter().find(|s| s.proc.is_none() && s.core.is_none() && s.group == group && s.name == name)
}

/// A histogram's figure, its bins also as data (`low:count` of each
/// non-empty power-of-two bin) for scripts and tests.
fn bins_figure(o: &mut String, what: &str, op: &str, bins: &[u64], svg: &str) {
    let data: Vec<String> =
        bins.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, c)| format!("{}:{c}", pow2_low(i))).collect();
    let _ = write!(o, "<figure data-op=\"{}\" data-{what}=\"{}\">{svg}</figure>", esc(op), data.join(","));
}

/// A line chart with its legend under it (in the lines' colours).
fn line_figure(o: &mut String, svg: &str, lines: &[Line]) {
    let _ = write!(o, "<figure>{svg}<figcaption class=\"legend\">");
    for (k, l) in lines.iter().enumerate() {
        let _ = write!(o, "<span><i style=\"background:{}\"></i>{}</span>", charts::colour_hex(k), esc(&l.name));
    }
    o.push_str("</figcaption></figure>");
}

/// A heat map with what its darkest cell holds.
fn heat_figure(o: &mut String, svg: &str, rows: &[(String, Vec<f64>)], axis: &Axis) {
    let max = rows.iter().flat_map(|r| r.1.iter().copied()).fold(0.0, f64::max);
    let _ = write!(
        o,
        "<figure>{svg}<figcaption class=\"legend\">darkest cell: {} in {}</figcaption></figure>",
        bytes(max as u64),
        mltrace_model::grid::describe_step(axis.k as u64 * axis.step)
    );
}

/// Rows ordered by when they first have something (earliest first).
fn by_first_activity(rows: &mut [(String, Vec<f64>)]) {
    rows.sort_by_key(|r| r.1.iter().position(|&v| v > 0.0).unwrap_or(usize::MAX));
}

/// The page's head, up to its body.
fn head(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>mltrace report: {}</title><style>{STYLE}</style></head><body>\n",
        esc(title)
    );
}

/// What a run's command is called in a title.
fn title(r: &Report) -> String {
    let cmd = r.survey.header.command.join(" ");
    if cmd.is_empty() {
        r.log.display().to_string()
    } else {
        cmd
    }
}

pub fn render(r: &Report) -> Result<String, ChartError> {
    let mut o = String::new();
    head(&mut o, &title(r));
    let _ = writeln!(o, "<h1>mltrace report</h1><p class=\"note\">{}</p>", esc(&r.log.display().to_string()));
    sections(r, &mut o)?;
    o.push_str("</body></html>\n");
    Ok(o)
}

/// Two runs on one page: the comparison, then each run's report, its
/// sections' ids prefixed `before-` and `after-`.
pub fn render_pair(before: &Report, after: &Report, diff: &Diff) -> Result<String, ChartError> {
    let mut o = String::new();
    head(&mut o, &format!("{} (before and after)", title(after)));
    let _ = writeln!(
        o,
        "<h1>mltrace report: before and after</h1><p class=\"note\">{} and {}</p>",
        esc(&before.log.display().to_string()),
        esc(&after.log.display().to_string())
    );
    compare(diff, &mut o);
    for (id, word, r) in [("before", "Before", before), ("after", "After", after)] {
        let mut body = String::new();
        sections(r, &mut body)?;
        let _ = writeln!(o, "<h1 id=\"{id}\">{word}: {}</h1>", esc(&r.log.display().to_string()));
        o.push_str(&body.replace("<section id=\"", &format!("<section id=\"{id}-")));
    }
    o.push_str("</body></html>\n");
    Ok(o)
}

/// Colours of the eight shares in the comparison's bars.
const SHARE_COLOURS: [&str; mltrace_stats::diff::SHARES.len()] =
    ["#d62728", "#9467bd", "#2ca02c", "#8c564b", "#1f77b4", "#ff7f0e", "#e377c2", "#c7c7c7"];

/// The shares the comparison has, each with its colour.
fn coloured_shares(d: &Diff) -> Vec<(&'static mltrace_stats::Share, &'static str)> {
    let shown = d.shares();
    let all = mltrace_stats::diff::SHARES.iter().zip(SHARE_COLOURS);
    all.filter(|(s, _)| shown.iter().any(|x| x.key == s.key)).collect()
}

/// The comparison of two runs (`mltrace diff`'s figures): its line, the
/// trainer's time as two bars, and its tables.
fn compare(d: &Diff, o: &mut String) {
    let _ = write!(o, "<section id=\"compare\"><h2>Before and after</h2><table class=\"facts\">");
    for (word, r) in [("before", &d.before), ("after", &d.after)] {
        let _ = write!(
            o,
            "<tr><td>{word}</td><td>{} <code>{}</code> on {} ({} CPUs), starting {}</td></tr>",
            esc(&r.file),
            esc(&r.command.join(" ")),
            esc(&r.host),
            r.cpus,
            esc(&r.started)
        );
        for n in r.notes() {
            let _ = write!(o, "<tr><td>{word}</td><td><span class=\"warn\">{}</span></td></tr>", esc(&n));
        }
    }
    o.push_str("</table>");
    let differ = d.differences();
    if !differ.is_empty() {
        let _ = write!(o, "<p class=\"note\">The two runs have different {}.</p>", differ.join(" and "));
    }
    let _ = write!(o, "<p class=\"verdict\" id=\"conclusion\">{}</p>", esc(&d.conclusion()));
    share_bars(d, o);
    for (heading, rows) in d.tables(0) {
        if let Some(h) = &heading {
            let _ = write!(o, "<h3>{}</h3>", esc(h));
        }
        o.push_str("<table>");
        for (i, row) in rows.iter().enumerate() {
            o.push_str("<tr>");
            let cell = if i == 0 { "th" } else { "td" };
            for (j, c) in row.iter().enumerate() {
                // Paths whole, wrapped; the first column's indent kept.
                let class = if j == 0 && heading.as_deref().is_some_and(|h| h.contains("whose reads")) {
                    " class=\"path\""
                } else {
                    ""
                };
                let text = if j == 0 { c.replacen("  ", "\u{a0}\u{a0}\u{a0}", 1) } else { c.clone() };
                let _ = write!(o, "<{cell}{class}>{}</{cell}>", esc(&text));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    let _ = writeln!(
        o,
        "<p class=\"note\">Every figure is the one <code>mltrace stats --json</code> gives for its log; \
         <code>mltrace diff --json</code> gives them all. No measurable difference: every share of the \
         trainer's time within {:.2} (or {} s over the shorter run), the wall time within {} (or {} s), \
         steps per second within {}, as two recordings of one steady job differ (docs/diff.md).</p></section>",
        mltrace_stats::diff::NOISE_SHARE,
        mltrace_stats::diff::NOISE_JITTER_S,
        pct(mltrace_stats::diff::NOISE_TIME),
        mltrace_stats::diff::NOISE_JITTER_S,
        pct(mltrace_stats::diff::NOISE_TIME),
    );
}

/// The trainer's time in each run as a bar of its shares, with
/// their values as data (`data-shares="data_wait:0.41,..."`).
fn share_bars(d: &Diff, o: &mut String) {
    let runs = [("before", d.before.breakdown), ("after", d.after.breakdown)];
    if runs.iter().all(|r| r.1.is_none()) {
        return;
    }
    let (w, left, bar, gap) = (800.0, 60.0, 26.0, 10.0);
    let height = 2.0 * bar + gap + 4.0;
    let _ = write!(
        o,
        "<figure><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {height}\" \
         role=\"img\" aria-label=\"the trainer's time, before and after\">"
    );
    for (i, (word, b)) in runs.iter().enumerate() {
        let y = 2.0 + i as f64 * (bar + gap);
        let side = |p: mltrace_stats::diff::Pair| if i == 0 { p.before } else { p.after };
        let shares: Vec<(&str, f64)> =
            coloured_shares(d).iter().map(|(s, _)| (s.key, side(d.share(s)).unwrap_or(0.0))).collect();
        let data: Vec<String> = shares.iter().map(|(k, v)| format!("{k}:{v:.4}")).collect();
        let _ = write!(
            o,
            "<g data-run=\"{word}\" data-shares=\"{}\"><text x=\"0\" y=\"{:.1}\" font-size=\"13\">{word}</text>",
            data.join(","),
            y + bar * 0.68
        );
        if b.is_none() {
            let _ = write!(
                o,
                "<text x=\"{left}\" y=\"{:.1}\" font-size=\"12\">no scheduling records</text>",
                y + bar * 0.68
            );
        } else {
            let mut x = left;
            for ((_, v), (_, colour)) in shares.iter().zip(coloured_shares(d)) {
                let len = v * (w - left);
                if len > 0.0 {
                    let _ = write!(
                        o,
                        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{len:.1}\" height=\"{bar}\" fill=\"{colour}\"/>"
                    );
                    if *v >= 0.06 {
                        let _ = write!(
                            o,
                            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#fff\">{}</text>",
                            x + 4.0,
                            y + bar * 0.68,
                            pct(*v)
                        );
                    }
                }
                x += len;
            }
        }
        o.push_str("</g>");
    }
    o.push_str("</svg><div class=\"legend\">");
    for (s, colour) in coloured_shares(d) {
        let _ = write!(o, "<span><i style=\"background:{colour}\"></i>{}</span>", esc(s.name));
    }
    o.push_str("</div></figure>");
}

/// Every section of one run's report.
fn sections(r: &Report, o: &mut String) -> Result<(), ChartError> {
    facts(r, o);
    verdict(r, o);
    ranks(r, o)?;
    let axis = Axis::new(r, LINE_COLUMNS);
    let bands = bands(r, &axis);
    throughput(r, &axis, &bands, o)?;
    heat_maps(r, &bands, o)?;
    calls(r, o)?;
    files(r, o);
    python_lines(r, o);
    processes(r, o);
    disks(r, &axis, &bands, o)?;
    utilisation(r, &axis, &bands, o)?;
    perfetto(r, o);
    Ok(())
}

fn facts(r: &Report, o: &mut String) {
    let (h, s) = (&r.survey.header, &r.stats);
    let _ = write!(o, "<section id=\"facts\"><h2>The run</h2><table class=\"facts\">");
    let mut row = |k: &str, v: String| {
        let _ = write!(o, "<tr><td>{k}</td><td>{v}</td></tr>");
    };
    let imported = h.source == "import";
    // An import's header lists the files it converted where a recording has its command.
    row(if imported { "imported from" } else { "command" }, format!("<code>{}</code>", esc(&h.command.join(" "))));
    if !h.cwd.is_empty() {
        row("directory", esc(&h.cwd));
    }
    let source = if imported { "imported from older traces (mltrace import)" } else { "mltrace record" };
    row("log", format!("{} ({source})", esc(&r.log.display().to_string())));
    if h.is_merged() {
        row("hosts", format!("{} (merged; processes are shown as host:pid)", esc(&h.host_names().join(", "))));
    } else if !h.host.is_empty() {
        row("host", format!("{} (kernel {}, {} CPUs)", esc(&h.host), esc(&h.kernel), h.cpu_count));
    }
    let (start, end) = (r.survey.start(), r.survey.end());
    row("started", esc(&window::describe(&r.survey, start)));
    row("span", format!("{} ({})", duration(end.saturating_sub(start)), esc(&window::span_text(&r.survey))));
    let status = match r.survey.trailer.as_ref().and_then(|t| t.exit_status) {
        Some(x) if x & 0x7f == 0 => format!("exited with {}", (x >> 8) & 0xff),
        Some(x) => format!("killed by signal {}", x & 0x7f),
        None if r.survey.trailer.is_none() => "unknown (the log was cut)".into(),
        None => "unknown (recording stopped first)".into(),
    };
    row("status", status);
    row(
        "events",
        format!(
            "{} records: {} syscalls, {} block requests, {} counter samples, {} processes",
            r.survey.records,
            r.survey.syscalls,
            r.survey.blocks,
            r.survey.counters,
            s.processes.len()
        ),
    );
    let lost = if s.lost.is_empty() {
        "none".to_string()
    } else {
        let kinds: Vec<String> = s.lost.iter().map(|(k, n)| format!("{n} {}", k.name())).collect();
        format!("<span class=\"warn\">{} ({})</span>", s.total_lost(), esc(&kinds.join(", ")))
    };
    row("lost events", lost);
    let mut probes: Vec<&str> = Vec::new();
    for p in &h.probes {
        // An import's probes are the formats it read (bpftrace's, mpstat...).
        let what = if imported { p.mechanism.as_str() } else { p.subsystem.as_str() };
        if !probes.contains(&what) {
            probes.push(what);
        }
    }
    if !probes.is_empty() {
        row("recorded", esc(&probes.join(", ")));
    }
    if let Some(line) = s.detail_line() {
        row("detail", esc(&line));
    }
    for d in s.diagnostics.iter().chain(s.kernel_warnings().iter()) {
        row("warning", format!("<span class=\"warn\">{}</span>", esc(d)));
    }
    o.push_str("</table></section>\n");
}

fn verdict(r: &Report, o: &mut String) {
    if !r.stats.header.has_probe(mltrace_log::subsystem::SCHEDULING) {
        return;
    }
    let v = r.stats.verdict();
    let _ = write!(o, "<section id=\"verdict\"><h2>Verdict</h2><p class=\"verdict\">{}</p>", esc(&v.text));
    // What to try next, each with the figures it rests on.
    if !v.suggestions.is_empty() {
        o.push_str("<div id=\"next\"><h3>What to try next</h3><ol>");
        for s in &v.suggestions {
            let _ = write!(o, "<li data-rule=\"{}\">{}</li>", s.rule, esc(&s.text));
        }
        o.push_str("</ol></div>");
    } else if let Some(n) = &v.suggestions_note {
        let _ = write!(o, "<p class=\"note\" id=\"next\">What to try next: {}.</p>", esc(n));
    }
    if let Some(b) = v.breakdown {
        // The split of the trainer's time, as one table row that adds up
        // (the GIL's column only where the log has a wait for it).
        let gil = b.gil_wait.map(|g| ("waiting for the GIL", g));
        let cols = [
            ("waiting for data", b.data_wait),
            ("waiting for other ranks", b.collective_wait),
            ("waiting for the GPU", b.gpu_wait),
            ("own file I/O", b.own_io),
            ("on CPU", b.on_cpu),
            ("waiting for a CPU", b.runnable),
        ];
        let cols: Vec<(&str, f64)> = cols.into_iter().chain(gil).chain([("other", b.other)]).collect();
        o.push_str("<table><tr>");
        for (name, _) in &cols {
            let _ = write!(o, "<th>{name}</th>");
        }
        o.push_str("</tr><tr>");
        for (_, f) in &cols {
            let _ = write!(o, "<td>{}</td>", pct(*f));
        }
        o.push_str("</tr></table>");
    }
    if !v.epochs.is_empty() {
        o.push_str(
            "<table><tr><th>epoch</th><th>verdict</th><th>waited for data</th><th>waited for the GPU</th>\
             <th>own file I/O</th><th>on CPU</th><th>GPU idle</th><th>GPU idle while waiting for data</th></tr>",
        );
        for e in &v.epochs {
            let gpu = e.gpu.as_ref();
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.name),
                e.kind,
                pct_or_dash(e.data_wait_fraction),
                pct_or_dash(e.breakdown.map(|b| b.gpu_wait)),
                pct_or_dash(e.breakdown.map(|b| b.own_io)),
                pct_or_dash(e.cpu_fraction),
                pct_or_dash(gpu.and_then(|g| g.idle_fraction)),
                pct_or_dash(gpu.and_then(|g| g.idle_during_data_wait_fraction)),
            );
        }
        o.push_str("</table>");
        // The first epoch explained: what the loaders read, from where.
        if let Some(line) = mltrace_stats::epoch_reads_line(&v.epochs) {
            let _ = write!(o, "<p class=\"verdict\">{}.</p>", esc(&line));
        }
    }
    // The tail of the trainer's waits for its batches, step by step.
    if let Some(s) = &v.step_waits {
        let _ = write!(o, "<p class=\"verdict\">{}.</p>", esc(&s.line()));
        let bars = charts::Bars {
            title: "the trainer's wait for each batch",
            x_desc: "wait for the batch",
            y_desc: "steps",
            y_fmt: charts::count,
            colour: 0,
            highlight: None,
        };
        let values: Vec<f64> = s.hist.iter().map(|&n| n as f64).collect();
        if let Ok(svg) = bars.draw(&mltrace_stats::step_waits::hist_labels(), &values) {
            o.push_str(&svg);
        }
    }
    o.push_str(
        "<p class=\"note\">From the trainer's main thread's scheduling and calls: its time asleep until a \
         data-loader worker woke it (waiting for data), inside CUDA calls that wait for the GPU, inside its own \
         calls on files, on CPU and waiting for one outside those; and the GPUs' idle time.</p></section>\n",
    );
}

/// Ranks shown in the table (the ones that waited most): `stats --json`
/// has them all.
const TOP_RANKS_TABLE: usize = 32;

/// A job's ranks side by side: data wait per rank as bars (the straggler
/// in another colour), and a table of the ones that waited most.
fn ranks(r: &Report, o: &mut String) -> Result<(), ChartError> {
    if !r.stats.header.has_probe(mltrace_log::subsystem::SCHEDULING) {
        return Ok(());
    }
    let ranks = r.stats.ranks();
    if ranks.len() < 2 {
        return Ok(());
    }
    let straggler = r.stats.straggler(&ranks);
    let _ = write!(o, "<section id=\"ranks\"><h2>Ranks</h2>");
    if let Some(s) = &straggler {
        let _ = write!(o, "<p class=\"verdict\">Straggler: {}.</p>", esc(&r.stats.straggler_text(s)));
    }
    let labels: Vec<String> = ranks.iter().map(|k| k.rank.to_string()).collect();
    let highlight = straggler.as_ref().and_then(|s| ranks.iter().position(|k| k.pid == s.rank.pid));
    // Time per step first: what the straggler is judged on.
    if ranks.iter().all(|k| k.step_ns.is_some()) {
        let values: Vec<f64> = ranks.iter().map(|k| k.step_ns.unwrap_or(0.0) / 1e6).collect();
        let bars = charts::Bars {
            title: "time per step, per rank",
            x_desc: "rank",
            y_desc: "ms per step",
            y_fmt: |v| format!("{v:.0} ms"),
            colour: 2,
            highlight,
        };
        let _ = write!(o, "<figure>{}</figure>", bars.draw(&labels, &values)?);
    }
    let values: Vec<f64> = ranks.iter().map(|k| k.data_wait_fraction.unwrap_or(0.0) * 100.0).collect();
    let bars = charts::Bars {
        title: "waiting for data, per rank",
        x_desc: "rank",
        y_desc: "% of the rank's time",
        y_fmt: |v| format!("{v:.0}%"),
        colour: 0,
        highlight,
    };
    let _ = write!(o, "<figure>{}</figure>", bars.draw(&labels, &values)?);
    let mut shown: Vec<&mltrace_stats::ranks::Rank> = ranks.iter().collect();
    shown.sort_by(|a, b| b.data_wait_fraction.unwrap_or(0.0).total_cmp(&a.data_wait_fraction.unwrap_or(0.0)));
    let more = shown.len().saturating_sub(TOP_RANKS_TABLE);
    shown.truncate(TOP_RANKS_TABLE);
    o.push_str(
        "<table><tr><th>rank</th><th>host</th><th>pid</th><th>step</th><th>arrived last</th><th>waiting for data</th>\
         <th>waiting for other ranks</th><th>waiting for the GPU</th><th>own file I/O</th><th>on CPU</th><th>loaders</th><th>read</th><th>read MB/s</th><th>read p50</th>\
         <th>read p99</th></tr>",
    );
    for k in shown {
        let b = k.breakdown;
        let host = r.stats.host_name(k.pid).unwrap_or(&r.stats.header.host);
        let ns = |n: Option<u64>| n.map(duration).unwrap_or_else(|| "-".into());
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td></tr>",
            k.rank,
            esc(host),
            mltrace_log::local_pid(k.pid),
            k.step_ns.map_or_else(|| "-".into(), |n| duration(n as u64)),
            if k.collectives > 0 { format!("{} of {}", k.last_at, k.collectives) } else { "-".into() },
            pct_or_dash(k.data_wait_fraction),
            pct_or_dash(k.collective_wait_fraction),
            pct_or_dash(b.map(|b| b.gpu_wait)),
            pct_or_dash(b.map(|b| b.own_io)),
            pct_or_dash(b.map(|b| b.on_cpu)),
            k.loaders,
            bytes_cell(k.read_bytes),
            k.read_mb_per_s.map_or_else(|| "-".into(), charts::number),
            ns(k.read_p50_ns),
            ns(k.read_p99_ns),
        );
    }
    o.push_str("</table>");
    if more > 0 {
        let _ = write!(o, "<p class=\"note\">{more} more ranks waited less (<code>mltrace stats --json</code> lists them all in <code>ranks[]</code>).</p>");
    }
    o.push_str(
        "<p class=\"note\">A rank is a trainer process with data loaders of its own; its number is the \
         <code>RANK</code> (or <code>OMPI_COMM_WORLD_RANK</code>, <code>SLURM_PROCID</code>, <code>PMI_RANK</code>) \
         it was started with, else its place by host and start. Read figures are its loaders'. Its step is \
         the median time between its step marks, its collectives or its batches (whichever every rank has); \
         \"arrived last\" counts the collectives it came to after all the others.</p></section>\n",
    );
    Ok(())
}

fn throughput(r: &Report, axis: &Axis, bands: &[Band], o: &mut String) -> Result<(), ChartError> {
    let _ = write!(
        o,
        "<section id=\"throughput\"><h2>I/O throughput over time</h2><p class=\"note\">Bytes per second \
         returned by each process's read calls and io_uring reads (and written), in steps of {}; \
         training phases shaded.</p>",
        mltrace_model::grid::describe_step(axis.k as u64 * axis.step)
    );
    type Get = fn(&Agg) -> f64;
    let charts: [(&str, Get); 2] =
        [("Read per process", |a| a.read_bytes as f64), ("Written per process", |a| a.write_bytes as f64)];
    let mut any = false;
    for (title, f) in charts {
        let top = top_groups(r, f, TOP_PROCS);
        if top.is_empty() {
            continue;
        }
        any = true;
        let mut lines: Vec<Line> = top
            .iter()
            .map(|g| Line { name: g.label.clone(), points: axis.rates(&axis.merge(g.values(r, f))) })
            .collect();
        let unit = scale_rates(&mut lines);
        let svg = charts::lines(title, axis.span, &lines, bands, &|v| in_unit(v, unit), None)?;
        line_figure(o, &svg, &lines);
    }
    if !any {
        o.push_str("<p>No bytes were read or written by traced calls.</p>");
    }
    o.push_str("</section>\n");
    Ok(())
}

fn heat_maps(r: &Report, bands: &[Band], o: &mut String) -> Result<(), ChartError> {
    let axis = Axis::new(r, HEAT_COLUMNS);
    let _ = write!(
        o,
        "<section id=\"heatmap\"><h2>Where the bytes were read</h2><p class=\"note\">Bytes read per {} \
         (darker: more; the darkest cell is the busiest), by process and by file; red lines: phase starts.</p>",
        mltrace_model::grid::describe_step(axis.k as u64 * axis.step)
    );
    let procs = top_groups(r, |a| a.read_bytes as f64, 12);
    if !procs.is_empty() {
        let mut rows: Vec<(String, Vec<f64>)> =
            procs.iter().map(|g| (g.label.clone(), axis.merge(g.values(r, |a| a.read_bytes as f64)))).collect();
        by_first_activity(&mut rows);
        let svg = charts::heat("Bytes read: time x process", axis.span, axis.col_secs(), &rows, bands)?;
        heat_figure(o, &svg, &rows, &axis);
    }
    let mut files: Vec<(String, Vec<f64>)> = r
        .heat
        .rows
        .iter()
        .filter(|f| !f.path.is_empty())
        .map(|f| {
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let name = if name.chars().count() > 34 {
                format!("…{}", name.chars().rev().take(33).collect::<Vec<_>>().into_iter().rev().collect::<String>())
            } else {
                name.to_string()
            };
            (name, axis.merge(f.bytes.iter().enumerate().map(|(i, &b)| (i, b as f64))))
        })
        .collect();
    by_first_activity(&mut files);
    if !files.is_empty() {
        let title = format!("Bytes read: time x file (top {})", files.len());
        let svg = charts::heat(&title, axis.span, axis.col_secs(), &files, bands)?;
        heat_figure(o, &svg, &files, &axis);
    }
    if procs.is_empty() && files.is_empty() {
        o.push_str("<p>Nothing was read by traced calls.</p>");
    }
    o.push_str("</section>\n");
    Ok(())
}

/// The bins from the first to the last non-empty one.
/// and an empty one on each side, for scale.
fn trimmed(bins: &[u64]) -> Option<(usize, usize)> {
    let a = bins.iter().position(|&c| c > 0)?;
    let b = bins.iter().rposition(|&c| c > 0)?;
    Some((a.saturating_sub(1), (b + 1).min(bins.len() - 1)))
}

fn calls(r: &Report, o: &mut String) -> Result<(), ChartError> {
    let mut ops: Vec<&mltrace_stats::CallDist> = r.stats.calls.ops.iter().collect();
    ops.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    o.push_str(
        "<section id=\"operations\"><h2>Operations</h2><table><tr><th>operation</th><th>calls</th>\
         <th>p50</th><th>p99</th><th>max</th></tr>",
    );
    for op in &ops {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&op.name),
            op.count,
            q(&op.latency, 0.5),
            q(&op.latency, 0.99),
            duration(op.latency.max())
        );
    }
    o.push_str("</table></section>\n");
    let top: Vec<_> = ops.iter().take(TOP_OPS).collect();
    let _ = write!(
        o,
        "<section id=\"sizes\"><h2>Access sizes</h2><p class=\"note\">Bytes each call asked for, per \
         operation; bins are powers of two (the bin <code>4 KiB</code> holds 4096 to 8191 bytes).</p><div class=\"grid\">"
    );
    let mut any = false;
    for (k, op) in top.iter().enumerate() {
        let Some((a, b)) = trimmed(&op.sizes) else { continue };
        any = true;
        let labels: Vec<String> = (a..=b).map(|i| bytes_pow2(pow2_low(i))).collect();
        let svg = charts::bars(&format!("{}: bytes asked for", op.name), "bytes", &labels, &op.sizes[a..=b], k)?;
        bins_figure(o, "sizes", &op.name, &op.sizes, &svg);
    }
    if !any {
        o.push_str("<p>No data transfers were recorded.</p>");
    }
    o.push_str("</div></section>\n");
    let _ = write!(
        o,
        "<section id=\"latency\"><h2>Latency distributions</h2><p class=\"note\">How long each call took, \
         per operation, on a log scale (power-of-two bins of time).</p><div class=\"grid\">"
    );
    for (k, op) in top.iter().enumerate() {
        let bins = op.latency.pow2();
        let Some((a, b)) = trimmed(&bins) else { continue };
        let labels: Vec<String> = (a..=b).map(|i| duration_rounded(pow2_low(i))).collect();
        let svg = charts::bars(&format!("{}: latency", op.name), "time in the call", &labels, &bins[a..=b], k)?;
        bins_figure(o, "latency", &op.name, &bins, &svg);
    }
    o.push_str("</div></section>\n");
    Ok(())
}

fn files(r: &Report, o: &mut String) {
    let s = &r.stats;
    let files = s.top_files(TOP_FILES);
    o.push_str("<section id=\"files\"><h2>Top files by bytes</h2>");
    if files.is_empty() {
        o.push_str("<p>No file was read or written.</p></section>\n");
        return;
    }
    let cache = s.has_page_cache();
    o.push_str(
        "<table><tr><th>file</th><th>read</th><th>reads</th><th>mean read</th><th>written</th><th>writes</th>\
         <th>mean write</th><th>opens</th>",
    );
    if cache {
        o.push_str("<th>from storage</th><th>page-cache hit</th>");
    }
    o.push_str("</tr>");
    let mean = |ns: u64, n: u64| ns.checked_div(n).map(duration).unwrap_or_else(|| "-".into());
    for (path, f) in files {
        let _ = write!(
            o,
            "<tr><td class=\"path\">{}</td>{}<td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td>",
            esc(path),
            bytes_cell(f.total_read_bytes()),
            f.reads + f.uring_reads,
            mean(f.read_ns, f.reads),
            bytes_cell(f.total_write_bytes()),
            f.writes + f.uring_writes,
            mean(f.write_ns, f.writes),
            f.opens
        );
        if cache {
            let hit = f.cache.hit_ratio(f.read_bytes);
            let _ = write!(o, "{}<td>{}</td>", bytes_cell(f.cache.storage_read_bytes()), pct_or_dash(hit));
        }
        o.push_str("</tr>");
    }
    let _ = writeln!(
        o,
        "</table><p class=\"note\">{} files in all; mean latencies are of read and write calls (io_uring \
         requests counted apart){}.</p></section>",
        s.files.len(),
        if cache { "; page-cache hit: the share of the bytes read by calls that the cache already held" } else { "" }
    );
}

/// The lines of the job's Python code the most read time came from (the
/// recording's Python stacks; nothing without them).
fn python_lines(r: &Report, o: &mut String) {
    let s = &r.stats;
    if !s.python.seen {
        return;
    }
    let lines = s.python_lines();
    o.push_str("<section id=\"python-lines\"><h2>Python lines</h2>");
    if lines.is_empty() {
        o.push_str("<p>No file read was made from a Python stack.</p></section>\n");
        return;
    }
    o.push_str("<table><tr><th>line</th><th>role</th><th>read time</th><th>read</th><th>reads</th><th>pid</th></tr>");
    for l in lines.iter().take(TOP_FILES) {
        let called = l.called.as_ref().map(|c| format!("<br><span class=\"note\">&rarr; {}</span>", esc(&c.label())));
        let _ = write!(
            o,
            "<tr><td class=\"path\">{}{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td></tr>",
            esc(&l.site.label()),
            called.unwrap_or_default(),
            l.role.name(),
            duration(l.reads.time_ns),
            bytes_cell(l.reads.bytes),
            l.reads.calls,
            l.pid
        );
    }
    let _ = writeln!(
        o,
        "</table><p class=\"note\">The line of the job's own code each read was made from (under it, the call \
         it made into a library or Python's own); {} lines in all; {} of {} calls of Python processes had no \
         stack.</p></section>",
        lines.len(),
        s.python.calls_without_stack,
        s.python.calls
    );
}

/// The model's name of a process (its role: `DataLoader worker 0 (epoch
/// 2)`), for the incarnation of `pid` that started nearest `started`.
fn role_name(r: &Report, pid: u32, started: Option<u64>) -> Option<String> {
    let at = started.unwrap_or(0);
    r.survey.procs.list.iter().filter(|p| p.pid == pid).min_by_key(|p| p.first_ts.abs_diff(at)).map(|p| p.name.clone())
}

fn processes(r: &Report, o: &mut String) {
    let mut procs: Vec<&mltrace_stats::ProcStats> = r.stats.processes.iter().collect();
    let moved = |p: &mltrace_stats::ProcStats| p.total_read_bytes() + p.total_write_bytes();
    procs.sort_by(|a, b| moved(b).cmp(&moved(a)).then(b.reads.count.cmp(&a.reads.count)).then(a.pid.cmp(&b.pid)));
    let more = procs.len().saturating_sub(TOP_PROCS_TABLE);
    procs.truncate(TOP_PROCS_TABLE);
    o.push_str(
        "<section id=\"processes\"><h2>Processes by bytes</h2><table><tr><th>process</th><th>pid</th><th>reads</th>\
         <th>read</th><th>read p50</th><th>read p99</th><th>writes</th><th>written</th><th>write p99</th>\
         <th>opens</th><th>failed opens</th><th>files</th><th>block requests</th></tr>",
    );
    for p in procs {
        let name = role_name(r, p.pid, p.started).unwrap_or_else(|| p.name.clone());
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name),
            p.pid,
            p.reads.count,
            bytes_cell(p.reads.bytes),
            q(&p.reads.latency, 0.5),
            q(&p.reads.latency, 0.99),
            p.writes.count,
            bytes_cell(p.writes.bytes),
            q(&p.writes.latency, 0.99),
            p.opens.count,
            p.opens.errors,
            p.files_touched(),
            p.block.requests
        );
    }
    o.push_str("</table>");
    if more > 0 {
        let _ = write!(o, "<p class=\"note\">{more} more processes moved fewer bytes (<code>mltrace stats</code> lists them all).</p>");
    }
    o.push_str("</section>\n");
}

/// A disk's name in the legends; in a merged log, with its host's.
fn disk_label(r: &Report, name: &str, host: usize) -> String {
    let name = name.trim_start_matches("Disk ");
    match r.survey.host_label(host) {
        Some(h) if r.survey.header.hosts.len() > 1 => format!("{h} {name}"),
        _ => name.to_string(),
    }
}

fn disks(r: &Report, axis: &Axis, bands: &[Band], o: &mut String) -> Result<(), ChartError> {
    let agg = &r.survey.overview;
    let util: Vec<Line> = agg
        .series
        .iter()
        .filter(|s| s.proc.is_none() && s.group.starts_with("Disk ") && s.name == "utilisation")
        .map(|s| Line { name: s.group.trim_start_matches("Disk ").to_string(), points: axis.mean(s.values()) })
        .collect();
    o.push_str("<section id=\"disks\"><h2>Disks</h2>");
    if util.is_empty() && agg.disks.is_empty() {
        o.push_str("<p>The log has no disk samples and no block requests.</p></section>\n");
        return Ok(());
    }
    o.push_str(
        "<p class=\"note\">Utilisation: the kernel's share of time the disk was busy (/proc/diskstats). \
         Queue depth: block requests in flight (queue and device), averaged over each step.</p>",
    );
    if !util.is_empty() {
        let svg = charts::lines("Disk utilisation", axis.span, &util, bands, &|v| format!("{v:.0}%"), Some(100.0))?;
        line_figure(o, &svg, &util);
    }
    if !agg.disks.is_empty() {
        let secs = axis.col_secs() * 1e9;
        let depth: Vec<Line> = agg
            .disks
            .iter()
            .map(|(name, host, d)| {
                let cols = axis.merge(d.iter().enumerate().map(|(i, x)| (i, x.in_flight_ns as f64)));
                let points = cols.iter().enumerate().map(|(c, v)| (axis.x(c), v / secs)).collect();
                Line { name: disk_label(r, name, *host), points }
            })
            .collect();
        let svg = charts::lines("Disk queue depth", axis.span, &depth, bands, &charts::number, None)?;
        line_figure(o, &svg, &depth);
        let mut tput = Vec::new();
        for (name, host, d) in &agg.disks {
            let name = disk_label(r, name, *host);
            let read = axis.merge(d.iter().enumerate().map(|(i, x)| (i, x.read_bytes as f64)));
            let write = axis.merge(d.iter().enumerate().map(|(i, x)| (i, x.write_bytes as f64)));
            tput.push(Line { name: format!("{name} read"), points: axis.rates(&read) });
            tput.push(Line { name: format!("{name} write"), points: axis.rates(&write) });
        }
        let unit = scale_rates(&mut tput);
        let svg =
            charts::lines("Disk throughput (block requests)", axis.span, &tput, bands, &|v| in_unit(v, unit), None)?;
        line_figure(o, &svg, &tput);
    }
    o.push_str("</section>\n");
    Ok(())
}

fn utilisation(r: &Report, axis: &Axis, bands: &[Band], o: &mut String) -> Result<(), ChartError> {
    let mut cpu = Vec::new();
    if let Some(idle) = machine_series(r, "CPU", "idle") {
        let iowait = machine_series(r, "CPU", "iowait");
        let wait = |i: usize| iowait.and_then(|w| w.value(i)).unwrap_or(0.0);
        let busy = idle.values().map(|(i, v)| (i, (100.0 - v - wait(i)).max(0.0)));
        cpu.push(Line { name: "busy".into(), points: axis.mean(busy) });
        if let Some(w) = iowait {
            cpu.push(Line { name: "iowait".into(), points: axis.mean(w.values()) });
        }
    }
    let gpu: Vec<Line> = r
        .survey
        .overview
        .series
        .iter()
        .filter(|s| {
            let util = s.name == mltrace_log::GPU_UTILISATION || s.name == mltrace_log::GPU_UTILISATION_OLD;
            s.core.is_none() && s.group.starts_with("GPU ") && (util || s.name == "SM active")
        })
        .map(|s| {
            // NVML's utilisation is "any kernel running"; GPM's SM active
            // (Hopper on) says how busy the SMs were.
            let what = if s.name == "SM active" { "SM active" } else { "busy" };
            // A process's share (nvidia-smi pmon, NVML per process) is named for it.
            let name = match s.proc {
                None => format!("{} {what}", s.group),
                Some(p) => format!("{} {what}, {}", s.group, proc_label(r, p)),
            };
            Line { name, points: axis.mean(s.values()) }
        })
        .collect();
    o.push_str("<section id=\"utilisation\"><h2>CPU and GPU utilisation</h2>");
    if cpu.is_empty() && gpu.is_empty() {
        o.push_str("<p>The log has no CPU or GPU samples.</p></section>\n");
        return Ok(());
    }
    let pc = |v: f64| format!("{v:.0}%");
    if !cpu.is_empty() {
        line_figure(o, &charts::lines("CPU (all cores)", axis.span, &cpu, bands, &pc, Some(100.0))?, &cpu);
    }
    if !gpu.is_empty() {
        let svg = charts::lines(
            "GPU: time any kernel ran (busy); SM active where GPM reports it",
            axis.span,
            &gpu,
            bands,
            &pc,
            Some(100.0),
        )?;
        line_figure(o, &svg, &gpu);
    }
    o.push_str("</section>\n");
    Ok(())
}

fn perfetto(r: &Report, o: &mut String) {
    let name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let log = esc(&r.log.display().to_string());
    let _ = write!(
        o,
        "<section id=\"perfetto\"><h2>Detail in Perfetto</h2><p><code>mltrace export {log}</code> writes \
         the trace; open it at <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> (<i>Open trace \
         file</i>; the file stays on your machine), or add <code>--open</code>.</p>"
    );
    let rel = |ts: u64| charts::seconds(ts.saturating_sub(r.survey.start()) as f64 / 1e9);
    match r.plan.files.as_slice() {
        [f] if f.role == FileRole::Whole => {
            let _ = write!(
                o,
                "<p>The run fits one file: <code>{}</code> holds all of it (about {} events).</p>",
                esc(&name(&f.path)),
                f.weight
            );
        }
        files => {
            let parts = files.iter().filter(|f| matches!(f.role, FileRole::Part { .. })).count();
            let _ = write!(
                o,
                "<p>The run is too big to open as one file, so export writes an overview and {parts} parts \
                 beside it. Open the overview first to find the interesting stretch, then the part that \
                 holds it:</p><table><tr><th>file</th><th>holds</th><th>from</th><th>to</th></tr>"
            );
            for f in files {
                let holds = match f.role {
                    FileRole::Overview => "the whole run, per interval".to_string(),
                    _ => f.label.clone(),
                };
                let _ = write!(
                    o,
                    "<tr><td class=\"path\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&name(&f.path)),
                    esc(&holds),
                    rel(f.from),
                    rel(f.to)
                );
            }
            o.push_str("</table>");
        }
    }
    let example = r
        .survey
        .phases
        .iter()
        .find(|p| p.kind == PhaseKind::Epoch)
        .map(|p| format!("--from \"{0}\" --to \"{0}\"", p.name))
        .unwrap_or_else(|| {
            // The middle fifth of the run, in seconds from its start.
            let span = r.survey.end().saturating_sub(r.survey.start()) as f64 / 1e9;
            let digits = if span >= 50.0 { 0 } else { 2 };
            format!("--from {:.digits$} --to {:.digits$}", span * 0.4, span * 0.6)
        });
    let _ = writeln!(
        o,
        "<p>Or export just a window in full detail: <code>mltrace export {} {log}</code> (also \
         <code>--pid PID</code>).</p></section>",
        esc(&example)
    );
}
