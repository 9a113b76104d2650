//! The line layouts of the study's bpftrace scripts, and a matcher that reads
//! a line against one.
//!
//! A layout is a list of columns, written as words: `ts pid comm lat path`.
//! The scripts changed many times (and their headers do not always say what
//! the lines hold: several print `comm` under an `FD` heading), so a file's
//! layout is chosen by how many of its lines fit, the header only breaking
//! ties. Every layout also accepts bpftrace's `time("%H:%M:%S")` column
//! right after the timestamp.

use std::sync::OnceLock;

use chrono::NaiveTime;
use mltrace_log::BlockOp;

use crate::clock::parse_tod;
use crate::Format;

/// One column of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Col {
    /// `nsecs` when the line was printed.
    Ts,
    Pid,
    Tid,
    Comm,
    /// The process the block request completed in (ignored).
    DonePid,
    DoneComm,
    Disk,
    /// `R`/`W` (or the kernel's REQ_OP number).
    Rw,
    Bytes,
    Sector,
    /// Nanoseconds the call (or request, from issue) took.
    Lat,
    /// Nanoseconds a block request took from being queued.
    QLat,
    Fd,
    /// A return value: bytes, or -errno.
    Ret,
    Req,
    /// A file offset (decimal, or hex with 0x).
    Off,
    /// A user-space address (hex).
    Addr,
    Hint,
    Mode,
    /// open(2) flags, hex.
    Flags,
    Len,
    Prot,
    MapFlags,
    /// A literal word: one of `|`-separated alternatives.
    Func(&'static str),
    /// A dentry name: one word (or the rest of the line, leniently).
    Name,
    /// A path as passed: the rest of the line.
    Path,
    /// `fullpath filename`, the filename possibly empty.
    PathName,
    /// `filename fullpath`, the filename possibly empty.
    NamePath,
}

impl Col {
    fn parse(w: &'static str) -> Col {
        if let Some(f) = w.strip_prefix('=') {
            return Col::Func(f);
        }
        match w {
            "ts" => Col::Ts,
            "pid" => Col::Pid,
            "tid" => Col::Tid,
            "comm" => Col::Comm,
            "dpid" => Col::DonePid,
            "dcomm" => Col::DoneComm,
            "disk" => Col::Disk,
            "rw" => Col::Rw,
            "bytes" => Col::Bytes,
            "sector" => Col::Sector,
            "lat" => Col::Lat,
            "qlat" => Col::QLat,
            "fd" => Col::Fd,
            "ret" => Col::Ret,
            "req" => Col::Req,
            "off" => Col::Off,
            "addr" => Col::Addr,
            "hint" => Col::Hint,
            "mode" => Col::Mode,
            "flags" => Col::Flags,
            "len" => Col::Len,
            "prot" => Col::Prot,
            "mflags" => Col::MapFlags,
            "name" => Col::Name,
            "path" => Col::Path,
            "pathname" => Col::PathName,
            "namepath" => Col::NamePath,
            _ => panic!("unknown layout column {w}"),
        }
    }

    /// Columns that hold a word, so a number glued to their left
    /// (`%-6d%-10s` with a 7-digit pid) can be split off.
    fn is_word(self) -> bool {
        matches!(self, Col::Comm | Col::DoneComm | Col::Disk | Col::Func(_))
    }

    fn what(self) -> &'static str {
        match self {
            Col::Ts => "a timestamp (nsecs)",
            Col::Pid | Col::DonePid => "a pid",
            Col::Tid => "a tid",
            Col::Comm | Col::DoneComm => "a command name",
            Col::Disk => "a disk name",
            Col::Rw => "R or W",
            Col::Bytes | Col::Req | Col::Len => "a byte count",
            Col::Sector => "a sector",
            Col::Lat | Col::QLat => "a latency (ns)",
            Col::Fd => "an fd",
            Col::Ret => "a return value",
            Col::Off => "an offset",
            Col::Addr | Col::Hint => "an address (0x...)",
            Col::Mode => "a mode",
            Col::Flags | Col::Prot | Col::MapFlags => "hex flags",
            Col::Func(_) => "a function name",
            Col::Name => "a file name",
            Col::Path | Col::PathName | Col::NamePath => "a path",
        }
    }
}

