//! `mltrace merge`: the logs of several hosts as one log (see
//! `mltrace_log::hosts` for how a record says its host).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use mltrace_log::{
    global_pid, hosts::MAX_HOSTS, ClockAnchor, Header, HostInfo, LogReader, LostTotal, Record, RecordWriter, StrId,
    Trailer,
};

#[derive(clap::Args)]
pub struct Args {
    /// The logs to merge (from record or import), one or more per host
    #[arg(required = true, num_args = 1.., value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// Where to write the merged log
    #[arg(short, long)]
    output: PathBuf,
    /// Overwrite the output file if it exists
    #[arg(short, long)]
    force: bool,
    /// Move a host's clock by hand after the REALTIME alignment, e.g.
    /// `nodeB=+1.2ms`, `nodeA=-350us` (units ns, us, ms, s); repeatable
    #[arg(long, value_name = "HOST=OFFSET")]
    offset: Vec<String>,
}

/// `+1.2ms` -> 1_200_000 ns.
pub fn parse_offset(s: &str) -> Option<i64> {
    let s = s.trim();
    let (sign, body) = match s.as_bytes().first()? {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let split = body.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let mult = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "" => 1e9,
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    v.is_finite().then(|| (sign * v * mult).round() as i64)
}

/// `+1.234 ms`: an offset for people.
fn show_ns(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "+" };
    if a >= 1e9 {
        format!("{sign}{:.6} s", a / 1e9)
    } else if a >= 1e6 {
        format!("{sign}{:.3} ms", a / 1e6)
    } else {
        format!("{sign}{:.1} µs", a / 1e3)
    }
}

/// One input: its reader and what it says about its host.
struct Input {
    path: PathBuf,
    /// Read ahead: the merged header holds it.
    trailer: Option<Trailer>,
    reader: LogReader<std::io::BufReader<std::fs::File>>,
    header: Header,
}

/// Checks the inputs can be one log, names the hosts, and computes each
/// one's clock offset; returns the hosts and the merged log's anchor.
fn plan(inputs: &[Input], manual: &HashMap<String, i64>) -> anyhow::Result<(Vec<HostInfo>, usize)> {
    if inputs.len() > MAX_HOSTS {
        bail!("{} logs: at most {MAX_HOSTS} can be merged into one", inputs.len());
    }
    for (i, a) in inputs.iter().enumerate() {
        if a.header.is_merged() {
            bail!(
                "{}: already a merged log ({} hosts): merge the hosts' own logs instead",
                a.path.display(),
                a.header.hosts.len()
            );
        }
        for b in &inputs[..i] {
            let (ha, hb) = (&a.header, &b.header);
            let same_file = std::fs::canonicalize(&a.path).ok() == std::fs::canonicalize(&b.path).ok();
            // The same recording copied under another name has the same
            // host, boot, recorder and start instant.
            let same_run = ha.host == hb.host
                && ha.boot_id == hb.boot_id
                && ha.recorder_pid == hb.recorder_pid
                && ha.start == hb.start
                && ha.root_pid == hb.root_pid;
            if same_file || same_run {
                bail!(
                    "{} and {} are the same recording (host {}, started {}): give each log once",
                    b.path.display(),
                    a.path.display(),
                    name_or(&ha.host),
                    describe_start(ha.start)
                );
            }
            if ha.host == hb.host && !ha.boot_id.is_empty() && !hb.boot_id.is_empty() && ha.boot_id != hb.boot_id {
                bail!(
                    "{} and {} are both from host {} but from two boots (boot ids {} and {}): \
                     their processes and clocks cannot be told apart; merge the logs of one boot",
                    b.path.display(),
                    a.path.display(),
                    name_or(&ha.host),
                    hb.boot_id,
                    ha.boot_id
                );
            }
        }
    }
    // Names: the host name; a second log of one host (a recorder per rank) is `host#2`.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let names: Vec<String> = inputs
        .iter()
        .map(|i| {
            let base = name_or(&i.header.host).to_string();
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            if *n == 1 {
                base
            } else {
                format!("{base}#{n}")
            }
        })
        .collect();
    for h in manual.keys() {
        if !names.contains(h) {
            bail!("--offset {h}=...: no host {h} among the logs (hosts: {})", names.join(", "));
        }
    }
    // REALTIME - BOOTTIME of each host: the wall time it booted. The
    // log's clock is the BOOTTIME of the host that booted first (the
    // smallest difference), so every offset is >= 0 before corrections
    // and no timestamp has to go below 0.
    let diff = |a: &ClockAnchor| (a.realtime_ns != 0).then(|| a.realtime_ns as i128 - a.boottime_ns as i128);
    let reference = inputs.iter().filter_map(|i| diff(&i.header.start)).min();
    let clock_of = inputs.iter().position(|i| reference.is_some() && diff(&i.header.start) == reference).unwrap_or(0);
    let hosts = inputs
        .iter()
        .zip(names)
        .map(|(i, name)| {
            let h = &i.header;
            let manual_ns = manual.get(&name).copied().unwrap_or(0);
            let auto = match (diff(&h.start), reference) {
                (Some(d), Some(r)) => (d - r) as i64,
                _ => 0,
            };
            HostInfo {
                name,
                boot_id: h.boot_id.clone(),
                kernel: h.kernel.clone(),
                cpu_count: h.cpu_count,
                clock_offset_ns: auto + manual_ns,
                manual_offset_ns: manual_ns,
                file: i.path.display().to_string(),
                header: h.clone(),
                trailer: i.trailer.clone(),
            }
        })
        .collect();
    Ok((hosts, clock_of))
}

