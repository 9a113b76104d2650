//! `mltrace export`: a log as a Perfetto trace (or Chrome JSON); a log too
//! big to open in the browser as one file becomes an overview plus parts.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use anyhow::Context;
use mltrace_model::plan::{self, FileRole, PlannedFile, Split};
use mltrace_model::window::{self, WindowRequest};
use mltrace_model::write_plan::{self, Output, Written};
use mltrace_model::Survey;

#[derive(clap::Args)]
pub struct Args {
    /// Write a Perfetto protobuf trace (the default; open it at https://ui.perfetto.dev)
    #[arg(long, conflicts_with_all = ["chrome", "parquet"])]
    perfetto: bool,
    /// Write Chrome trace-event JSON instead (chrome://tracing, Perfetto, other viewers)
    #[arg(long, conflicts_with = "parquet")]
    chrome: bool,
    /// Write Parquet tables instead, one per kind of record, into the
    /// directory given by -o (default: the log's name with .parquet); for
    /// pandas, polars, DuckDB (docs/parquet.md lists the tables and columns).
    /// Several hosts' logs: one dataset in Hive layout, see --hive
    #[arg(long, conflicts_with_all = ["from", "to", "pids", "no_split", "overview", "open", "uncompressed", "budget"])]
    parquet: bool,
    /// With --parquet: write a dataset partitioned by host,
    /// DIR/<table>/host=<name>/part-0.parquet, the name from each log's
    /// header (one log per host; partitions of other hosts already in DIR
    /// are kept). The layout whenever several logs are given; with one
    /// log, adds or replaces that host's partition
    #[arg(long, requires = "parquet")]
    hive: bool,
    /// The log written by `mltrace record` or `mltrace import`; several
    /// (one per host) only with --parquet
    #[arg(required = true, num_args = 1.., value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// Output file (default: the log's name with .perfetto-trace or .json); a
    /// big run's overview goes here and its parts beside it. With --parquet,
    /// the directory (needed for several logs)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write plain Perfetto packets instead of deflate-compressed batches
    /// (for tools that read the protobuf themselves; Perfetto reads both)
    #[arg(long, conflicts_with = "chrome")]
    uncompressed: bool,
    /// Start of a window to export in full detail: seconds from the start
    /// (90, 1h30m), a UTC time (21:04:10, 2026-11-22 21:04:10) or a phase ("EPOCH 12")
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// End of the window (the end of a phase given by name)
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Only this process and its threads (repeatable)
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// One file, whatever its size (with a warning when it is too big to open quickly)
    #[arg(long, conflicts_with = "overview")]
    no_split: bool,
    /// Only the overview of the whole run
    #[arg(long)]
    overview: bool,
    /// Then serve the trace (a big run's overview) once to ui.perfetto.dev
    /// on 127.0.0.1:9001 and open it there (or print the ssh tunnel to use)
    #[arg(long)]
    open: bool,
    /// Events per file before a run is split (default: what opens quickly
    /// in the Perfetto UI; see docs/big-runs.md)
    #[arg(long, value_name = "EVENTS", hide = true)]
    budget: Option<u64>,
}

fn default_output(log: &Path, ext: &str) -> PathBuf {
    let stem = log.file_stem().map(|s| s.to_os_string()).unwrap_or_else(|| "trace".into());
    let mut name = stem;
    name.push(ext);
    log.with_file_name(name)
}

/// `4.1M`, `312k`, `950`.
fn count(n: u64) -> String {
    match n {
        n if n >= 10_000_000 => format!("{}M", n / 1_000_000),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{}k", n / 1000),
        n => n.to_string(),
    }
}

/// `21:04:10-21:09:55` (UTC), or `+12.3 s-+40.0 s` without a clock anchor.
fn times(run: &Survey, from: u64, to: u64) -> String {
    match (window::wall(run, from), window::wall(run, to)) {
        (Some(a), Some(b)) if a.date_naive() == b.date_naive() => {
            format!("{}-{} UTC", a.format("%H:%M:%S"), b.format("%H:%M:%S"))
        }
        (Some(a), Some(b)) => format!("{} to {} UTC", a.format("%Y-%m-%d %H:%M:%S"), b.format("%Y-%m-%d %H:%M:%S")),
        _ => {
            let rel = |t: u64| (t.saturating_sub(run.start())) as f64 / 1e9;
            format!("+{:.1} s-+{:.1} s", rel(from), rel(to))
        }
    }
}

