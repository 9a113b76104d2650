//! Any bytes given to the log reader: it must end with records, diagnostics
//! or an error, never a panic, a hang or an absurd allocation.
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mltrace_log::{LogReader, Record};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = LogReader::new(Path::new("fuzz.bin"), Cursor::new(data)) else { return };
    while let Ok(Some(mut f)) = r.next_frame() {
        while let Some(rec) = f.next_record() {
            // Touch the strings the way exporters do.
            if let Record::Io(x) = rec {
                let _ = f.str_lossy(x.path);
            }
        }
    }
    let header = r.header().clone();
    for d in r.take_diagnostics() {
        let _ = d.describe(&header);
    }
});