/// What a line of a layout becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Block,
    Open,
    /// `openat` and `vfs_open` lines, paired (trace_open.bt).
    OpenPair,
    Read,
    Write,
    /// Read or write, by its `R`/`W` or function column.
    ReadWrite,
    Close,
    /// creat(2), printed at entry.
    Creat,
    /// mkdir, rmdir, unlink and kernel-function events: marks.
    Event,
    Mmap,
    Munmap,
    /// `nsecs HH:MM:SS` pairs of trace_time_align.bt.
    TimeAlign,
}

#[derive(Debug)]
pub struct Layout {
    pub cols: Vec<Col>,
    pub what: What,
}

/// One version of a script: the header(s) it printed and its line layouts.
#[derive(Debug)]
pub struct Variant {
    pub format: Format,
    pub name: &'static str,
    pub headers: Vec<String>,
    pub layouts: Vec<Layout>,
}

/// Header text, compared with runs of spaces and an optional `TIME` column
/// (after `TIMESTAMP`) ignored.
pub fn normalize_header(h: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for w in h.split_whitespace() {
        if w == "TIME" && out.last() == Some(&"TIMESTAMP") {
            continue;
        }
        out.push(w);
    }
    out.join(" ")
}

fn variant(format: Format, name: &'static str, headers: &[&str], layouts: &[(&'static str, What)]) -> Variant {
    Variant {
        format,
        name,
        headers: headers.iter().map(|h| normalize_header(h)).collect(),
        layouts: layouts
            .iter()
            .map(|(spec, what)| Layout { cols: spec.split_whitespace().map(Col::parse).collect(), what: *what })
            .collect(),
    }
}

