//! Accumulation: what each subsystem's records add to [`crate::Stats`]
//! as the log streams by (the `Accept` impls and the tables they fill).
//! Uses neither the judgement ([`crate::judge`]) nor the presentation
//! ([`crate::show`]).

pub(crate) mod add;
pub(crate) mod async_io;
pub mod calls;
pub mod collectives;
pub mod gpu_calls;
pub mod gpu_idle;
pub mod grid;
pub(crate) mod hist;
pub mod hosts;
pub mod kernel;
pub mod kind_tables;
pub mod mapped;
pub mod metadata;
pub mod network;
pub mod peers;
pub mod python_lines;
pub mod rank_waits;
pub mod sched;
pub(crate) mod span_calls;
pub mod steps;
pub(crate) mod summary;
pub(crate) mod summed_reads;
pub mod timeline;
