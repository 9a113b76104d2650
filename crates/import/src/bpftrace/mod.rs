//! The DL I/O study's bpftrace outputs (trace_bio, trace_openat, trace_read,
//! trace_write, trace_vfs_rw, trace_close, trace_create_del, trace_mmap,
//! trace_time_align): one record per line, printed when the call returned.

pub mod layout;

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use chrono::NaiveDate;
use chrono_tz::Tz;
use mltrace_log::{blk, BlockOp, IoOp, OpenOp, RET_UNKNOWN};
use serde_json::{json, Map, Value};

use crate::clock::{Alignment, LocalClock, NS};
use crate::error::ImportError;
use crate::item::Item;
use crate::lines::{FileReport, Lines};
use crate::Source;
use layout::{match_line, Fields, Miss, Variant, What};

/// What a line that does not start with a digit is.
#[derive(Debug, PartialEq, Eq)]
pub enum Other {
    /// Column headings, `mkdir():` sub-headings, banners.
    Header,
    /// `Attaching 4 probes...`, warnings.
    Chatter,
    /// `@map[key]: value` printed when bpftrace exits.
    MapDump,
    /// `Lost 123 events`: the perf buffer was full.
    Lost(u64),
    /// Anything else.
    Unknown,
}

pub fn classify_other(line: &str) -> Other {
    let t = line.trim();
    if let Some(n) = t.strip_prefix("Lost ").and_then(|r| r.strip_suffix(" events")) {
        if let Ok(n) = n.trim().parse() {
            return Other::Lost(n);
        }
    }
    if t.starts_with('@') {
        return Other::MapDump;
    }
    if t.starts_with("Attaching ") || t.starts_with("WARNING") || t.starts_with("ERROR") || t.starts_with("stdin:") {
        return Other::Chatter;
    }
    if t.contains("TIMESTAMP") || t.ends_with(':') || !t.bytes().any(|b| b.is_ascii_digit()) {
        return Other::Header;
    }
    Other::Unknown
}

/// True for a line that holds data (bpftrace lines start with `nsecs`).
pub fn is_data(line: &str) -> bool {
    line.trim_start().starts_with(|c: char| c.is_ascii_digit())
}

/// How many of `lines` fit one of `v`'s layouts exactly.
pub fn score(v: &Variant, lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| is_data(l))
        .filter(|l| v.layouts.iter().any(|lay| match_line(l, &lay.cols, true).is_ok()))
        .count()
}

/// Reads a file's `nsecs`/local-time pairs (all of a trace_time_align
/// output, or the first `max_lines` of a trace with a time column).
pub fn scan_alignment(
    path: &std::path::Path,
    v: &Variant,
    tz: Tz,
    date: NaiveDate,
    max_lines: u64,
) -> Result<(Alignment, u64, u64), ImportError> {
    let mut lines = Lines::open(path)?;
    let mut count = 0;
    let mut clock = LocalClock::new(tz, date);
    let mut a = Alignment::default();
    let mut bad = 0;
    while let Some((no, l)) = lines.next_line()? {
        if no > max_lines {
            break;
        }
        count = no;
        if !is_data(l) {
            continue;
        }
        let Some(f) = v.layouts.iter().find_map(|lay| match_line(l, &lay.cols, false).ok()) else {
            bad += 1;
            continue;
        };
        if let Some(tod) = f.tod {
            match clock.at(tod) {
                Ok(wall) => a.add(f.ts, wall),
                Err(_) => bad += 1,
            }
        }
    }
    Ok((a, bad, count))
}

/// A vfs_open seen inside an openat still being waited for.
struct VfsOpen {
    start: u64,
    end: u64,
}

/// Converts one bpftrace output file.
pub struct BpftraceSource {
    lines: Lines,
    /// The line being read (its memory reused).
    buf: String,
    variant: &'static Variant,
    /// Added to `nsecs` to get Unix ns (0 for a boot-relative import).
    offset: i64,
    report: FileReport,
    queue: VecDeque<Item>,
    comms: HashMap<u32, Rc<str>>,
    strings: HashMap<String, Rc<str>>,
    vfs_opens: HashMap<u32, VecDeque<VfsOpen>>,
    unpaired_vfs: u64,
    last_ts: u64,
}

impl BpftraceSource {
    pub fn new(lines: Lines, variant: &'static Variant, offset: i64, report: FileReport) -> Self {
        BpftraceSource {
            lines,
            buf: String::new(),
            variant,
            offset,
            report,
            queue: VecDeque::new(),
            comms: HashMap::new(),
            strings: HashMap::new(),
            vfs_opens: HashMap::new(),
            unpaired_vfs: 0,
            last_ts: 0,
        }
    }

    fn unix(&self, nsecs: u64) -> u64 {
        (i128::from(nsecs) + i128::from(self.offset)).clamp(0, i128::from(u64::MAX)) as u64
    }

    fn rc(&mut self, s: &str) -> Rc<str> {
        if let Some(r) = self.strings.get(s) {
            return r.clone();
        }
        let r: Rc<str> = Rc::from(s);
        if self.strings.len() < 4096 {
            self.strings.insert(s.to_string(), r.clone());
        }
        r
    }

