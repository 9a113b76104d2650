//! Section 1b's replay: the records one recording's consumer took
//! (`MLTRACE_RING_DUMP`), decoded and encoded again by the recorder's own
//! decoder on an otherwise idle machine: what decoding costs by itself,
//! without the workload on the same CPUs and without reading records the
//! programs wrote on another CPU. The live consumer's cost less this is
//! what its surroundings cost it.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use mltrace_capture::decode::KernelDecoder;
use mltrace_log::{EncodedFrame, FrameEncoder, DEFAULT_FRAME_RECORDS};

/// Passes over the records; each starts from a fresh decoder, as a
/// recording does.
const PASSES: usize = 7;

pub(crate) struct Replay {
    pub(crate) records: usize,
    /// ns a record: the first pass (cold), and the best.
    pub(crate) first: f64,
    pub(crate) best: f64,
}

/// Replays `dump` [`PASSES`] times.
pub(crate) fn replay(dump: &Path) -> Result<Replay> {
    let recs = mltrace_capture::dump::read(dump).context("the ring dump")?;
    let mut frame = EncodedFrame::default();
    let mut times = Vec::with_capacity(PASSES);
    // The recorder's encoder lives as long as it does (its columns keep
    // their capacity from frame to frame): one for all the passes.
    let mut enc = FrameEncoder::new();
    for _ in 0..PASSES {
        let mut dec = KernelDecoder::with_file_generation(recs.pid, mltrace_capture::files::GENERATION);
        // As the recorder's consumer keeps it (recorder::consumer::decoder).
        dec.keep_replaced_names(recs.summary);
        let start = Instant::now();
        // Each record looked at ahead as the consumer's merge does.
        let ahead = mltrace_capture::ring::AHEAD as usize;
        for r in recs.iter().take(ahead) {
            dec.ahead(r);
        }
        let mut later = recs.iter().skip(ahead);
        for r in recs.iter() {
            if let Some(a) = later.next() {
                dec.ahead(a);
            }
            dec.decode(r, &mut enc);
            if enc.len() >= DEFAULT_FRAME_RECORDS {
                enc.finish_into(&mut frame);
                // As the consumer's rounds do (no kernel side to tell).
                dec.files_mut().take_forgotten();
                dec.files_mut().release_retired();
            }
        }
        enc.finish_into(&mut frame);
        times.push(start.elapsed().as_nanos() as f64);
        std::hint::black_box(&frame);
    }
    let n = recs.len().max(1) as f64;
    Ok(Replay {
        records: recs.len(),
        first: times[0] / n,
        best: times.iter().copied().fold(f64::INFINITY, f64::min) / n,
    })
}