/// Every known layout, by format; within a format, the most common first
/// (the first wins ties that neither lines nor header settle).
pub fn variants() -> &'static [Variant] {
    static V: OnceLock<Vec<Variant>> = OnceLock::new();
    V.get_or_init(|| {
        use Format as F;
        use What as W;
        vec![
            variant(
                F::Bio,
                "DONEPID/DONECOMM layout",
                &["TIMESTAMP PID COMM DONEPID DONECOMM DISK T BYTES LAT(ns)"],
                &[("ts pid comm dpid dcomm disk rw bytes lat", W::Block)],
            ),
            variant(
                F::Bio,
                "DONEPID/DONECOMM layout with SECTOR",
                &["TIMESTAMP PID COMM DONEPID DONECOMM DISK T SECTOR BYTES LAT(ns)"],
                &[("ts pid comm dpid dcomm disk rw sector bytes lat", W::Block)],
            ),
            variant(
                F::Bio,
                "SECTOR layout",
                &["TIMESTAMP PID COMM DISK T BYTES SECTOR LAT(ns)"],
                &[("ts pid comm disk rw bytes sector lat", W::Block)],
            ),
            variant(
                F::Bio,
                "queue latency layout",
                &["TIMESTAMP PID COMM DISK T BYTES QLAT(ns) LAT(ns)"],
                &[("ts pid comm disk rw bytes qlat lat", W::Block)],
            ),
            variant(
                F::Bio,
                "CALLER layout",
                &[
                    "TIMESTAMP COMM PID CALLER? CALLPID DISK T SECTOR BYTES LAT(ns)",
                    "TIMESTAMP COMM PID CALLER? CALLING PID DISK T SECTOR BYTES LAT(ns)",
                ],
                &[("ts comm pid dcomm dpid disk rw sector bytes lat", W::Block)],
            ),
            variant(
                F::Bio,
                "TID layout",
                &["TIMESTAMP PID TID COMM DISK T BYTES LAT(ns)"],
                &[("ts pid tid comm disk rw bytes lat", W::Block)],
            ),
            variant(
                F::Openat,
                "COMM FULLPATH FILENAME layout",
                &["TIMESTAMP PID COMM LAT(ns) FULLPATH FILENAME"],
                &[("ts pid comm lat pathname", W::Open)],
            ),
            variant(
                F::Openat,
                "FD FULLPATH FILENAME layout",
                &["TIMESTAMP PID FD LAT(ns) FULLPATH FILENAME"],
                &[("ts pid fd lat pathname", W::Open)],
            ),
            variant(
                F::Openat,
                "FD FILENAME FULLPATH layout",
                &["TIMESTAMP PID FD LAT(ns) FILENAME FULLPATH"],
                &[("ts pid fd lat namepath", W::Open)],
            ),
            variant(
                F::Openat,
                "PID TID COMM layout",
                &["TIMESTAMP PID TID COMM LAT(ns) FULLPATH"],
                &[("ts pid tid comm lat path", W::Open)],
            ),
            variant(
                F::Openat,
                "openat + vfs_open two-line form",
                &["TIMESTAMP PID COMM FUNC LAT (ns) FILE", "TIMESTAMP PID COMM FUNC LAT(ns) FILENAME"],
                &[("ts pid comm =openat|vfs_open lat path", W::OpenPair)],
            ),
            variant(
                F::Openat,
                "openat()/close() FUNCTION layout",
                &[
                    "TIMESTAMP PID TID FUNCTION FD FLAGS MODE LAT(ns) FILENAME FULLPATH",
                    "TIMESTAMP PID TID FUNCTION FD LAT(ns) FILENAME",
                ],
                &[
                    ("ts pid tid =openat() fd flags mode lat namepath", W::Open),
                    ("ts pid tid =close() fd lat name", W::Close),
                ],
            ),
            variant(
                F::Read,
                "FD layout",
                &["TIMESTAMP PID FD RET (B) LAT(ns) FILENAME"],
                &[("ts pid fd ret lat name", W::Read)],
            ),
            variant(
                F::Read,
                "COMM layout",
                &["TIMESTAMP PID COMM RET (B) LAT(ns) FILENAME"],
                &[("ts pid comm ret lat name", W::Read)],
            ),
            variant(
                F::Read,
                "OFFSET layout",
                &["TIMESTAMP PID OFFSET RET (B) LAT(ns) FILENAME"],
                &[("ts pid off ret lat name", W::Read)],
            ),
            variant(
                F::Read,
                "TID FD layout",
                &["TIMESTAMP TID FD RET (B) LAT(ns) FILENAME"],
                &[("ts tid fd ret lat name", W::Read)],
            ),
            variant(
                F::Read,
                "TID OFFSET layout",
                &["TIMESTAMP TID OFFSET RET (B) LAT(ns) FILENAME"],
                &[("ts tid off ret lat name", W::Read)],
            ),
            variant(
                F::Read,
                "PID TID COMM layout",
                &["TIMESTAMP PID TID COMM LAT(ns) FILENAME"],
                &[("ts pid tid comm lat name", W::Read)],
            ),
            variant(
                F::Read,
                "COMM OFFSET layout",
                &["TIMESTAMP PID COMM OFFSET RET (B) FILENAME"],
                &[("ts pid comm off ret name", W::Read)],
            ),
            variant(
                F::Read,
                "BUFFER ADDR OFFSET layout",
                &["TIMESTAMP PID FD BUFFER ADDR OFFSET FILENAME", "TIMESTAMP TID FD BUFFER ADDR OFFSET FILENAME"],
                &[("ts pid fd addr off name", W::Read)],
            ),
            variant(
                F::Write,
                "FD layout",
                &["TIMESTAMP PID FD BUFFER ADDR OFFSET REQ (B) RET (B) LAT(ns)"],
                &[("ts pid fd addr off req ret lat name", W::Write)],
            ),
            variant(F::Write, "COMM layout", &[], &[("ts pid comm addr off req ret lat name", W::Write)]),
            variant(
                F::Write,
                "TID FD layout",
                &["TIMESTAMP TID FD BUFFER ADDR OFFSET REQ (B) RET (B) LAT(ns)"],
                &[("ts tid fd addr off req ret lat name", W::Write)],
            ),
            variant(
                F::Write,
                "OFFSET layout",
                &["TIMESTAMP PID OFFSET SIZE (B) LAT (ns) FILENAME"],
                &[("ts pid off ret lat name", W::Write)],
            ),
            variant(
                F::Write,
                "PID TID COMM layout",
                &["TIMESTAMP PID TID COMM LAT (ns) FILENAME"],
                &[("ts pid tid comm lat name", W::Write)],
            ),
            variant(
                F::VfsRw,
                "R/W layout",
                &["TIMESTAMP PID COMM R/W LAT(ns) REQUESTED RETURNED FILE"],
                &[("ts pid comm =R|W lat req ret name", W::ReadWrite)],
            ),
            variant(
                F::VfsRw,
                "FUNC layout",
                &["TIMESTAMP PID COMM FUNC LAT (ns) REQ BYTES FILE"],
                &[("ts pid comm =vfs_read|vfs_write lat req ret name", W::ReadWrite)],
            ),
            variant(
                F::VfsRw,
                "read()/write() FUNCTION layout",
                &["TIMESTAMP PID TID FUNCTION FD BUFFER ADDRESS OFFSET REQ (B) RET (B) LAT(ns)"],
                &[("ts pid tid =read()|write() fd addr off req ret lat name", W::ReadWrite)],
            ),
            variant(F::Close, "FD layout", &["TIMESTAMP PID FD LAT(ns) FILENAME"], &[("ts pid fd lat name", W::Close)]),
            variant(
                F::CreateDel,
                "PID layout",
                &["TIMESTAMP PID FUNCTION MODE LAT(ns) FILENAME"],
                &[
                    ("ts pid =mkdir() mode lat path", W::Event),
                    ("ts pid =rmdir() lat path", W::Event),
                    ("ts pid =unlink() lat name path", W::Event),
                    ("ts pid tid =create() mode path", W::Creat),
                ],
            ),
            variant(
                F::CreateDel,
                "PID TID layout",
                &["TIMESTAMP PID TID FUNCTION MODE LAT(ns) FILENAME"],
                &[
                    ("ts pid tid =mkdir() mode lat path", W::Event),
                    ("ts pid tid =vfs_mkdir()|vfs_mkdir mode lat name", W::Event),
                    ("ts pid tid =rmdir() lat path", W::Event),
                    ("ts pid tid =vfs_rmdir()|vfs_rmdir lat name", W::Event),
                    ("ts pid tid =create() mode path", W::Creat),
                    ("ts pid tid =vfs_create mode ret lat name", W::Event),
                    ("ts pid tid =unlink() lat name path", W::Event),
                    ("ts pid tid =unlink()|vfs_unlink lat name", W::Event),
                ],
            ),
            variant(
                F::Mmap,
                "PID layout",
                &["TIMESTAMP PID FD ADDRESS LAT(ns) FILENAME"],
                &[("ts pid fd addr lat name", W::Mmap), ("ts pid addr len lat", W::Munmap)],
            ),
            variant(
                F::Mmap,
                "TID layout",
                &["TIMESTAMP TID FD ADDRESS LAT(ns) FILENAME"],
                &[("ts tid fd addr lat name", W::Mmap), ("ts tid addr len lat", W::Munmap)],
            ),
            variant(
                F::Mmap,
                "FUNCTION layout",
                &["TIMESTAMP PID TID FUNCTION FD ADDRESS HINT ADDR LEN PROT FLAGS LAT(ns) FILENAME"],
                &[
                    ("ts pid tid =mmap() fd addr hint len prot mflags lat name", W::Mmap),
                    ("ts pid tid =munmap() addr len lat", W::Munmap),
                ],
            ),
            variant(
                F::Mmap,
                "no-PID layout",
                &["TIMESTAMP FD ADDRESS HINT ADDR LEN PROT FLAGS LAT(ns) FILENAME"],
                &[("ts fd addr hint len prot mflags lat name", W::Mmap)],
            ),
            variant(F::TimeAlign, "nsecs and local time", &["TIMESTAMP TIME"], &[("ts", W::TimeAlign)]),
        ]
    })
}