    /// A `Comm` record the first time a pid is seen with a name, or when its
    /// name changes.
    fn comm(&mut self, ts: u64, pid: u32, comm: Option<&str>) {
        let Some(c) = comm.filter(|c| !c.is_empty()) else { return };
        if self.comms.get(&pid).is_some_and(|old| &**old == c) {
            return;
        }
        let c = self.rc(c);
        self.comms.insert(pid, c.clone());
        self.queue.push_back(Item::Comm { ts, pid, comm: c });
    }

    fn line(&mut self, no: u64, line: &str) {
        if !is_data(line) {
            match classify_other(line) {
                Other::Lost(n) => {
                    self.report.lost += n;
                    self.queue.push_back(Item::Lost { ts: self.last_ts, count: n });
                }
                Other::Unknown => {
                    self.report.malformed(no, format!("not a {} line: '{}'", self.variant.format, cut(line)))
                }
                Other::MapDump => {
                    self.report.skipped += 1;
                    self.report.note("bpftrace's map dump at exit skipped");
                }
                Other::Header | Other::Chatter => self.report.skipped += 1,
            }
            return;
        }
        let mut best: Option<Miss> = None;
        let variant = self.variant;
        for lay in &variant.layouts {
            match match_line(line, &lay.cols, false) {
                Ok(f) => {
                    self.convert(lay.what, &f);
                    if f.lat_wrapped {
                        self.report.repaired("latencies printed as negative 32-bit numbers");
                    }
                    if f.errno_unsigned {
                        self.report.repaired("negative errnos printed as unsigned numbers");
                    }
                    return;
                }
                Err(m) => {
                    if best.as_ref().is_none_or(|b| m.fitted > b.fitted) {
                        best = Some(m);
                    }
                }
            }
        }
        let why = best.map_or_else(|| "no layout".to_string(), |m| m.why);
        self.report.malformed(no, why);
    }

    fn convert(&mut self, what: What, f: &Fields) {
        let lat = f.lat.unwrap_or(0);
        let end = self.unix(f.ts);
        let ts = end.saturating_sub(lat);
        self.last_ts = self.last_ts.max(end);
        let pid = f.pid.or(f.tid).unwrap_or(0);
        let tid = f.tid.unwrap_or(pid);
        if what != What::Block {
            self.comm(ts, pid, f.comm);
        }
        let name = f.name.unwrap_or("").to_string();
        match what {
            What::Block => {
                let comm = self.rc(f.comm.unwrap_or(""));
                let disk = self.rc(f.disk.unwrap_or(""));
                self.comm(ts, pid, f.comm);
                let traced = if pid != 0 { blk::TRACED } else { 0 };
                let (ts, queue, device, flags) = match f.qlat {
                    Some(q) => (end.saturating_sub(q), q.saturating_sub(lat), lat, traced),
                    None => (ts, 0, lat, blk::ISSUE_UNKNOWN | traced),
                };
                self.queue.push_back(Item::Block {
                    ts,
                    queue,
                    device,
                    pid,
                    tid,
                    comm,
                    disk,
                    sector: f.sector.unwrap_or(0),
                    bytes: f.bytes.unwrap_or(0),
                    op: f.op.unwrap_or(BlockOp::Other),
                    flags,
                });
            }
            What::Open => {
                let kind =
                    if name.is_empty() { mltrace_log::FileKind::Unknown } else { mltrace_log::FileKind::Regular };
                self.queue.push_back(Item::Open {
                    ts,
                    dur: lat,
                    pid,
                    tid,
                    op: OpenOp::Openat,
                    path: f.path.unwrap_or("").to_string(),
                    flags: f.flags.unwrap_or(0),
                    mode: f.mode.unwrap_or(0),
                    ret: f.fd.unwrap_or(RET_UNKNOWN),
                    kind,
                });
            }
            What::OpenPair => self.open_pair(ts, end, pid, f),
            What::Read | What::Write | What::ReadWrite => {
                let write = match what {
                    What::Write => true,
                    What::Read => false,
                    _ => f.func.is_some_and(|x| x == "W" || x.contains("write")),
                };
                self.queue.push_back(Item::Io {
                    ts,
                    dur: lat,
                    pid,
                    tid,
                    op: if write { IoOp::Write } else { IoOp::Read },
                    fd: f.fd.map_or(-1, |fd| fd as i32),
                    path: if name.is_empty() { f.path.unwrap_or("").to_string() } else { name },
                    offset: f.off,
                    requested: f.req.unwrap_or(0),
                    ret: f.ret.unwrap_or(RET_UNKNOWN),
                });
            }
            What::Close => self.queue.push_back(Item::Close {
                ts,
                dur: lat,
                pid,
                tid,
                fd: f.fd.map_or(-1, |fd| fd as i32),
                path: name,
            }),
            What::Creat => {
                const O_CREAT_WRONLY_TRUNC: u32 = 0o1101;
                self.queue.push_back(Item::Open {
                    ts,
                    dur: lat,
                    pid,
                    tid,
                    op: OpenOp::Creat,
                    path: f.path.unwrap_or("").to_string(),
                    flags: O_CREAT_WRONLY_TRUNC,
                    mode: f.mode.unwrap_or(0),
                    ret: RET_UNKNOWN,
                    kind: mltrace_log::FileKind::Unknown,
                });
            }
            What::Event | What::Mmap | What::Munmap => {
                let event = match what {
                    What::Mmap => "mmap",
                    What::Munmap => "munmap",
                    _ => f.func.unwrap_or("event").trim_end_matches("()"),
                };
                self.queue.push_back(Item::Mark {
                    ts,
                    name: event.to_string(),
                    value: event_value(f, tid).to_string(),
                    rank: -1,
                    pid,
                });
            }
            What::TimeAlign => {}
        }
    }

