//! Recognising a file's format from its first lines.

use std::path::Path;

use crate::bpftrace::layout::{match_line, normalize_header, variants, Variant};
use crate::bpftrace::{classify_other, is_data, score, Other};
use crate::error::ImportError;
use crate::{mllog, mpstat, nvsmi, pmon, Format};

/// What a file was recognised as.
#[derive(Debug)]
pub struct Detected {
    pub format: Format,
    /// The layout of a bpftrace output.
    pub variant: Option<&'static Variant>,
    pub description: String,
}

/// The format a file's name suggests (`trace_read.out`, `cpu.out`): only a
/// tie-breaker, the content decides.
fn name_hint(path: &Path) -> Option<Format> {
    let n = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    let has = |s: &str| n.contains(s);
    Some(if has("time_align") {
        Format::TimeAlign
    } else if has("bio") {
        Format::Bio
    } else if has("vfs_rw") || has("read_write") {
        Format::VfsRw
    } else if has("openat") || has("open") {
        Format::Openat
    } else if has("read") {
        Format::Read
    } else if has("write") {
        Format::Write
    } else if has("close") {
        Format::Close
    } else if has("create") || has("_del") {
        Format::CreateDel
    } else if has("mmap") {
        Format::Mmap
    } else if has("dcgm") {
        Format::Dcgmi
    } else if has("dmon") {
        Format::Dmon
    } else if has("pmon") || has("gpu") {
        Format::Pmon
    } else if has("mpstat") || has("cpu") {
        Format::Mpstat
    } else if has("mllog") || has("ulog") {
        Format::Mllog
    } else {
        return None;
    })
}

fn nvsmi_kind(head: &[String]) -> Option<Format> {
    let mut cols = nvsmi::Columns::default();
    for l in head {
        if cols.header(l) && !cols.names.is_empty() {
            return Some(if cols.index("pid").is_some() { Format::Pmon } else { Format::Dmon });
        }
    }
    let rows = head.iter().filter(|l| !l.trim().is_empty()).take(20).collect::<Vec<_>>();
    (!rows.is_empty() && rows.iter().all(|l| pmon::looks_like_row(l))).then_some(Format::Pmon)
}

fn is_mpstat(head: &[String]) -> bool {
    let nonempty = head.iter().filter(|l| !l.trim().is_empty()).count();
    let shaped = head.iter().filter(|l| mpstat::looks_like(l)).count();
    let system = head.iter().any(|l| mpstat::system_line(l).is_some());
    shaped > 0 && (system || shaped * 2 >= nonempty)
}

fn is_mllog(head: &[String]) -> bool {
    let nonempty = head.iter().filter(|l| !l.trim().is_empty()).count();
    let events = head.iter().filter(|l| matches!(mllog::parse(l), Ok(Some(_)))).count();
    events > 0 && (head.iter().any(|l| l.contains(":::MLLOG")) || events * 2 >= nonempty)
}

/// The bpftrace layout that fits `head` best: most lines fitting, then the
/// header, then the file name, then the table's order.
fn best_variant(path: &Path, head: &[String], only: Option<Format>) -> Option<(&'static Variant, usize, Header)> {
    let header = head
        .iter()
        .filter(|l| !is_data(l))
        .filter(|l| classify_other(l) == Other::Header && l.contains("TIMESTAMP"))
        .map(|l| normalize_header(l))
        .collect::<Vec<_>>();
    let hint = name_hint(path);
    variants()
        .iter()
        .enumerate()
        .filter(|(_, v)| only.is_none_or(|f| v.format == f))
        .map(|(i, v)| {
            let h = v.headers.iter().any(|vh| header.contains(vh));
            (v, score(v, head), h, hint == Some(v.format), i)
        })
        .max_by_key(|&(_, s, h, n, i)| (s, h, n, std::cmp::Reverse(i)))
        .map(|(v, s, h, _, _)| {
            let header = match (h, header.is_empty()) {
                (true, _) => Header::Matches,
                (false, true) => Header::None,
                (false, false) => Header::Misleading,
            };
            (v, s, header)
        })
}

/// How a bpftrace output's column header relates to the layout chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Header {
    Matches,
    None,
    /// Several script versions print `comm` under an `FD` heading.
    Misleading,
}

fn describe_bpftrace(v: &Variant, head: &[String], header: Header) -> String {
    let mut d = format!("{}, {}", v.format.label(), v.name);
    let timed = head
        .iter()
        .filter(|l| is_data(l))
        .find_map(|l| v.layouts.iter().find_map(|lay| match_line(l, &lay.cols, false).ok()))
        .is_some_and(|f| f.tod.is_some());
    if timed && v.format != Format::TimeAlign {
        d.push_str(", with local-time column");
    }
    match header {
        Header::Matches => {}
        Header::None => d.push_str(" (no header: recognised from its lines)"),
        Header::Misleading => d.push_str(" (its header names other columns: read by what its lines hold)"),
    }
    d
}

pub fn detect(path: &Path, head: &[String], forced: Option<Format>) -> Result<Detected, ImportError> {
    let simple = |format: Format| Detected { format, variant: None, description: format.label().to_string() };
    if let Some(f) = forced {
        if !f.is_bpftrace() {
            return Ok(simple(f));
        }
        let (v, _, h) = best_variant(path, head, Some(f)).expect("every bpftrace format has layouts");
        return Ok(Detected { format: f, variant: Some(v), description: describe_bpftrace(v, head, h) });
    }
    if is_mllog(head) {
        return Ok(simple(Format::Mllog));
    }
    if head.iter().any(|l| crate::dcgmi::is_header(l)) {
        return Ok(simple(Format::Dcgmi));
    }
    if let Some(f) = nvsmi_kind(head) {
        return Ok(simple(f));
    }
    if is_mpstat(head) {
        return Ok(simple(Format::Mpstat));
    }
    if let Some(f) = crate::visuals::detect(head) {
        return Ok(simple(f));
    }
    match best_variant(path, head, None) {
        Some((v, s, h)) if s > 0 || h == Header::Matches => {
            Ok(Detected { format: v.format, variant: Some(v), description: describe_bpftrace(v, head, h) })
        }
        _ => {
            let first = head.iter().find(|l| !l.trim().is_empty());
            let reason = match first {
                None => "the file is empty".to_string(),
                Some(l) => format!("first line: '{}'", l.chars().take(80).collect::<String>()),
            };
            Err(ImportError::Unrecognised { path: path.to_path_buf(), reason })
        }
    }
}
