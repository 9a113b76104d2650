//! Inputs the fuzzer (fuzz/) found or that once broke the reader: each must
//! read to an end (records, diagnostics or an error), never panic.

use std::io::Cursor;
use std::path::Path;

use mltrace_log::LogReader;

#[test]
fn every_kept_input_reads_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        if let Ok(mut r) = LogReader::new(&p, Cursor::new(bytes)) {
            while let Ok(Some(mut f)) = r.next_frame() {
                while let Some(rec) = f.next_record() {
                    let _ = rec.end_ts();
                }
            }
            let header = r.header().clone();
            for d in r.take_diagnostics() {
                let _ = d.describe(&header);
            }
        }
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}
