//! An import: what each file is, how its clock maps to wall-clock time,
//! then the conversion itself.

use std::io::Write;
use std::path::PathBuf;

use chrono::{NaiveDate, NaiveTime};
use chrono_tz::Tz;
use mltrace_log::{ClockAnchor, Header, LostKind, LostTotal, Probe, RecordWriter, Trailer};

use crate::bpftrace::layout::Variant;
use crate::bpftrace::{self, is_data, BpftraceSource};
use crate::clock::{self, date_near, describe, Alignment, LocalClock};
use crate::detect::detect;
use crate::dmon::DmonSource;
use crate::error::ImportError;
use crate::lines::{head, FileReport, Lines};
use crate::merge::{Merge, Reorder};
use crate::mllog::{self, MllogSource};
use crate::mpstat::{self, MpstatSource, SystemLine};
use crate::nvsmi::{self, Columns};
use crate::pmon::{self, PmonSource};
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
        for p in paths {
            let h = head(p, HEAD_LINES, HEAD_BYTES)?;
            let d = detect(p, &h, opts.format)?;
            files.push(PlannedFile {
                path: p.clone(),
                format: d.format,
                description: d.description,
                variant: d.variant,
                head: h,
                date: None,
                aligned: None,
            });
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
            f.date.is_some() || matches!(f.format, Format::Mpstat | Format::Pmon | Format::Dmon | Format::TimeAlign)
        };
        if zone.tz.is_some() && files.iter().any(local) {
            notes.insert(0, zone.note.clone());
        }

        let bpf_data = files.iter().any(|f| f.format.is_bpftrace() && f.format != Format::TimeAlign);
        let offset = if bpf_data { bpftrace_offset(&mut files, opts, &zone, &mut notes)? } else { Some(0) };
        Ok(Plan {
            files,
            notes,
            tz: zone.tz,
            offset: offset.unwrap_or(0),
            boot_relative: offset.is_none(),
            system,
            opts: opts.clone(),
        })
    }

    pub fn files(&self) -> &[PlannedFile] {
        &self.files
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
        let lines = Lines::open(&f.path)?;
        Ok(match f.format {
            Format::Mllog => Box::new(MllogSource::new(lines, report, self.opts.ranks)),
            Format::Mpstat => Box::new(MpstatSource::new(lines, report, tz()?, f.date)),
            Format::Pmon => Box::new(PmonSource::new(lines, report, tz()?, date)),
            Format::Dmon => Box::new(DmonSource::new(lines, report, tz()?, date)),
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
        while let Some(it) = next {
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
            command: self.files.iter().map(|f| f.path.display().to_string()).collect(),
            probes: self
                .files
                .iter()
                .map(|f| Probe {
                    subsystem: "import".into(),
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
