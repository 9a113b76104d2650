//! Section 6: a long recording, the recorder's RSS and the log's growth
//! over time.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use mltrace_log::*;

use super::summary::summary_growth;
use super::{first_number, log_counts, rss_kib, verdict, write_file};

/// Records so far in a log being written, from its frame headers alone
/// (read on from where the last call stopped; a frame still being written
/// is left for the next call).
#[derive(Default)]
struct LogScan {
    offset: u64,
    records: u64,
}

impl LogScan {
    fn update(&mut self, path: &Path) -> Result<u64> {
        use mltrace_log::frame::{FrameHeader, FILE_HEADER_LEN, FRAME_HEADER_LEN};
        use std::io::{Read, Seek, SeekFrom};
        let mut f = fs::File::open(path)?;
        let len = f.metadata()?.len();
        if self.offset == 0 {
            let mut fh = [0u8; FILE_HEADER_LEN];
            if f.read_exact(&mut fh).is_err() {
                return Ok(0);
            }
            self.offset = (FILE_HEADER_LEN as u64) + u64::from(u32::from_le_bytes(fh[12..16].try_into().unwrap()));
        }
        let mut h = [0u8; FRAME_HEADER_LEN];
        while self.offset + FRAME_HEADER_LEN as u64 <= len {
            f.seek(SeekFrom::Start(self.offset))?;
            f.read_exact(&mut h)?;
            let Some(fh) = FrameHeader::decode(&h) else { break };
            let end = self.offset + (FRAME_HEADER_LEN as u64) + u64::from(fh.payload_len);
            if end > len {
                break;
            }
            self.records += u64::from(fh.records);
            self.offset = end;
        }
        Ok(self.records)
    }
}

/// Least-squares slope of y over x.
fn slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if var > 0.0 {
        cov / var
    } else {
        0.0
    }
}