    /// trace_open.bt prints `vfs_open` (the kernel opening the file, inside
    /// the syscall) before `openat` (the syscall's return): the pair is one
    /// open, and the vfs_open says the file was found.
    fn open_pair(&mut self, ts: u64, end: u64, pid: u32, f: &Fields) {
        let path = f.path.unwrap_or("").to_string();
        let pending = self.vfs_opens.entry(pid).or_default();
        // Opens not inside any openat (exec, other calls) are not kept forever.
        while pending.front().is_some_and(|v| v.end.saturating_add(10 * NS as u64) < end) {
            pending.pop_front();
            self.unpaired_vfs += 1;
        }
        if f.func == Some("vfs_open") {
            pending.push_back(VfsOpen { start: ts, end });
            return;
        }
        let found = pending.iter().position(|v| v.start >= ts && v.end <= end);
        let kind = match found {
            Some(i) => {
                pending.remove(i);
                mltrace_log::FileKind::Regular
            }
            None => mltrace_log::FileKind::Unknown,
        };
        self.queue.push_back(Item::Open {
            ts,
            dur: end - ts,
            pid,
            tid: pid,
            op: OpenOp::Openat,
            path,
            flags: 0,
            mode: 0,
            ret: RET_UNKNOWN,
            kind,
        });
    }

    fn finish_notes(&mut self) {
        let left: u64 = self.vfs_opens.values().map(|q| q.len() as u64).sum();
        let n = self.unpaired_vfs + left;
        if n > 0 {
            self.report.note(format!(
                "{n} vfs_open lines had no openat around them (opens by exec or other calls): not imported"
            ));
        }
        self.vfs_opens.clear();
        self.unpaired_vfs = 0;
    }
}

/// The known fields of an event with no record of its own, as JSON.
fn event_value(f: &Fields, tid: u32) -> Value {
    let mut m = Map::new();
    let hex = |v: u64| format!("{v:#x}");
    if let Some(p) = f.path {
        m.insert("path".into(), json!(p));
    }
    if let Some(n) = f.name.filter(|n| !n.is_empty()) {
        m.insert(if f.path.is_some() { "name" } else { "file" }.into(), json!(n));
    }
    if let Some(fd) = f.fd {
        m.insert("fd".into(), json!(fd));
    }
    if let Some(a) = f.addr {
        m.insert("addr".into(), json!(hex(a)));
    }
    if let Some(a) = f.hint {
        m.insert("hint".into(), json!(hex(a)));
    }
    if let Some(l) = f.len {
        m.insert("len".into(), json!(l));
    }
    if let Some(p) = f.prot {
        m.insert("prot".into(), json!(hex(u64::from(p))));
    }
    if let Some(p) = f.map_flags {
        m.insert("flags".into(), json!(hex(u64::from(p))));
    }
    if let Some(mode) = f.mode {
        m.insert("mode".into(), json!(format!("{mode:#o}")));
    }
    if let Some(r) = f.ret {
        m.insert("ret".into(), json!(r));
    }
    if let Some(l) = f.lat {
        m.insert("latency_ns".into(), json!(l));
    }
    if f.tid.is_some() {
        m.insert("tid".into(), json!(tid));
    }
    Value::Object(m)
}

fn cut(s: &str) -> String {
    let mut c: String = s.chars().take(60).collect();
    if c.len() < s.len() {
        c.push_str("...");
    }
    c
}

impl Source for BpftraceSource {
    fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                self.report.records += 1;
                return Ok(Some(it));
            }
            let mut l = std::mem::take(&mut self.buf);
            let Some(no) = self.lines.next_content(&mut l, &mut self.report)? else {
                self.finish_notes();
                return Ok(None);
            };
            self.line(no, &l);
            self.buf = l;
        }
    }

    fn report(&self) -> &FileReport {
        &self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_lines() {
        assert_eq!(classify_other("Lost 1234 events"), Other::Lost(1234));
        assert_eq!(classify_other("Attaching 4 probes..."), Other::Chatter);
        assert_eq!(classify_other("@read_start[2036325]: 5207185420742"), Other::MapDump);
        assert_eq!(classify_other("mkdir():"), Other::Header);
        assert_eq!(classify_other("TIMESTAMP         PID    FD   RET (B)"), Other::Header);
        assert_eq!(classify_other("Capturing VFS Read and Write calls"), Other::Header);
        assert_eq!(classify_other("garbage 12 x"), Other::Unknown);
    }
}