/// What a written file holds, for the list export prints.
fn describe(run: &Survey, w: &Written) -> String {
    let st = &w.stats;
    let what = match w.file.role {
        FileRole::Overview => format!(
            "the whole run, {}, in intervals of {}: {} counter values, {} slowest and failed calls",
            times(run, run.start(), run.end()),
            mltrace_model::grid::describe_step(run.overview.grid.step),
            count(st.counters),
            count(st.slices.saturating_sub(run.phases.len() as u64)),
        ),
        _ => {
            let (from, to) = match (st.first_ts, st.last_ts) {
                (Some(a), Some(b)) => (a.max(w.file.from), b.min(w.file.to)),
                _ => (w.file.from, w.file.to),
            };
            let label = if w.file.role == FileRole::Whole { String::new() } else { format!("{}, ", w.file.label) };
            format!(
                "{label}{}, {} slices, {} counter values",
                times(run, from, to),
                count(st.slices),
                count(st.counters)
            )
        }
    };
    let role = match w.file.role {
        FileRole::Whole => "trace".to_string(),
        FileRole::Overview => "overview".to_string(),
        FileRole::Part { index, count } => {
            let width = count.to_string().len();
            format!("part {index:>width$} of {count}")
        }
    };
    format!("{role}: {} ({}; {})", w.file.path.display(), what, mltrace_log::show::size(w.bytes))
}

/// Says so when a log is of an older format than this mltrace writes
/// (read as it is: nothing to convert).
fn old_format(log_name: &str, (major, minor): (u16, u16)) {
    if major < mltrace_log::frame::FORMAT_MAJOR {
        eprintln!("mltrace: {log_name}: log format {major}.{minor} (written by an older mltrace; read as it is)");
    }
}

/// Opens each planned file for the chosen format.
struct Files {
    chrome: bool,
    compress: Option<u32>,
}

enum Enc {
    Perfetto(Box<mltrace_perfetto::PerfettoEncoder<BufWriter<File>>>),
    Chrome(mltrace_chrome::ChromeEncoder<BufWriter<File>>),
}

impl mltrace_model::Encoder for Enc {
    fn begin(&mut self, m: &mltrace_model::FileMeta<'_>) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.begin(m),
            Enc::Chrome(e) => e.begin(m),
        }
    }
    fn machine(&mut self, host: u32) {
        match self {
            Enc::Perfetto(e) => e.machine(host),
            Enc::Chrome(e) => e.machine(host),
        }
    }
    fn track(&mut self, t: &mltrace_model::Track<'_>) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.track(t),
            Enc::Chrome(e) => e.track(t),
        }
    }
    #[inline]
    fn slice<A: mltrace_model::Args>(&mut self, s: &mltrace_model::Slice<'_>, a: &A) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.slice(s, a),
            Enc::Chrome(e) => e.slice(s, a),
        }
    }
    fn instant<A: mltrace_model::Args>(
        &mut self,
        t: mltrace_model::TrackId,
        ts: u64,
        n: mltrace_model::Name<'_>,
        a: &A,
    ) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.instant(t, ts, n, a),
            Enc::Chrome(e) => e.instant(t, ts, n, a),
        }
    }
    #[inline]
    fn counter(&mut self, t: mltrace_model::TrackId, ts: u64, v: f64) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.counter(t, ts, v),
            Enc::Chrome(e) => e.counter(t, ts, v),
        }
    }
    fn sched_switch(&mut self, s: &mltrace_model::SwitchEvent<'_>) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.sched_switch(s),
            Enc::Chrome(e) => e.sched_switch(s),
        }
    }
    fn sched_waking(&mut self, w: &mltrace_model::WakingEvent<'_>) -> io::Result<()> {
        match self {
            Enc::Perfetto(e) => e.sched_waking(w),
            Enc::Chrome(e) => e.sched_waking(w),
        }
    }
    fn end(&mut self, a: Option<mltrace_log::ClockAnchor>, t: Option<&mltrace_log::Trailer>) -> io::Result<u64> {
        match self {
            Enc::Perfetto(e) => e.end(a, t),
            Enc::Chrome(e) => e.end(a, t),
        }
    }
}

impl Output for Files {
    type E = Enc;
    fn create(&mut self, f: &PlannedFile) -> io::Result<Enc> {
        let file = File::create(&f.path)?;
        let out = BufWriter::with_capacity(1 << 20, file);
        Ok(if self.chrome {
            Enc::Chrome(mltrace_chrome::ChromeEncoder::new(out))
        } else {
            Enc::Perfetto(Box::new(mltrace_perfetto::PerfettoEncoder::new(
                out,
                mltrace_perfetto::ExportOptions { compress: self.compress },
            )))
        })
    }
}

