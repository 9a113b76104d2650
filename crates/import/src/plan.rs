//! An import: what each file is, how its clock maps to wall-clock time,
//! then the conversion itself.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use chrono::{NaiveDate, NaiveTime};
use chrono_tz::Tz;
use mltrace_log::{ClockAnchor, Header, LostKind, LostTotal, Probe, RecordWriter, Trailer};

use crate::bpftrace::layout::Variant;
use crate::bpftrace::{self, is_data, BpftraceSource};
use crate::clock::{self, date_near, describe, Alignment, LocalClock};
use crate::dcgmi::{DcgmiSource, Schedule};
use crate::detect::detect;
use crate::dmon::DmonSource;
use crate::error::ImportError;
use crate::lines::{head, FileReport, Lines};
use crate::merge::{Merge, Reorder};
use crate::mllog::{self, MllogSource};
use crate::mpstat::{self, MpstatSource, SystemLine};
use crate::nvsmi::{self, Columns};
use crate::pmon::{self, PmonSource};
use crate::visuals::{self, dir, VisSource};
use crate::{Format, Item, Options, Source};

const HEAD_LINES: usize = 400;
const HEAD_BYTES: u64 = 1 << 20;
/// Lines of a trace read for its time column when there is no
/// trace_time_align output: plenty to pin the offset well under a second.
const TIME_COLUMN_LINES: u64 = 1_000_000;

/// One input, recognised.
#[derive(Debug)]
pub struct PlannedFile {
    pub path: PathBuf,
    pub format: Format,
    pub description: String,
    variant: Option<&'static Variant>,
    head: Vec<String>,
    /// The day of the first line, for formats whose lines hold only a time.
    date: Option<NaiveDate>,
    /// Clock alignment samples this file gave.
    /// (readings, unreadable lines, lines) of a trace used to align clocks.
    aligned: Option<(u64, u64, u64)>,
    /// Why it is not imported (a processed copy of data another file holds).
    pub skip: Option<String>,
}

/// What [`Plan::run`] did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub files: Vec<FileReport>,
    pub records: u64,
    /// Unix ns of the first record's start and the last one's end.
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub lost: u64,
    /// `realtime` (wall clock) or `boottime` (bpftrace only, no reference).
    pub clock: String,
}

/// Files recognised and clocks settled, ready to convert.
pub struct Plan {
    files: Vec<PlannedFile>,
    notes: Vec<String>,
    tz: Option<Tz>,
    /// Added to bpftrace `nsecs` to get Unix ns.
    offset: i64,
    boot_relative: bool,
    system: Option<SystemLine>,
    opts: Options,
    /// What was given on the command line.
    inputs: Vec<PathBuf>,
    /// Files in the directories given that are of no known format.
    unrecognised: Vec<(PathBuf, String)>,
    /// Added to the processed files' ISO times (read as UTC).
    shift: i64,
    /// Process names from pids.json.
    names: HashMap<u32, Rc<str>>,
}

fn first_data(f: &PlannedFile) -> impl Iterator<Item = &String> {
    f.head.iter().filter(|l| is_data(l))
}

/// The time of day on the first line of a bpftrace output with a time column.
fn bpftrace_first_tod(f: &PlannedFile) -> Option<NaiveTime> {
    let v = f.variant?;
    first_data(f)
        .find_map(|l| v.layouts.iter().find_map(|lay| bpftrace::layout::match_line(l, &lay.cols, false).ok()))?
        .tod
}

fn nvsmi_first(f: &PlannedFile) -> (Columns, Option<Vec<String>>) {
    let mut cols = Columns::default();
    for l in &f.head {
        if cols.header(l) {
            continue;
        }
        if !l.trim().is_empty() {
            if cols.names.is_empty() && f.format == Format::Pmon && pmon::looks_like_row(l) {
                cols.names = ["Date", "Time"].iter().map(|s| s.to_string()).collect();
            }
            return (cols, Some(l.split_whitespace().map(str::to_string).collect()));
        }
    }
    (cols, None)
}