/// Section 6: a long recording of a data loader at a steady rate, with
/// process, thread and file churn: the recorder's RSS over time and the
/// log's growth, extrapolated to hours. Returns the table's rows.
/// The long recording: in full (`extra` empty, the 8-hour projection of
/// RSS and log), or with `extra` options (`--detail summary`), whose log
/// growth is the figure.
pub fn long_run(dir: &Path, mltrace: &Path, secs: u64, extra: &[&str]) -> Result<String> {
    use std::fmt::Write as _;
    const RATE: u64 = 100_000;
    const FILES: usize = 20_000;
    const WORKERS: u32 = 4;
    const EPOCH_SECS: u64 = 15;
    let many = dir.join("many");
    if !many.join(format!("{:02}/{}", (FILES - 1) % 100, FILES - 1)).exists() {
        eprintln!("bench: preparing {FILES} files in {}", many.display());
        for i in 0..FILES {
            let d = many.join(format!("{:02}", i % 100));
            if i < 100 {
                fs::create_dir_all(&d)?;
            }
            write_file(&d.join(i.to_string()), 4096, i as u64 + 7)?;
        }
    }
    let _ = Command::new("sh").args(["-c", &format!("cat {}/*/* > /dev/null", many.display())]).status();
    let log = dir.join("long.bin");
    let errors = dir.join("long.stderr");
    let mut child = Command::new(mltrace)
        .args(["record", "-q", "-f", "--gpu", "off"])
        .args(extra)
        .arg("-o")
        .arg(&log)
        .arg("--")
        .arg(dir.join("churn"))
        .arg(&many)
        .args([FILES.to_string(), RATE.to_string(), secs.to_string(), WORKERS.to_string(), EPOCH_SECS.to_string()])
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&errors)?)
        .spawn()?;
    let pid = child.id();
    let every = if secs >= 120 { 5.0 } else { 2.0 };
    let t0 = Instant::now();
    struct Point {
        t: f64,
        rss: u64,
        anon: u64,
        bytes: u64,
        records: u64,
    }
    let mut curve: Vec<Point> = Vec::new();
    let mut hwm = 0;
    let mut scan = LogScan::default();
    let status = loop {
        let next = every * (curve.len() + 1) as f64;
        while t0.elapsed().as_secs_f64() < next && child.try_wait()?.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let Some((rss, peak, anon)) = rss_kib(pid) else { continue };
        hwm = hwm.max(peak);
        let bytes = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let records = scan.update(&log).unwrap_or(scan.records);
        let t = t0.elapsed().as_secs_f64();
        eprint!(
            "\rbench: long run {t:>5.0}/{secs} s: RSS {:.1} MiB, log {:.1} MB   ",
            rss as f64 / 1024.0,
            bytes as f64 / 1e6
        );
        let _ = std::io::stderr().flush();
        curve.push(Point { t, rss, anon, bytes, records });
    };
    eprintln!();
    let duration = t0.elapsed().as_secs_f64();
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().context("stdout")?, &mut stdout)?;
    if !status.success() {
        bail!("the long run failed ({:?}): {}", status.code(), fs::read_to_string(&errors).unwrap_or_default());
    }
    if curve.is_empty() {
        bail!("the long run ended before its first sample");
    }
    let achieved = first_number(&stdout)?;
    let (records, lost, _) = log_counts(&log)?;
    let size = fs::metadata(&log)?.len();
    let mut t = String::new();
    if !extra.is_empty() {
        return Ok(summary_growth(&log, extra, secs, duration, achieved, records, lost, size));
    }
    let _ = writeln!(
        t,
        "\n== 6. Long recording: {secs} s of a data loader at {RATE} syscalls/s ({WORKERS} workers x 2 threads \
         respawned every {EPOCH_SECS} s, a short-lived thread per thread per second, {FILES} files) =="
    );
    let _ = writeln!(
        t,
        "  {:>7} {:>9} {:>9} {:>9} {:>12}   (VmRSS includes the 32 MiB BPF ring, mapped twice; anon = the recorder's heap)",
        "t (s)",
        "RSS MiB",
        "anon MiB",
        "log MB",
        "events"
    );
    let mib = |k: u64| k as f64 / 1024.0;
    let stride = curve.len().div_ceil(20);
    for (i, p) in curve.iter().enumerate() {
        if i % stride == 0 || i + 1 == curve.len() {
            let _ = writeln!(
                t,
                "  {:>7.0} {:>9.1} {:>9.1} {:>9.1} {:>12}",
                p.t,
                mib(p.rss),
                mib(p.anon),
                p.bytes as f64 / 1e6,
                p.records
            );
        }
    }
    let (first, last) = (&curve[0], &curve[curve.len() - 1]);
    let max = curve.iter().map(|p| p.rss).max().unwrap_or(0);
    // Slopes in MiB/h after the start-up (the ring and buffers filling),
    // and over the second half: what is left of growth once buffers sized
    // by the largest frame so far have settled, projected to 8 hours.
    let warm = (duration / 4.0).min(60.0);
    let slope_from = |from: f64, f: &dyn Fn(&Point) -> u64| {
        slope(&curve.iter().filter(|p| p.t >= from).map(|p| (p.t / 3600.0, mib(f(p)))).collect::<Vec<_>>())
    };
    let (per_hour, anon_per_hour) = (slope_from(warm, &|p| p.rss), slope_from(warm, &|p| p.anon));
    let late_per_hour = slope_from(duration / 2.0, &|p| p.rss);
    let at_8h = mib(last.rss) + late_per_hour.max(0.0) * (8.0 - duration / 3600.0).max(0.0);
    let gb_per_hour = size as f64 / duration * 3600.0 / 1e9;
    let _ = writeln!(
        t,
        "  {records} events ({:.0}/s; the workload did {achieved} syscalls/s), {lost} lost, log {:.1} MB \
         ({:.2} B/event)",
        records as f64 / duration,
        size as f64 / 1e6,
        size as f64 / records.max(1) as f64
    );
    let _ = writeln!(
        t,
        "  recorder RSS: first {:.1}, last {:.1}, max {:.1} MiB, peak (VmHWM) {:.1} MiB; slope after {warm:.0} s \
         {per_hour:+.1} MiB/h (anon {anon_per_hour:+.1} MiB/h), over the second half {late_per_hour:+.1} MiB/h: \
         {at_8h:.1} MiB at 8 h  (target < 100 MiB, flat: {})",
        mib(first.rss),
        mib(last.rss),
        mib(max),
        mib(hwm),
        verdict(hwm < 100 * 1024 && at_8h < 100.0)
    );
    let _ = writeln!(
        t,
        "  log growth: {gb_per_hour:.2} GB/h, {:.1} GB in 8 h  (target < 1 GB/h: {})",
        gb_per_hour * 8.0,
        verdict(gb_per_hour < 1.0)
    );
    let coarse = rounded_size(&log, &dir.join("long-128ns.bin"), 128)?;
    let per_event = coarse as f64 / records.max(1) as f64;
    let _ = writeln!(
        t,
        "  the same records at record --time-resolution 128ns (rewritten frame by frame): {:.1} MB, {per_event:.2} \
         B/event, {:.2} GB/h  (target <= 2.8 B/event: {}; as recorded, in ns: {})",
        coarse as f64 / 1e6,
        coarse as f64 / duration * 3600.0 / 1e9,
        verdict(per_event <= 2.8),
        verdict(size as f64 / records.max(1) as f64 <= 2.8)
    );
    Ok(t)
}

/// Writes `log`'s records again into `out`, frame for frame, with every
/// time rounded to `ns` as `record --time-resolution` does; its size.
fn rounded_size(log: &Path, out: &Path, ns: u64) -> Result<u64> {
    let mut r = LogReader::open(log)?;
    let mut header = r.header().clone();
    header.time_resolution_ns = Some(ns);
    let file = std::io::BufWriter::new(fs::File::create(out)?);
    let mut w = RecordWriter::new(file, &header)?.with_frame_records(usize::MAX);
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            w.push_with(|e| {
                let mut rec = rec;
                rec.map_strs(|id| e.intern(f.str(id)));
                rec
            })?;
        }
        w.cut()?;
    }
    w.finish(&r.trailer().cloned().unwrap_or_default())?;
    let size = fs::metadata(out)?.len();
    let _ = fs::remove_file(out);
    Ok(size)
}
