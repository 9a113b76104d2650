//! A copy of what a recording writes, for a reader while it runs (the
//! live metrics): the header, then each frame of records as written,
//! uncompressed. The log never waits for the reader: a frame it has no
//! room for is counted in `skipped` and not sent.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use crate::Header;

/// The recorder's end.
pub struct FrameTap {
    pub tx: SyncSender<Tapped>,
    pub skipped: Arc<AtomicU64>,
}

/// What a [`FrameTap`] carries.
pub enum Tapped {
    Header(Box<Header>),
    Frame { payload: Vec<u8>, first_ts: u64, last_ts: u64 },
}

impl FrameTap {
    /// A tap holding up to `frames` frames not yet read (a second each).
    pub fn new(frames: usize) -> (FrameTap, Receiver<Tapped>) {
        let (tx, rx) = sync_channel(frames);
        (FrameTap { tx, skipped: Arc::default() }, rx)
    }
}