/// The zone local times are read in, and how it was chosen.
struct Zone {
    tz: Option<Tz>,
    note: String,
}

impl Zone {
    fn new(opts: &Options) -> Result<Zone, ImportError> {
        Ok(match &opts.tz {
            Some(z) => {
                let tz = clock::parse_tz(z)?;
                Zone { tz: Some(tz), note: format!("time zone {}", tz.name()) }
            }
            None => match clock::local_tz() {
                Some((tz, from)) => Zone {
                    tz: Some(tz),
                    note: format!("time zone {} (this machine's, from {from}; --tz to change)", tz.name()),
                },
                None => Zone { tz: None, note: String::new() },
            },
        })
    }

    /// The zone, for a file that prints local times.
    fn of(&self, f: &PlannedFile) -> Result<Tz, ImportError> {
        self.tz.ok_or_else(|| {
            ImportError::file(
                &f.path,
                "it prints local times and this machine's time zone is unknown (no TZ, /etc/timezone or \
                 /etc/localtime): give --tz ZONE, e.g. --tz America/Toronto",
            )
        })
    }
}

/// When a dated input begins (Unix ns), and which file it is.
type Anchor = (i64, PathBuf);

/// Instants the dated inputs begin at, to date the files that print only
/// times; and the first `mpstat` system line (host, kernel, CPUs).
fn anchors(
    files: &[PlannedFile],
    zone: &Zone,
    notes: &mut Vec<String>,
) -> Result<(Vec<Anchor>, Option<SystemLine>), ImportError> {
    let mut anchors = Vec::new();
    let mut system = None;
    for f in files {
        match f.format {
            Format::Mllog => {
                if let Some(e) = f.head.iter().find_map(|l| mllog::parse_line(l)) {
                    anchors.push((e.time_ns(), f.path.clone()));
                }
            }
            Format::Pmon | Format::Dmon => {
                let (cols, row) = nvsmi_first(f);
                if let (true, Some(row)) = (cols.has_date(), row) {
                    let row: Vec<&str> = row.iter().map(String::as_str).collect();
                    let mut c = LocalClock::new(zone.of(f)?, NaiveDate::default());
                    if let Ok(t) = nvsmi::when(&cols, &row).and_then(|w| nvsmi::instant(&mut c, w)) {
                        anchors.push((t as i64, f.path.clone()));
                    }
                }
            }
            Format::Mpstat => {
                let Some(s) = f.head.iter().find_map(|l| mpstat::system_line(l)) else { continue };
                if let Some(n) = &s.date_note {
                    notes.push(format!("{}: {n}", f.path.display()));
                }
                if let (Some(d), Some(t)) = (s.date, mpstat::first_tod(&f.head)) {
                    if let Ok(i) = clock::resolve(zone.of(f)?, d.and_time(t), None) {
                        anchors.push((i, f.path.clone()));
                    }
                }
                system.get_or_insert(s);
            }
            // Hours off at worst (see processed_shift): enough to date a file.
            f2 if f2.is_processed() => {
                if let Some(t) = first_iso(f) {
                    anchors.push((t, f.path.clone()));
                }
            }
            _ => {}
        }
    }
    anchors.sort();
    if let (Some(a), Some(b)) = (anchors.first(), anchors.last()) {
        let days = (b.0 - a.0) / (86_400 * clock::NS);
        if days >= 2 {
            notes.push(format!(
                "{} and {} are {days} days apart: are they from one run?",
                a.1.display(),
                b.1.display()
            ));
        }
    }
    Ok((anchors, system))
}

