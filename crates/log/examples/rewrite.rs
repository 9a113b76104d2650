//! Reads a log of any format this version reads and writes its records
//! again in the current one: `rewrite IN OUT [FRAME_RECORDS [ZSTD_LEVEL]]`.
//! Prints both sizes, so that an encoding change (or a frame size, or a
//! level) is measured on the same records side by side: two recordings of
//! one workload differ by more than most such changes. `RESOLUTION_NS`
//! rounds the times as `record --time-resolution` does.

use std::path::Path;

use mltrace_log::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = match &args[..] {
        [_, i, o, ..] if args.len() <= 6 => (i, o),
        _ => return Err("usage: rewrite IN OUT [FRAME_RECORDS [ZSTD_LEVEL [RESOLUTION_NS]]]".into()),
    };
    let per_frame = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(DEFAULT_FRAME_RECORDS);
    let level = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(3);
    let mut r = LogReader::open(Path::new(input))?;
    let out = std::io::BufWriter::new(std::fs::File::create(output)?);
    let mut header = r.header().clone();
    if let Some(ns) = args.get(5) {
        header.time_resolution_ns = Some(ns.parse()?);
    }
    let mut w = RecordWriter::with_level(out, &header, level)?.with_frame_records(per_frame);
    let mut n = 0u64;
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            w.push_with(|e| {
                let mut rec = rec;
                rec.map_strs(|id| e.intern(f.str(id)));
                rec
            })?;
            n += 1;
        }
    }
    for d in r.take_diagnostics() {
        eprintln!("{input}: {}", d.describe(r.header()));
    }
    let (major, minor) = r.version();
    w.finish(&r.trailer().cloned().unwrap_or_default())?;
    let (a, b) = (std::fs::metadata(input)?.len(), std::fs::metadata(output)?.len());
    println!(
        "{n} records: {input} (format {major}.{minor}) {a} bytes, {:.2} B/record; {output} (format {}.{}) {b} bytes, \
         {:.2} B/record",
        a as f64 / n.max(1) as f64,
        frame::FORMAT_MAJOR,
        frame::FORMAT_MINOR,
        b as f64 / n.max(1) as f64
    );
    Ok(())
}