/// The fields read from one line (what its layout has).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields<'a> {
    pub ts: u64,
    pub tod: Option<NaiveTime>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<&'a str>,
    pub disk: Option<&'a str>,
    pub op: Option<BlockOp>,
    pub bytes: Option<u64>,
    pub sector: Option<u64>,
    pub lat: Option<u64>,
    pub qlat: Option<u64>,
    pub fd: Option<i64>,
    pub ret: Option<i64>,
    pub req: Option<u64>,
    pub off: Option<u64>,
    pub addr: Option<u64>,
    pub hint: Option<u64>,
    pub mode: Option<u32>,
    pub flags: Option<u32>,
    pub len: Option<u64>,
    pub prot: Option<u32>,
    pub map_flags: Option<u32>,
    pub func: Option<&'a str>,
    pub name: Option<&'a str>,
    pub path: Option<&'a str>,
    /// A latency printed as a negative 32-bit number, repaired.
    pub lat_wrapped: bool,
    /// A negative errno printed as a huge unsigned number, repaired.
    pub errno_unsigned: bool,
}

/// Why a line did not fit a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Miss {
    /// How many columns fitted before the one that did not.
    pub fitted: usize,
    pub why: String,
}

/// Linux caps one read or write at this many bytes.
const MAX_RW: i128 = 0x7fff_f000;
const MAX_ERRNO: i128 = 4095;
const PID_MAX_LIMIT: i128 = 4_194_304;