/// The time of day on the first line of a file whose lines carry no date
/// (so it needs one from elsewhere); `None` for the others.
fn undated_first_tod(f: &PlannedFile, time_columns: bool) -> Result<Option<NaiveTime>, ImportError> {
    Ok(match f.format {
        Format::Mpstat if !f.head.iter().any(|l| mpstat::system_line(l).is_some_and(|s| s.date.is_some())) => {
            mpstat::first_tod(&f.head)
        }
        Format::Pmon | Format::Dmon => {
            let (cols, row) = nvsmi_first(f);
            if cols.has_date() || row.is_none() {
                None
            } else if !cols.has_time() {
                return Err(ImportError::file(
                    &f.path,
                    "nvidia-smi output without time columns: nothing says when a row was taken (it needs -o T or -o DT)",
                ));
            } else {
                let i = cols.index("Time").unwrap_or(0);
                row.and_then(|r| r.get(i).and_then(|w| clock::parse_tod(w, None)))
            }
        }
        Format::TimeAlign => bpftrace_first_tod(f),
        f2 if f2.is_bpftrace() && time_columns => bpftrace_first_tod(f),
        _ => None,
    })
}

/// bpftrace's `nsecs` to Unix ns: the offset, or `None` for an import of
/// bpftrace outputs alone with nothing to align them (kept since boot).
fn bpftrace_offset(
    files: &mut [PlannedFile],
    opts: &Options,
    zone: &Zone,
    notes: &mut Vec<String>,
) -> Result<Option<i64>, ImportError> {
    if let Some(spec) = &opts.clock {
        let o = spec.offset(zone.tz)?;
        notes.push(format!("bpftrace clock: nsecs + {o} ns (given)"));
        return Ok(Some(o));
    }
    let align_files = files.iter().any(|f| f.format == Format::TimeAlign);
    let aligners: Vec<usize> = (0..files.len())
        .filter(|&i| match align_files {
            true => files[i].format == Format::TimeAlign,
            false => files[i].format.is_bpftrace() && files[i].date.is_some(),
        })
        .collect();
    let mut a = Alignment::default();
    for &i in &aligners {
        let f = &files[i];
        let (Some(v), Some(date)) = (f.variant, f.date) else { continue };
        let max = if f.format == Format::TimeAlign { u64::MAX } else { TIME_COLUMN_LINES };
        let (fa, bad, lines) = bpftrace::scan_alignment(&f.path, v, zone.of(f)?, date, max)?;
        files[i].aligned = Some((fa.samples, bad, lines));
        a.merge(&fa);
    }
    match a.estimate() {
        Some((o, err)) => {
            let from: Vec<String> = aligners.iter().map(|&i| files[i].path.display().to_string()).collect();
            notes.push(format!(
                "bpftrace clock: nsecs + {o} ns = Unix time, ±{:.0} ms, from {} local-time readings in {}",
                err as f64 / 1e6,
                a.samples,
                from.join(", ")
            ));
            Ok(Some(o))
        }
        None if files.iter().all(|f| f.format.is_bpftrace()) => {
            notes.push(
                "bpftrace clock: no trace_time_align output, time column, --clock-offset or --clock-ref: \
                 times are since boot, not wall-clock"
                    .into(),
            );
            Ok(None)
        }
        None => {
            let bpf: Vec<String> = files
                .iter()
                .filter(|f| f.format.is_bpftrace())
                .map(|f| f.path.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect();
            Err(ImportError::Clock(format!(
                "{}: bpftrace timestamps are nanoseconds since boot; to line them up with the other files, add \
                 the run's trace_time_align output, or give --clock-ref NSECS=DATETIME or --clock-offset NS",
                bpf.join(", ")
            )))
        }
    }
}

impl Plan {
    /// Recognises every file and settles the clocks.
    pub fn new(paths: &[PathBuf], opts: &Options) -> Result<Plan, ImportError> {
        let mut files = Vec::new();
        let mut unrecognised = Vec::new();
        for (p, in_dir) in dir::expand(paths)? {
            let h = head(&p, HEAD_LINES, HEAD_BYTES)?;
            let d = match detect(&p, &h, opts.format) {
                Ok(d) => d,
                // One odd file in an experiment directory must not stop the rest.
                Err(ImportError::Unrecognised { reason, .. }) if in_dir => {
                    unrecognised.push((p, format!("format not recognised ({reason})")));
                    continue;
                }
                Err(e) => return Err(e),
            };
            files.push(PlannedFile {
                path: p,
                format: d.format,
                description: d.description,
                variant: d.variant,
                head: h,
                date: None,
                aligned: None,
                skip: None,
            });
        }
        let kinds: Vec<(&Path, Format)> = files.iter().map(|f| (f.path.as_path(), f.format)).collect();
        let dups = dir::duplicates(&kinds);
        for (f, why) in files.iter_mut().zip(dups) {
            f.skip = why;
        }
        if files.is_empty() {
            return Err(ImportError::Empty);
        }
        if opts.dcgmi_start.is_none() {
            if let Some(f) = files.iter().find(|f| f.format == Format::Dcgmi && crate::dcgmi::bare(&f.head)) {
                return Err(ImportError::file(
                    &f.path,
                    "dcgmi dmon prints no time on its rows: give --dcgmi-start 'YYYY-MM-DD HH:MM:SS' (when the \
                     first sample was, local in --tz) and --dcgmi-interval MS (dcgmi's -d, default 1000), or \
                     record with `dcgmi dmon ... | ts '%F %.T'`",
                ));
            }
        }
        let mut notes = Vec::new();
        let zone = Zone::new(opts)?;
        let (anchors, system) = anchors(&files, &zone, &mut notes)?;

        // bpftrace's own time column is only read when nothing better says
        // how its clock relates to wall-clock time.
        let time_columns = opts.clock.is_none() && !files.iter().any(|f| f.format == Format::TimeAlign);
        for f in files.iter_mut() {
            let Some(tod) = undated_first_tod(f, time_columns)? else { continue };
            let tz = zone.of(f)?;
            // The nearest dated file: one beside it, else the earliest.
            let near =
                anchors.iter().filter(|(_, p)| *p != f.path).min_by_key(|(t, p)| (p.parent() != f.path.parent(), *t));
            f.date = Some(match (opts.date, near) {
                (Some(d), _) => d,
                (None, Some((t, from))) => {
                    let d = date_near(tz, tod, *t).ok_or_else(|| ImportError::Clock("date out of range".into()))?;
                    notes.push(format!(
                        "{}: its lines carry only a time of day; first line ({tod}) dated {d}, nearest to {} in {}",
                        f.path.display(),
                        describe(*t, Some(tz)),
                        from.display()
                    ));
                    d
                }
                (None, None) => {
                    return Err(ImportError::file(
                        &f.path,
                        format!(
                            "its lines carry only a time of day (first: {tod}) and no other input has a date: \
                             give --date YYYY-MM-DD (the day of its first line)"
                        ),
                    ))
                }
            });
        }
        let local = |f: &PlannedFile| {
            f.date.is_some()
                || matches!(f.format, Format::Mpstat | Format::Pmon | Format::Dmon | Format::Dcgmi | Format::TimeAlign)
        };
        if zone.tz.is_some() && files.iter().any(local) {
            notes.insert(0, zone.note.clone());
        }

        let bpf_data = files.iter().any(|f| f.format.is_bpftrace() && f.format != Format::TimeAlign);
        let offset = if bpf_data { bpftrace_offset(&mut files, opts, &zone, &mut notes)? } else { Some(0) };
        let shift = processed_shift(&files, opts, &zone, &mut notes)?;
        let names = process_names(&mut files, &mut notes);
        Ok(Plan {
            files,
            notes,
            tz: zone.tz,
            offset: offset.unwrap_or(0),
            boot_relative: offset.is_none(),
            system,
            opts: opts.clone(),
            inputs: paths.to_vec(),
            unrecognised,
            shift,
            names,
        })
    }

    pub fn files(&self) -> &[PlannedFile] {
        &self.files
    }

    /// Files of the directories given that are of no known format, and why.
    pub fn unrecognised(&self) -> &[(PathBuf, String)] {
        &self.unrecognised
    }

    /// Decisions worth telling (zone, dates, clock alignment).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn source(&self, f: &PlannedFile) -> Result<Box<dyn Source>, ImportError> {
        let mut report = FileReport::new(&f.path, self.opts.max_examples);
        report.format = f.description.clone();
        let tz = || self.tz.ok_or_else(|| ImportError::file(&f.path, "needs a time zone: give --tz"));
        let date = f.date.unwrap_or_default();
        if let Some(why) = &f.skip {
            report.note(format!("not imported: {why}"));
            return Ok(Box::new(NoRecords(report)));
        }
        let lines = Lines::open(&f.path)?;
        Ok(match f.format {
            Format::Pids => {
                let n = self.names.len();
                report.note(format!("names {n} processes (see the names above)"));
                Box::new(NoRecords(report))
            }
            f2 if f2.is_processed() => Box::new(VisSource::new(lines, f2, self.shift, report)),
            Format::Mllog => Box::new(MllogSource::new(lines, report, self.opts.ranks)),
            Format::Mpstat => Box::new(MpstatSource::new(lines, report, tz()?, f.date)),
            Format::Pmon => Box::new(PmonSource::new(lines, report, tz()?, date)),
            Format::Dmon => Box::new(DmonSource::new(lines, report, tz()?, date)),
            Format::Dcgmi => {
                let schedule = self
                    .opts
                    .dcgmi_start
                    .map(|start| Schedule { start, interval_ns: self.opts.dcgmi_interval_ms.max(1) * 1_000_000 });
                Box::new(DcgmiSource::new(lines, report, tz()?, schedule))
            }
            Format::TimeAlign => {
                if let Some((n, bad, lines)) = f.aligned {
                    report.lines = lines;
                    report.note(format!("used to align the bpftrace clock: {n} readings"));
                    if bad > 0 {
                        report.note(format!("{bad} lines unreadable"));
                    }
                } else {
                    report.note("not used: no bpftrace output to align, or the clock was given");
                }
                Box::new(NoRecords(report))
            }
            _ => {
                let v = f.variant.ok_or_else(|| ImportError::file(&f.path, "no bpftrace layout"))?;
                Box::new(BpftraceSource::new(lines, v, self.offset, report))
            }
        })
    }

    /// Converts every file into one log written to `out`.
    pub fn run<W: Write>(&self, out: W) -> Result<Summary, ImportError> {
        let mut inputs = Vec::new();
        for f in &self.files {
            inputs.push(Reorder::new(self.source(f)?));
        }
        let mut merge = Merge::new(inputs);
        let first = merge.next()?;
        let start = first.as_ref().map_or(0, Item::ts);
        let anchor = |t: u64| ClockAnchor {
            boottime_ns: t,
            realtime_ns: if self.boot_relative { 0 } else { t },
            monotonic_ns: 0,
        };
        let header = self.header(anchor(start));
        let mut w = RecordWriter::new(out, &header)?;
        let mut s = Summary { clock: header.clock.clone(), ..Default::default() };
        let mut last = start;
        let mut next = first;
        // pids.json names a process before its first record; other names
        // of it (pmon's `python`) would hide the role.
        let mut unnamed = self.names.clone();
        while let Some(it) = next {
            if let Some(pid) = it.pid().filter(|p| self.names.contains_key(p)) {
                if matches!(it, Item::Comm { .. }) {
                    next = merge.next()?;
                    continue;
                }
                if let Some(comm) = unnamed.remove(&pid) {
                    let c = Item::Comm { ts: it.ts(), pid, comm };
                    s.records += 1;
                    w.push_with(|enc| c.to_record(enc))?;
                }
            }
            s.records += 1;
            s.first_ts = Some(s.first_ts.map_or(it.ts(), |t: u64| t.min(it.ts())));
            last = last.max(it.end_ts());
            if let Item::Lost { count, .. } = it {
                s.lost += count;
            }
            w.push_with(|enc| it.to_record(enc))?;
            next = merge.next()?;
        }
        if s.records > 0 {
            s.last_ts = Some(last);
        }
        let mut trailer = Trailer { end: anchor(last), ..Default::default() };
        if s.lost > 0 {
            trailer.lost.push(LostTotal { kind: LostKind::RingFull.name().into(), count: s.lost });
        }
        w.finish(&trailer)?;
        s.files = merge.inputs.iter().map(|r| r.src.report().clone()).collect();
        Ok(s)
    }

    fn header(&self, start: ClockAnchor) -> Header {
        let sys = self.system.clone().unwrap_or_default();
        Header {
            mltrace_version: mltrace_log::VERSION.to_string(),
            source: "import".into(),
            host: sys.host,
            kernel: sys.kernel,
            cpu_count: sys.cpus.unwrap_or(0),
            command: self.inputs.iter().map(|p| p.display().to_string()).collect(),
            probes: self
                .files
                .iter()
                .filter(|f| f.skip.is_none())
                .map(|f| Probe {
                    subsystem: mltrace_log::subsystem::IMPORT.into(),
                    mechanism: f.format.name().into(),
                    detail: f.path.display().to_string(),
                })
                .collect(),
            clock: if self.boot_relative { "boottime" } else { "realtime" }.into(),
            start,
            ..Default::default()
        }
    }
}

