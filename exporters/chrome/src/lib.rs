//! Chrome trace-event JSON export: the content of the Perfetto export
//! (same slices, counters, flows, names and args) as a JSON object
//! `{"metadata":…, "traceEvents":[…], "mltraceTrailer":…}` that
//! chrome://tracing, the Perfetto UI and other trace viewers open. Written
//! event by event in bounded memory; see [`export`].

mod export;
mod json;
mod naming;

pub use export::{export, ExportStats, Exporter};
