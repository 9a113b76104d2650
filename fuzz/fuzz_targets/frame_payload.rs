//! Arbitrary frame payloads inside a valid log (correct framing, zstd and
//! checksums), so the fuzzer reaches the column decoder that the checksums
//! shield in `log_reader`.
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mltrace_log::frame::{encode_file_header, FrameHeader, FrameKind};
use mltrace_log::LogReader;

fuzz_target!(|data: &[u8]| {
    let (records, payload) = match data.split_first() {
        Some((n, rest)) => (u32::from(*n), rest),
        None => return,
    };
    let Ok(compressed) = zstd::bulk::compress(payload, 1) else { return };
    let mut log = encode_file_header(b"{}");
    let h = FrameHeader {
        kind: FrameKind::Records as u8,
        flags: 0,
        payload_len: compressed.len() as u32,
        raw_len: payload.len() as u32,
        records,
        payload_crc: crc32fast::hash(&compressed),
        first_ts: 0,
        last_ts: 0,
    };
    log.extend_from_slice(&h.encode());
    log.extend_from_slice(&compressed);
    let Ok(mut r) = LogReader::new(Path::new("fuzz.bin"), Cursor::new(log)) else { return };
    while let Ok(Some(mut f)) = r.next_frame() {
        while let Some(rec) = f.next_record() {
            let _ = rec.end_ts();
        }
    }
    let _ = r.take_diagnostics();
});