fn name_or(h: &str) -> &str {
    if h.is_empty() {
        "(unnamed)"
    } else {
        h
    }
}

fn describe_start(a: ClockAnchor) -> String {
    if a.realtime_ns == 0 {
        return format!("BOOTTIME {} ns", a.boottime_ns);
    }
    chrono::DateTime::from_timestamp_nanos(a.realtime_ns as i64).format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

/// A frame's records with their strings, owned, so that every input can
/// have one frame open while the merge takes from whichever is earliest.
#[derive(Default)]
struct Buffered {
    records: Vec<Record>,
    strings: Vec<Vec<u8>>,
    next: usize,
}

impl Buffered {
    fn peek(&self) -> Option<&Record> {
        self.records.get(self.next)
    }
}

/// Loads `input`'s next frame that has records; false at its end.
fn refill(input: &mut Input, host: usize, offset: i64, buf: &mut Buffered) -> anyhow::Result<bool> {
    buf.records.clear();
    buf.strings.clear();
    buf.next = 0;
    while buf.records.is_empty() {
        let Some(mut f) = input.reader.next_frame().with_context(|| format!("reading {}", input.path.display()))?
        else {
            return Ok(false);
        };
        let mut ids: HashMap<u32, u32> = HashMap::new();
        while let Some(mut r) = f.next_record() {
            r.map_strs(|id| {
                let n = *ids.entry(id.0).or_insert_with(|| {
                    buf.strings.push(f.str(id).to_vec());
                    (buf.strings.len() - 1) as u32
                });
                StrId(n)
            });
            r.map_pids(|p| global_pid(host, p));
            r.shift_ts(offset);
            buf.records.push(r);
        }
    }
    Ok(true)
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let mut manual = HashMap::new();
    for o in &a.offset {
        let (h, v) =
            o.split_once('=').with_context(|| format!("--offset {o}: expected HOST=OFFSET, e.g. nodeB=+1.2ms"))?;
        let ns =
            parse_offset(v).with_context(|| format!("--offset {o}: {v} is not an offset such as +1.2ms or -350us"))?;
        manual.insert(h.to_string(), ns);
    }
    let mut inputs = Vec::new();
    for p in &a.logs {
        let mut reader = crate::open_log(p)?;
        let header = reader.header().clone();
        let trailer = reader.peek_trailer().with_context(|| format!("reading {}", p.display()))?;
        inputs.push(Input { path: p.clone(), reader, header, trailer });
    }
    let (hosts, clock_of) = plan(&inputs, &manual)?;
    let anchor = inputs[clock_of].header.start;
    let out_path = &a.output;
    if inputs.iter().any(|i| std::fs::canonicalize(&i.path).ok() == std::fs::canonicalize(out_path).ok()) {
        bail!("{}: the output is one of the inputs", out_path.display());
    }
    for h in &hosts {
        let how = match (h.header.start.realtime_ns, h.manual_offset_ns) {
            (0, _) => " (no REALTIME anchor in the log: not aligned)".to_string(),
            (_, 0) => String::new(),
            (_, m) => format!(" (with {} by hand)", show_ns(m)),
        };
        eprintln!("mltrace: {}: {} clock offset {}{how}", h.name, h.file, show_ns(h.clock_offset_ns));
    }

    let mut header = inputs[0].header.clone();
    // The log's clock is that host's (BOOTTIME, or an import's REALTIME).
    header.start = anchor;
    header.clock = inputs[clock_of].header.clock.clone();
    header.source = "merge".into();
    header.mltrace_version = mltrace_log::VERSION.into();
    // One job runs one command on every node; else each host's, named.
    header.command = if inputs.iter().all(|i| i.header.command == inputs[0].header.command) {
        inputs[0].header.command.clone()
    } else {
        let each = hosts.iter().zip(&inputs).map(|(h, i)| format!("{}: {}", h.name, i.header.command.join(" ")));
        vec![each.collect::<Vec<_>>().join("; ")]
    };
    header.diskstats = None;
    header.hosts = hosts.clone();
    // Hosts' times move by their clock offsets: all of them go on the
    // coarsest host's grid, so that the log's resolution holds for all.
    header.time_resolution_ns = inputs.iter().filter_map(|i| i.header.time_resolution_ns).max();

    if out_path.exists() && !a.force {
        bail!("{} exists (--force replaces it)", out_path.display());
    }
    // Written beside, renamed at the end: a failed merge leaves no log.
    let tmp = crate::import::temp_path(out_path);
    let r = write(&mut inputs, &hosts, &header, anchor, &tmp);
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let written = r?;
    std::fs::rename(&tmp, out_path).with_context(|| format!("renaming {} to {}", tmp.display(), out_path.display()))?;
    eprintln!("mltrace: {} hosts, {written} records merged into {}", hosts.len(), out_path.display());
    Ok(0)
}

/// Writes the merged log at `out_path`; returns the records written.
fn write(
    inputs: &mut [Input],
    hosts: &[HostInfo],
    header: &Header,
    anchor: ClockAnchor,
    out_path: &Path,
) -> anyhow::Result<u64> {
    let file = std::fs::File::create(out_path).with_context(|| format!("creating {}", out_path.display()))?;
    let mut w = RecordWriter::new(std::io::BufWriter::with_capacity(1 << 20, file), header)
        .with_context(|| format!("writing {}", out_path.display()))?;
    let mut bufs: Vec<Buffered> = (0..inputs.len()).map(|_| Buffered::default()).collect();
    let mut live: Vec<bool> = vec![true; inputs.len()];
    for (i, inp) in inputs.iter_mut().enumerate() {
        live[i] = refill(inp, i, hosts[i].clock_offset_ns, &mut bufs[i])?;
    }
    let mut written = 0u64;
    // The earliest end among the inputs' next records: each log is
    // nearly in end order, so the merge is too.
    let earliest = |live: &[bool], bufs: &[Buffered]| {
        (0..live.len()).filter(|&i| live[i]).min_by_key(|&i| bufs[i].peek().map_or(u64::MAX, |r| r.end_ts()))
    };
    while let Some(i) = earliest(&live, &bufs) {
        let b = &mut bufs[i];
        let rec = b.records[b.next];
        b.next += 1;
        w.push_with(|e| {
            let mut r = rec;
            r.map_strs(|id| e.intern(&b.strings[id.0 as usize]));
            r
        })
        .with_context(|| format!("writing {}", out_path.display()))?;
        written += 1;
        if b.peek().is_none() {
            live[i] = refill(&mut inputs[i], i, hosts[i].clock_offset_ns, &mut bufs[i])?;
        }
    }

    let mut warnings = Vec::new();
    let mut trailer = Trailer { records: written, ..Default::default() };
    for (i, inp) in inputs.iter_mut().enumerate() {
        let h = &hosts[i];
        for d in inp.reader.take_diagnostics() {
            warnings.push(format!("{}: {}", h.name, d.describe(&inp.header)));
        }
        let Some(t) = inp.reader.trailer().cloned() else {
            warnings.push(format!("{}: {} has no trailer (the recorder was stopped hard)", h.name, inp.path.display()));
            continue;
        };
        for l in &t.lost {
            match trailer.lost.iter_mut().find(|x| x.kind == l.kind) {
                Some(x) => x.count += l.count,
                None => trailer.lost.push(LostTotal { kind: l.kind.clone(), count: l.count }),
            }
        }
        warnings.extend(t.warnings.iter().map(|w| format!("{}: {w}", h.name)));
        if let Some(s) = &t.stopped_early {
            warnings.push(format!("{}: stopped early: {s}", h.name));
        }
        trailer.sampler_cpu_ns += t.sampler_cpu_ns;
        if i == 0 {
            trailer.exit_status = t.exit_status;
        }
        // The job ends when its last host does (on the log's clock).
        if t.end.boottime_ns != 0 {
            let end = t.end.boottime_ns.saturating_add_signed(h.clock_offset_ns);
            if end > trailer.end.boottime_ns {
                let realtime = anchor.realtime_ns.saturating_add(end.saturating_sub(anchor.boottime_ns));
                trailer.end = ClockAnchor { boottime_ns: end, realtime_ns: realtime, monotonic_ns: 0 };
            }
        }
    }
    for w in &warnings {
        eprintln!("mltrace: warning: {w}");
    }
    trailer.warnings = warnings;
    use std::io::Write;
    w.finish(&trailer).and_then(|mut b| b.flush()).with_context(|| format!("writing {}", out_path.display()))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_parse_with_units() {
        assert_eq!(parse_offset("+1.2ms"), Some(1_200_000));
        assert_eq!(parse_offset("-350us"), Some(-350_000));
        assert_eq!(parse_offset("2s"), Some(2_000_000_000));
        assert_eq!(parse_offset("15ns"), Some(15));
        assert_eq!(parse_offset("1.5"), Some(1_500_000_000));
        assert_eq!(parse_offset("3 hours"), None);
        assert_eq!(parse_offset("ms"), None);
        assert_eq!(show_ns(-1_234_000), "-1.234 ms");
    }
}