/// Parts of an earlier export of the same name, which a new one would
/// leave beside its own, mixed up.
fn stale_parts(out: &Path, ext: &str) -> Vec<PathBuf> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(ext).unwrap_or(&name).to_string();
    let prefix = format!("{stem}.part");
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let rest = n.strip_prefix(&prefix)?.strip_suffix(ext)?;
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            (digits >= 2 && rest[digits..].starts_with('.')).then(|| dir.join(&n))
        })
        .collect()
}

/// Every syscall record is a row: of the table its kind's declaration
/// names (`syscalls`, `net_calls`, `gpu_calls`...).
fn check_calls(log_name: &str, records: u64, tables: &[mltrace_parquet::TableStats]) -> anyhow::Result<()> {
    let calls_in = |n: &str| {
        mltrace_log::Record::TABLES.iter().any(|&(code, name)| {
            name == n && mltrace_log::Record::build(code, |_| 0).is_some_and(|r| mltrace_model::event::is_call(&r))
        })
    };
    let rows: u64 = tables.iter().filter(|t| calls_in(t.name)).map(|t| t.rows).sum();
    if rows != records {
        anyhow::bail!(
            "internal error: {log_name}: {records} syscall records in the log but {rows} rows written; please report this"
        );
    }
    Ok(())
}

/// `syscalls 5002, block 12, ...`: the tables with rows.
fn rows(tables: &[mltrace_parquet::TableStats]) -> String {
    let rows: Vec<String> = tables.iter().filter(|t| t.rows > 0).map(|t| format!("{} {}", t.name, t.rows)).collect();
    rows.join(", ")
}

/// `--parquet`: every table of the whole log into one directory.
fn parquet(a: &Args, log: &Path) -> anyhow::Result<i32> {
    let dir = a.output.clone().unwrap_or_else(|| default_output(log, ".parquet"));
    let mut reader = crate::open_log(log)?;
    let log_name = log.display().to_string();
    let (survey, tables) = mltrace_parquet::export_log(&mut reader, &dir, &mltrace_parquet::Options::default())
        .with_context(|| format!("exporting {log_name} to {}", dir.display()))?;
    for d in &survey.diagnostics {
        eprintln!("mltrace: {log_name}: {d}");
    }
    check_calls(&log_name, survey.syscalls, &tables)?;
    eprintln!("mltrace: wrote {} tables to {}: {}", tables.len(), dir.display(), rows(&tables));
    Ok(0)
}

/// `--parquet` of several hosts' logs (or `--hive`): one dataset, each
/// log its host's partition.
fn dataset(a: &Args) -> anyhow::Result<i32> {
    let dir = match (&a.output, a.logs.as_slice()) {
        (Some(d), _) => d.clone(),
        (None, [log]) => default_output(log, ".parquet"),
        (None, logs) => anyhow::bail!("{} logs: name the dataset's directory with -o", logs.len()),
    };
    for log in &a.logs {
        if !log.exists() {
            anyhow::bail!("{}: no such file", log.display());
        }
    }
    let shown = dir.display();
    let done = |h: &mltrace_parquet::dataset::HostTables| {
        let log_name = h.log.display();
        for d in &h.diagnostics {
            eprintln!("mltrace: {log_name}: {d}");
        }
        let part = dir.join("<table>").join(format!("{}={}", mltrace_parquet::PARTITION, h.host));
        eprintln!("mltrace: {log_name}: wrote {} tables to {}: {}", h.tables.len(), part.display(), rows(&h.tables));
    };
    let hosts = mltrace_parquet::dataset::export(&a.logs, &dir, &mltrace_parquet::Options::default(), &done)
        .with_context(|| format!("exporting to {shown}"))?;
    for h in &hosts {
        check_calls(&h.log.display().to_string(), h.syscalls, &h.tables)?;
    }
    let names: Vec<&str> = hosts.iter().map(|h| h.host.as_str()).collect();
    eprintln!(
        "mltrace: wrote {} host{} ({}) to {shown}, partitioned by {} (docs/parquet.md: read it with hive partitioning)",
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        mltrace_parquet::PARTITION
    );
    let others = other_hosts(&dir, &names);
    if !others.is_empty() {
        eprintln!(
            "mltrace: {shown} also holds host{} {} from earlier exports (kept)",
            if others.len() == 1 { "" } else { "s" },
            others.join(", ")
        );
    }
    Ok(0)
}

