//! Perfetto export: the model of an mltrace log (`mltrace_model`) as
//! Perfetto TrackEvent protobuf traces, streamed packet by packet in
//! bounded memory.

pub mod export;
mod packets;
pub mod proto;
#[cfg(test)]
mod tests;
mod wire;

use std::io::{self, Read, Seek, Write};

use mltrace_log::LogReader;
use mltrace_model::plan::PlannedFile;

pub use export::{ExportOptions, PerfettoEncoder};

/// `exit 0`, `exit 2`, `killed by SIGKILL`.
pub use mltrace_log::labels::describe_status;

/// What a one-file export produced.
#[derive(Clone, Debug, Default)]
pub struct ExportStats {
    pub records: u64,
    pub slices: u64,
    pub processes: u64,
    pub packets: u64,
    /// Bytes written, and the packets' size before compression.
    pub bytes: u64,
    pub raw_bytes: u64,
    pub lost_events: u64,
    pub block_requests: u64,
    pub flows: u64,
    /// In-flight counter changes that arrived after later ones were written.
    pub late_counter_changes: u64,
}

/// Exports a whole log into one file with the default options. `on_diag`
/// receives each problem the reader worked around (already described for
/// people).
pub fn export<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    export_with(reader, out, ExportOptions::default(), on_diag)
}

/// One file whatever the log's size (what `--no-split` does).
pub fn export_with<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    opts: ExportOptions,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    let mut one = One { out: Some(out), opts, enc: None };
    let w = mltrace_model::write_plan::one_file(reader, &mut one, on_diag).map_err(io::Error::other)?;
    let enc = one.enc.take().unwrap();
    let (packets, bytes, raw_bytes) = enc.counts();
    let (out, _) = enc.into_inner()?;
    let st = &w.stats;
    Ok((
        out,
        ExportStats {
            records: st.records,
            slices: st.slices,
            processes: st.processes,
            packets,
            bytes,
            raw_bytes,
            lost_events: st.lost_events,
            block_requests: st.block_requests,
            flows: st.flows,
            late_counter_changes: st.late_counter_changes,
        },
    ))
}

/// The one output of [`export_with`]; keeps its encoder to hand the writer back.
struct One<W: Write> {
    out: Option<W>,
    opts: ExportOptions,
    enc: Option<PerfettoEncoder<W>>,
}

impl<W: Write> mltrace_model::write_plan::Output for One<W> {
    type E = PerfettoEncoder<W>;
    fn create(&mut self, _: &PlannedFile) -> io::Result<PerfettoEncoder<W>> {
        let out = self.out.take().ok_or_else(|| io::Error::other("one file only"))?;
        Ok(PerfettoEncoder::new(out, self.opts))
    }
    fn finished(&mut self, enc: PerfettoEncoder<W>) -> io::Result<()> {
        self.enc = Some(enc);
        Ok(())
    }
}
