//! Chrome trace-event JSON export: the model of an mltrace log (the same
//! slices, counters, flows, names and args as the Perfetto export) as a
//! JSON object `{"metadata":…, "traceEvents":[…], "mltraceTrailer":…}`
//! that chrome://tracing, the Perfetto UI and other trace viewers open.
//! Written event by event in bounded memory; see [`export`].

mod export;
mod json;
mod naming;

use std::io::{self, Read, Seek, Write};

use mltrace_log::LogReader;
use mltrace_model::plan::PlannedFile;

pub use export::ChromeEncoder;

/// What a one-file export produced.
#[derive(Clone, Debug, Default)]
pub struct ExportStats {
    pub records: u64,
    /// Complete ("X") events: syscalls, block requests, phases.
    pub slices: u64,
    /// Counter ("C") samples.
    pub counters: u64,
    /// Flow starts ("s"), as the Perfetto export counts them; each has an
    /// end ("f") on the request it led to, when the log has that request.
    pub flows: u64,
    pub processes: u64,
    /// Every JSON event, metadata included.
    pub events: u64,
    pub bytes: u64,
    pub lost_events: u64,
    pub block_requests: u64,
    /// In-flight counter changes that arrived after later ones were written.
    pub late_counter_changes: u64,
}

/// Exports a whole log as one Chrome JSON file. `on_diag` receives each
/// problem the reader worked around (already described for people).
pub fn export<R: Read + Seek, W: Write>(
    reader: &mut LogReader<R>,
    out: W,
    on_diag: &mut dyn FnMut(String),
) -> io::Result<(W, ExportStats)> {
    let mut one = One { out: Some(out), enc: None };
    let w = mltrace_model::write_plan::one_file(reader, &mut one, on_diag).map_err(io::Error::other)?;
    let st = &w.stats;
    let enc = one.enc.take().unwrap();
    let (events, counters) = (enc.events(), enc.counters);
    let bytes = w.bytes;
    let out = enc.into_inner()?;
    Ok((
        out,
        ExportStats {
            records: st.records,
            slices: st.slices,
            counters,
            flows: st.flows,
            processes: st.processes,
            events,
            bytes,
            lost_events: st.lost_events,
            block_requests: st.block_requests,
            late_counter_changes: st.late_counter_changes,
        },
    ))
}

/// The one output of [`export`]; keeps its encoder to hand the writer back.
struct One<W: Write> {
    out: Option<W>,
    enc: Option<ChromeEncoder<W>>,
}

impl<W: Write> mltrace_model::write_plan::Output for One<W> {
    type E = ChromeEncoder<W>;
    fn create(&mut self, _: &PlannedFile) -> io::Result<ChromeEncoder<W>> {
        let out = self.out.take().ok_or_else(|| io::Error::other("one file only"))?;
        Ok(ChromeEncoder::new(out))
    }
    fn finished(&mut self, enc: ChromeEncoder<W>) -> io::Result<()> {
        self.enc = Some(enc);
        Ok(())
    }
}