/// Hosts with a partition in the dataset at `dir` other than `written`.
fn other_hosts(dir: &Path, written: &[&str]) -> Vec<String> {
    let prefix = format!("{}=", mltrace_parquet::PARTITION);
    let mut others: Vec<String> = std::fs::read_dir(dir.join("syscalls"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix).map(str::to_string))
        .filter(|h| !written.contains(&h.as_str()))
        .collect();
    others.sort();
    others
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    match (a.parquet, a.logs.as_slice()) {
        (true, [log]) if !a.hive => return parquet(&a, log),
        (true, _) => return dataset(&a),
        (false, [_]) => {}
        (false, logs) => anyhow::bail!(
            "{} logs: only --parquet exports several hosts' logs together (as one dataset); \
             for one trace of them, `mltrace merge` them first",
            logs.len()
        ),
    }
    let log = &a.logs[0];
    let ext = if a.chrome { ".json" } else { ".perfetto-trace" };
    let out_path = a.output.clone().unwrap_or_else(|| default_output(log, ext));
    let mut reader = crate::open_log(log)?;
    let log_name = log.display().to_string();
    old_format(&log_name, reader.version());
    let survey = mltrace_run::survey(&mut reader).with_context(|| format!("reading {log_name}"))?;
    for d in &survey.diagnostics {
        eprintln!("mltrace: {log_name}: {d}");
    }
    let req = WindowRequest { from: a.from.clone(), to: a.to.clone(), pids: a.pids.clone() };
    let win = window::resolve(&survey, &req).with_context(|| log_name.clone())?;
    let split = match (a.no_split, a.overview) {
        (true, _) => Split::Never,
        (_, true) => Split::OverviewOnly,
        _ => Split::Auto,
    };
    let budget = a.budget.unwrap_or(if a.chrome { plan::CHROME_BUDGET } else { plan::PERFETTO_BUDGET });
    let plan = plan::plan(&survey, &win, &out_path, ext, split, budget);
    for w in &plan.warnings {
        eprintln!("mltrace: warning: {w}");
    }
    let split_up = plan.files.len() > 1 || plan.files.iter().any(|f| f.role != FileRole::Whole);
    if split_up {
        let stale = stale_parts(&out_path, ext);
        for p in &stale {
            std::fs::remove_file(p)
                .with_context(|| format!("removing {} (a part of an earlier export)", p.display()))?;
        }
        if !stale.is_empty() {
            eprintln!("mltrace: removed {} parts of an earlier export of {}", stale.len(), out_path.display());
        }
        let total: u64 = plan.files.iter().map(|f| f.weight).sum();
        let parts = plan.files.iter().filter(|f| matches!(f.role, FileRole::Part { .. })).count();
        if split == Split::OverviewOnly {
            // Asked for: the overview weighs nothing, so no count to give.
            eprintln!("mltrace: {log_name}: {} records, the overview only (--overview)", count(survey.records));
        } else {
            eprintln!(
                "mltrace: {log_name}: {} records, about {} events: more than the {} per file that open quickly in the \
             browser, so {}",
                count(survey.records),
                count(total),
                count(budget),
                if parts == 0 {
                    "the overview only".to_string()
                } else {
                    format!("an overview and {parts} parts, each of which opens on its own")
                }
            );
        }
    }
    let mut files = Files {
        chrome: a.chrome,
        compress: if a.uncompressed { None } else { mltrace_perfetto::ExportOptions::default().compress },
    };
    let mut lost = 0;
    let written = write_plan::run(&mut reader, &survey, &win, &plan, &mut files, &mut |w| {
        lost = lost.max(w.stats.lost_events);
        eprintln!("mltrace: {}", describe(&survey, w));
    })?;
    let syscalls: u64 = written.iter().filter(|w| w.file.role != FileRole::Overview).map(|w| w.stats.syscalls).sum();
    if win.filter.from.is_none() && win.filter.to.is_none() && win.filter.pids.is_none() && split != Split::OverviewOnly
    {
        // Every syscall record is in exactly one file.
        if syscalls != survey.syscalls {
            anyhow::bail!(
                "internal error: {} syscall records in the log but {syscalls} written; please report this",
                survey.syscalls
            );
        }
    }
    if lost > 0 {
        eprintln!("mltrace: the recording lost {lost} events; see the \"mltrace: lost events\" track");
    }
    let first = written.first().map(|w| w.file.path.clone()).unwrap_or_default();
    if a.open {
        if split_up {
            eprintln!(
                "mltrace: serving the overview; for a part, `mltrace export --open --from/--to` \
                 or open its file at https://ui.perfetto.dev"
            );
        }
        crate::open::serve(&first, crate::open::PORT, &mut io::stderr())?;
    } else if split_up {
        eprintln!(
            "mltrace: open {} first at https://ui.perfetto.dev (Open trace file), then the part you need \
             (or use --open)",
            first.display()
        );
    } else {
        eprintln!("mltrace: open it at https://ui.perfetto.dev (Open trace file), or use --open");
    }
    Ok(0)
}
