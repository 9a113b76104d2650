//! Inputs the fuzzer (fuzz/) found or that once broke the reader: each must
//! read to an end (records, diagnostics or an error), never panic.

use std::io::Cursor;
use std::path::Path;

use mltrace_log::frame::{encode_file_header, FrameHeader, FrameKind};
use mltrace_log::LogReader;

/// A `.payload` file is an input of the frame_payload fuzz target: its
/// first byte the record count, the rest one frame's payload, put in a log
/// with valid framing as that target does.
fn log_around_payload(data: &[u8]) -> Vec<u8> {
    let Some((n, payload)) = data.split_first() else { return Vec::new() };
    let compressed = zstd::bulk::compress(payload, 1).unwrap();
    let mut log = encode_file_header(b"{}");
    let h = FrameHeader {
        kind: FrameKind::Records as u8,
        flags: 0,
        payload_len: compressed.len() as u32,
        raw_len: payload.len() as u32,
        records: u32::from(*n),
        payload_crc: crc32fast::hash(&compressed),
        first_ts: 0,
        last_ts: 0,
    };
    log.extend_from_slice(&h.encode());
    log.extend_from_slice(&compressed);
    log
}

#[test]
fn every_kept_input_reads_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            continue;
        }
        let mut bytes = std::fs::read(&p).unwrap();
        if p.extension().is_some_and(|x| x == "payload") {
            bytes = log_around_payload(&bytes);
        }
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
