//! Perfetto export: mltrace logs as Perfetto TrackEvent protobuf traces,
//! streamed packet by packet in bounded memory.

pub mod disk_counters;
pub mod export;
mod packets;
pub mod proto;
#[cfg(test)]
mod tests;
mod wire;

pub use export::{describe_status, export, export_with, ExportOptions, ExportStats, Exporter};
