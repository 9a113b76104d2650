//! Logs made up for mltrace's tests and benches, written with the log
//! crate's own writer: [`synthetic`], a training run of any length and
//! rate; [`sample`], a hand-made log with every kind the exporters draw,
//! and random interleavings of many processes' I/O. The log crate's own
//! round-trip tests build theirs in place (they cannot depend on a crate
//! that depends on it).

pub mod sample;
pub mod synthetic;