/// A leading integer of `t`: its value and how many bytes it took.
fn int_prefix(t: &str) -> Option<(i128, usize)> {
    let b = t.as_bytes();
    let neg = b.first() == Some(&b'-');
    let start = usize::from(neg);
    let end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    if end == start || end - start > 30 {
        return None;
    }
    let v: i128 = t[start..end].parse().ok()?;
    Some((if neg { -v } else { v }, end))
}

fn hex(t: &str, need_prefix: bool) -> Option<u64> {
    let h = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => h,
        None if need_prefix => return None,
        None => t,
    };
    u64::from_str_radix(h, 16).ok()
}

/// A return value: negative errnos printed as unsigned 64- or 32-bit
/// numbers are turned back into -errno.
fn ret_value(v: i128, f: &mut Fields) -> Option<i64> {
    if (-MAX_ERRNO..0).contains(&v) {
        return Some(v as i64);
    }
    if (0..=MAX_RW).contains(&v) {
        return Some(v as i64);
    }
    let u64_max = u64::MAX as i128;
    let u32_max = u32::MAX as i128;
    if (u64_max - MAX_ERRNO + 1..=u64_max).contains(&v) {
        f.errno_unsigned = true;
        return Some((v - u64_max - 1) as i64);
    }
    if (u32_max - MAX_ERRNO + 1..=u32_max).contains(&v) {
        f.errno_unsigned = true;
        return Some((v - u32_max - 1) as i64);
    }
    None
}

/// A latency: one that overflowed a 32-bit `%d` (over 2.1 s) shows negative.
fn latency(v: i128, f: &mut Fields) -> Option<u64> {
    if v < 0 {
        if v >= -(1i128 << 32) {
            f.lat_wrapped = true;
            return Some((v + (1i128 << 32)) as u64);
        }
        return None;
    }
    u64::try_from(v).ok().filter(|&l| l < 1 << 62)
}

/// A rest-of-line that holds the start of another record (two lines run
/// together by concurrent printing): a long timestamp followed by a pid.
fn looks_interleaved(rest: &str) -> bool {
    let mut prev_ts = false;
    for w in rest.split_whitespace() {
        let digits = w.bytes().all(|b| b.is_ascii_digit());
        if prev_ts && digits && w.len() <= 7 {
            return true;
        }
        prev_ts = digits && w.len() >= 10;
    }
    false
}