/// A file that gives no records (a clock alignment trace).
struct NoRecords(FileReport);

impl Source for NoRecords {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        Ok(None)
    }
    fn report(&self) -> &FileReport {
        &self.0
    }
}

/// The trace_visuals scripts wrote local time + 5 h and called it UTC.
const SCRIPTS_OFFSET_NS: i64 = 5 * 3600 * clock::NS;
/// Zone offsets are whole quarters of an hour.
const QUARTER_HOUR_NS: i64 = 900 * clock::NS;

/// The ISO time on a processed file's first data line, read as UTC.
fn first_iso(f: &PlannedFile) -> Option<i64> {
    f.head.iter().find_map(|l| l.split([',', ' ']).next().and_then(visuals::parse_iso))
}

/// When a raw local-time file's first sample was.
fn raw_first(f: &PlannedFile, zone: &Zone) -> Option<i64> {
    let tz = zone.tz?;
    match f.format {
        Format::Mpstat => {
            let date = f.date.or_else(|| f.head.iter().find_map(|l| mpstat::system_line(l)).and_then(|s| s.date))?;
            clock::resolve(tz, date.and_time(mpstat::first_tod(&f.head)?), None).ok()
        }
        Format::Pmon | Format::Dmon => {
            let (mut cols, row) = nvsmi_first(f);
            if !cols.has_time() {
                cols.names = ["Date", "Time"].iter().map(|s| s.to_string()).collect();
            }
            let row = row?;
            let row: Vec<&str> = row.iter().map(String::as_str).collect();
            let mut c = LocalClock::new(tz, f.date.unwrap_or_default());
            nvsmi::when(&cols, &row).and_then(|w| nvsmi::instant(&mut c, w)).ok().map(|t| t as i64)
        }
        _ => None,
    }
}

