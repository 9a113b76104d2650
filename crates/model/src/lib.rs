//! What an mltrace export shows, decided once for every writer.
//!
//! A log is read twice. The [`survey`] pass learns who each process is,
//! the training phases, how many events there are when, and the
//! [`overview`]'s aggregates; the [`scene`] pass turns records into
//! tracks, lanes, slices, counters and flows. Writers (Perfetto protobuf,
//! Chrome JSON) implement [`Encoder`] and only encode. [`plan`] decides
//! whether a log fits one file or becomes an overview plus parts, and
//! [`write_plan`] runs it all.

pub mod annotate;
pub mod args;
pub mod checkpoints;
pub mod disk_counters;
pub mod encoder;
pub mod event;
pub mod fmt;
pub mod grid;
pub mod heat;
pub mod maps;
pub mod overview;
pub mod overview_agg;
pub mod plan;
pub mod proc_rates;
pub mod procs;
pub mod pystack;
pub mod scene;
pub mod survey;
pub mod window;
pub mod write_plan;

pub use args::{ArgKey, ArgSink, Args, FnArgs, NoArgs};
pub use encoder::{
    Encoder, FileMeta, Name, ProcessDesc, Slice, SwitchEvent, Track, TrackId, TrackKind, Unit, WakingEvent,
};
pub use scene::{Filter, Scene, SceneStats};
pub use survey::{Found, Survey, Surveying};