/// Splits `fullpath filename` / `filename fullpath`: the filename is a
/// dentry name, which never holds a `/`.
fn split_path_name(rest: &str, name_first: bool) -> (&str, &str) {
    let Some((a, b)) = rest.rsplit_once(char::is_whitespace) else {
        return (rest, "");
    };
    let (a, b) = (a.trim_end(), b);
    let first = rest.split_whitespace().next().unwrap_or("");
    let after_first = rest[first.len()..].trim_start();
    if name_first {
        if !first.contains('/') || !after_first.contains('/') {
            return (after_first, first);
        }
        (rest, "")
    } else if !b.contains('/') {
        (a, b)
    } else {
        (rest, "")
    }
}

struct Toks<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Toks<'a> {
    fn next(&mut self) -> Option<(usize, &'a str)> {
        let s = &self.s[self.pos..];
        let start = self.pos + (s.len() - s.trim_start().len());
        let t = &self.s[start..];
        let len = t.find(char::is_whitespace).unwrap_or(t.len());
        if len == 0 {
            return None;
        }
        self.pos = start + len;
        Some((start, &t[..len]))
    }

    fn peek(&self) -> Option<&'a str> {
        let t = self.s[self.pos..].trim_start();
        let len = t.find(char::is_whitespace).unwrap_or(t.len());
        (len > 0).then(|| &t[..len])
    }

    fn rest(&mut self) -> &'a str {
        let r = self.s[self.pos..].trim();
        self.pos = self.s.len();
        r
    }
}