/// `-1 h`, `+30 min`.
fn hours(ns: i64) -> String {
    let min = ns / (60 * clock::NS);
    match (min % 60, min) {
        (0, _) => format!("{:+} h", min / 60),
        (_, m) => format!("{m:+} min"),
    }
}

/// What to add to the processed files' ISO times: `--shift`, else what a
/// raw file beside its processed copy shows (cpu.all and cpu_all.csv hold
/// the same samples), else the scripts' local time + 5 h in `--tz`, else
/// nothing (the times as the scripts wrote them).
fn processed_shift(
    files: &[PlannedFile],
    opts: &Options,
    zone: &Zone,
    notes: &mut Vec<String>,
) -> Result<i64, ImportError> {
    let Some(t0) = files.iter().filter(|f| f.format.is_processed()).find_map(first_iso) else { return Ok(0) };
    let mut pair = None;
    for (csv, raws) in [(Format::CpuCsv, &[Format::Mpstat][..]), (Format::GpuCsv, &[Format::Pmon, Format::Dmon][..])] {
        for c in files.iter().filter(|f| f.format == csv) {
            let beside = files.iter().find(|r| raws.contains(&r.format) && r.path.parent() == c.path.parent());
            let (Some(r), Some(ct)) = (beside, first_iso(c)) else { continue };
            let Some(rt) = raw_first(r, zone) else { continue };
            let d = rt - ct;
            if d % QUARTER_HOUR_NS == 0 && pair.is_none() {
                pair = Some((d, c, r, ct, rt));
            }
        }
    }
    let show = |p: &Path| p.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let measured = pair.map(|(d, c, r, ct, rt)| {
        let csv_time = chrono::DateTime::from_timestamp_nanos(ct).format("%Y-%m-%dT%H:%M:%S");
        (
            d,
            format!(
                "{}'s first row ({csv_time}) is {}'s first sample ({})",
                show(&c.path),
                show(&r.path),
                describe(rt, zone.tz)
            ),
        )
    });
    let shift = match (opts.shift, &measured) {
        (Some(s), m) => {
            let disagree = match m {
                Some((d, why)) if *d != s => format!(" (though {why}: that says {})", hours(*d)),
                _ => String::new(),
            };
            notes.push(format!("processed files (ISO times): shifted by {} (--shift){disagree}", hours(s)));
            s
        }
        (None, Some((d, why))) => {
            notes.push(format!(
                "processed files (ISO times): {why}, so their times are {} off: shifted by {} to line up with \
                 the raw files (the scripts wrote local time + 5 h and called it UTC)",
                hours(-*d),
                hours(*d)
            ));
            *d
        }
        (None, None) => match (&opts.tz, zone.tz) {
            (Some(_), Some(tz)) => {
                let local = chrono::DateTime::from_timestamp_nanos(t0 - SCRIPTS_OFFSET_NS).naive_utc();
                let d = clock::resolve(tz, local, None).map_err(ImportError::Clock)? - t0;
                notes.push(format!(
                    "processed files (ISO times): no raw file beside its processed copy to measure their clock; \
                     read as the scripts wrote them, local time + 5 h, in {}: shifted by {} (--shift to change)",
                    tz.name(),
                    hours(d)
                ));
                d
            }
            _ => {
                notes.push(
                    "processed files (ISO times): read as UTC, as the scripts called them; they wrote local time \
                     + 5 h (so a run in UTC-4 is an hour ahead): give --tz ZONE of the run, or --shift"
                        .into(),
                );
                0
            }
        },
    };
    Ok(shift)
}

/// Names from pids.json, read by what the GPU trace shows (see
/// [`dir::role_names`]).
fn process_names(files: &mut [PlannedFile], notes: &mut Vec<String>) -> HashMap<u32, Rc<str>> {
    let mut roles = Vec::new();
    for f in files.iter_mut().filter(|f| f.format == Format::Pids && f.skip.is_none()) {
        let parsed = std::fs::read_to_string(&f.path).ok().and_then(|t| visuals::parse_pids_json(&t));
        match parsed {
            Some(r) => roles.extend(r),
            None => f.skip = Some("not a JSON object of pid to role".into()),
        }
    }
    if roles.is_empty() {
        return HashMap::new();
    }
    let mut gpu_pids = HashMap::new();
    for f in files.iter().filter(|f| f.format == Format::Pmon && f.skip.is_none()) {
        let (cols, _) = nvsmi_first(f);
        let (g, p) = match (cols.index("gpu"), cols.index("pid")) {
            (Some(g), Some(p)) => (g, p),
            _ => (2, 3),
        };
        for l in f.head.iter().filter(|l| !l.trim_start().starts_with('#')) {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let (Some(Ok(gpu)), Some(Ok(pid))) = (w.get(g).map(|x| x.parse()), w.get(p).map(|x| x.parse())) {
                gpu_pids.entry(pid).or_insert(gpu);
            }
        }
    }
    let (names, note) = dir::role_names(&roles, &gpu_pids);
    let list: Vec<String> = names.iter().map(|(p, n)| format!("{p} {n}")).collect();
    notes.push(format!("{note}: {}", list.join(", ")));
    names.into_iter().map(|(p, n)| (p, Rc::from(n))).collect()
}