/// Reads `line` against `cols`. `strict` (used to recognise a file) wants
/// single-word file names; otherwise a name or path takes the rest of the
/// line, spaces and all.
pub fn match_line<'a>(line: &'a str, cols: &[Col], strict: bool) -> Result<Fields<'a>, Miss> {
    let mut f = Fields::default();
    let mut t = Toks { s: line, pos: 0 };
    for (i, &col) in cols.iter().enumerate() {
        let miss = |why: String| Miss { fitted: i, why };
        let expected = |found: &str| miss(format!("field {}: expected {}, found '{found}'", i + 1, col.what()));
        let last = i + 1 == cols.len();
        if matches!(col, Col::Name | Col::Path) && !last {
            // A name before other columns is one word.
            let Some((_, tok)) = t.next() else {
                return Err(miss(format!("field {}: expected {}, found the end of the line", i + 1, col.what())));
            };
            if col == Col::Name {
                f.name = Some(tok);
            } else {
                f.path = Some(tok);
            }
            continue;
        }
        let rest_col = matches!(col, Col::Name | Col::Path | Col::PathName | Col::NamePath);
        if rest_col {
            let rest = t.rest();
            if !strict && looks_interleaved(rest) {
                return Err(miss("two lines run together (interleaved output)".into()));
            }
            let words = rest.split_whitespace().count();
            match col {
                Col::Name => {
                    if strict && words > 1 {
                        return Err(expected(rest));
                    }
                    f.name = Some(rest);
                }
                Col::Path => {
                    if rest.is_empty() || (strict && words > 1) {
                        return Err(expected(rest));
                    }
                    f.path = Some(rest);
                }
                _ => {
                    if rest.is_empty() || (strict && words > 2) {
                        return Err(expected(rest));
                    }
                    let (p, n) = split_path_name(rest, col == Col::NamePath);
                    f.path = Some(p);
                    f.name = Some(n);
                }
            }
            continue;
        }
        let Some((start, tok)) = t.next() else {
            return Err(miss(format!("field {}: expected {}, found the end of the line", i + 1, col.what())));
        };
        match col {
            Col::Comm | Col::DoneComm | Col::Disk => {
                if tok.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(expected(tok));
                }
                if col == Col::Comm {
                    f.comm = Some(tok);
                } else if col == Col::Disk {
                    f.disk = Some(tok);
                }
            }
            Col::Func(alts) => {
                if !alts.split('|').any(|a| a == tok) {
                    return Err(expected(tok));
                }
                f.func = Some(tok);
            }
            Col::Rw => {
                f.op = Some(match tok {
                    "R" | "RA" | "RS" => BlockOp::Read,
                    "W" | "WS" | "WA" => BlockOp::Write,
                    "F" => BlockOp::Flush,
                    "D" => BlockOp::Discard,
                    // The kernel's REQ_OP_* number, printed by some versions.
                    "0" | "1" | "2" | "3" | "5" | "9" => BlockOp::from_u8(tok.parse().unwrap_or(255)),
                    _ => return Err(expected(tok)),
                });
            }
            Col::Addr | Col::Hint | Col::Flags | Col::Prot | Col::MapFlags => {
                let Some(v) = hex(tok, matches!(col, Col::Addr | Col::Hint)) else { return Err(expected(tok)) };
                match col {
                    Col::Addr => f.addr = Some(v),
                    Col::Hint => f.hint = Some(v),
                    Col::Flags => f.flags = Some(v as u32),
                    Col::Prot => f.prot = Some(v as u32),
                    _ => f.map_flags = Some(v as u32),
                }
            }
            Col::Off if tok.starts_with("0x") => {
                f.off = Some(hex(tok, true).ok_or_else(|| expected(tok))?);
            }
            _ => {
                let Some((v, used)) = int_prefix(tok) else { return Err(expected(tok)) };
                if used < tok.len() {
                    // `%-6d%-10s` runs a long number into the next word.
                    if cols.get(i + 1).is_some_and(|c| c.is_word())
                        && !tok[used..].starts_with(|c: char| c.is_ascii_digit())
                    {
                        t.pos = start + used;
                    } else {
                        return Err(expected(tok));
                    }
                }
                let ok = match col {
                    Col::Ts => u64::try_from(v).map(|x| f.ts = x).is_ok(),
                    Col::Pid | Col::Tid | Col::DonePid => {
                        let ok = (0..=PID_MAX_LIMIT).contains(&v);
                        if col == Col::Pid {
                            f.pid = Some(v as u32);
                        } else if col == Col::Tid {
                            f.tid = Some(v as u32);
                        }
                        ok
                    }
                    Col::Lat => latency(v, &mut f).map(|l| f.lat = Some(l)).is_some(),
                    Col::QLat => latency(v, &mut f).map(|l| f.qlat = Some(l)).is_some(),
                    Col::Fd => match ret_value(v, &mut f) {
                        Some(fd) if fd <= i64::from(i32::MAX) => {
                            f.fd = Some(fd);
                            true
                        }
                        _ => false,
                    },
                    Col::Ret => ret_value(v, &mut f).map(|r| f.ret = Some(r)).is_some(),
                    Col::Mode => u32::try_from(v).map(|m| f.mode = Some(m)).is_ok(),
                    Col::Bytes | Col::Sector | Col::Req | Col::Len | Col::Off => match u64::try_from(v) {
                        Ok(x) => {
                            match col {
                                Col::Bytes => f.bytes = Some(x),
                                Col::Sector => f.sector = Some(x),
                                Col::Req => f.req = Some(x),
                                Col::Len => f.len = Some(x),
                                _ => f.off = Some(x),
                            }
                            true
                        }
                        Err(_) => false,
                    },
                    _ => false,
                };
                if !ok {
                    return Err(miss(format!("field {}: {} is out of range for {}", i + 1, v, col.what())));
                }
            }
        }
        if col == Col::Ts {
            // bpftrace's time("%H:%M:%S") column, when the script printed one.
            if let Some(tod) = t.peek().and_then(|w| parse_tod(w, None)) {
                t.next();
                f.tod = Some(tod);
            }
        }
    }
    if let Some((_, extra)) = t.next() {
        return Err(Miss { fitted: cols.len(), why: format!("unexpected field '{extra}' after the last column") });
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(spec: &'static str) -> Vec<Col> {
        spec.split_whitespace().map(Col::parse).collect()
    }

    #[test]
    fn bio_done_layout() {
        let c = cols("ts pid comm dpid dcomm disk rw bytes lat");
        let f = match_line(
            "5207185420742     2036324  python3        0        swapper/21     sda  R 4096         176484",
            &c,
            true,
        )
        .unwrap();
        assert_eq!(
            (f.ts, f.pid, f.comm, f.disk, f.op, f.bytes, f.lat),
            (5207185420742, Some(2036324), Some("python3"), Some("sda"), Some(BlockOp::Read), Some(4096), Some(176484))
        );
        // A latency over 2.1 s printed by %d as a negative 32-bit number.
        let f = match_line("100 1 python 0 swapper sda W 8192 -1294967296", &c, true).unwrap();
        assert_eq!((f.lat, f.lat_wrapped), (Some(3_000_000_000), true));
        // Local time column.
        let f = match_line("100 22:24:33  1 python 0 swapper sda W 8192 10", &c, true).unwrap();
        assert_eq!(f.tod, NaiveTime::from_hms_opt(22, 24, 33));
        // Two printf halves of different events run together.
        let e = match_line("100 1 python 0 swapper sda 101 2 python 0 swapper sda W 1 2", &c, false).unwrap_err();
        assert!(e.why.contains("R or W"), "{e:?}");
    }

    #[test]
    fn returns_and_names() {
        let c = cols("ts pid comm ret lat name");
        let f = match_line("1 2 python3 18446744073709551614 300 missing.bin", &c, true).unwrap();
        assert_eq!((f.ret, f.errno_unsigned, f.name), (Some(-2), true, Some("missing.bin")));
        let f = match_line("1 2 python3 4294967287 300 x", &c, true).unwrap();
        assert_eq!(f.ret, Some(-9));
        assert!(match_line("1 2 python3 5207185420742 300 x", &c, true).is_err(), "a timestamp is no return value");
        let f = match_line("1 2 python3 5 300 ", &c, true).unwrap();
        assert_eq!(f.name, Some(""));
        assert!(match_line("1 2 python3 5 300 my file.txt", &c, true).is_err());
        assert_eq!(match_line("1 2 python3 5 300 my file.txt", &c, false).unwrap().name, Some("my file.txt"));
        let e = match_line("1 2 python3 5 300 a.txt 5207185420742 2036324 python3", &c, false).unwrap_err();
        assert!(e.why.contains("interleaved"));
    }

    #[test]
    fn glued_and_paths() {
        let c = cols("ts pid tid =read()|write() fd addr off req ret lat name");
        let f = match_line("1 00:00:01  2036324 2036325read()    3 0x7f00 0 4096 4096 10 a.bin", &c, true).unwrap();
        assert_eq!((f.tid, f.func, f.fd), (Some(2036325), Some("read()"), Some(3)));
        let c = cols("ts pid comm lat pathname");
        let f = match_line("1 2 python3 50 /opt/lib/libc.so.6 libc-2.27.so", &c, true).unwrap();
        assert_eq!((f.path, f.name), (Some("/opt/lib/libc.so.6"), Some("libc-2.27.so")));
        let f = match_line("1 2 python3 50 /opt/lib/tls/libc.so.6 ", &c, true).unwrap();
        assert_eq!((f.path, f.name), (Some("/opt/lib/tls/libc.so.6"), Some("")));
        let c = cols("ts pid fd lat namepath");
        let f = match_line("1 2 3 50 libc-2.27.so /opt/lib/libc.so.6", &c, true).unwrap();
        assert_eq!((f.path, f.name), (Some("/opt/lib/libc.so.6"), Some("libc-2.27.so")));
        let f = match_line("1 2 -2 50  /nope", &c, true).unwrap();
        assert_eq!((f.fd, f.path, f.name), (Some(-2), Some("/nope"), Some("")));
    }

    #[test]
    fn every_layout_parses() {
        for v in variants() {
            assert!(!v.layouts.is_empty(), "{}", v.name);
        }
        assert_eq!(normalize_header("TIMESTAMP         TIME     PID  FD"), "TIMESTAMP PID FD");
    }
}
